#!/usr/bin/env bash
# Session 25, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=330 bash devrun/call3.sh
# The final code (warp_arrive on for PMA D=128): tests/kernels in full, then full-table status
# samples until the deadline.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-330} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 250 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
i=0
while [ $(left) -gt 50 ] && [ $i -lt 2 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 3 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench27_$i.jsonl > $OUT/bench27_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
