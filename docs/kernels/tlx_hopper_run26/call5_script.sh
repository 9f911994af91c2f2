#!/usr/bin/env bash
# Session 24, call 5 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=470 bash devrun/call5.sh
# The final code (kernels as call 1's): tests/kernels in full, then a full-table status sample.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-470} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 300 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
if [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench26_4.jsonl > $OUT/bench26_4.log 2>&1
  log "bench 4 rc=$?"
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
