#!/usr/bin/env bash
# Session 23, call 1 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=560 bash devrun/call1.sh
# 1. FwdConfig.cross_tile (off): its tests; 2. its A/B on the PMA rows (forward and forward+backward);
# 3. tests/kernels in full on this code; 4. full-table status samples until the deadline.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-560} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "cross_tile" -n 12 -q -p no:cacheprovider > $OUT/tests_cross.txt 2>&1
log "cross tests rc=$? $(tail -1 $OUT/tests_cross.txt)"
timeout 130 python -m benchmarks.tlx_hopper_bench --bwd --only PMA --ab cross_tile=True --ab-rounds 4 --out $OUT/ab_cross.jsonl > $OUT/ab_cross.log 2>&1
log "ab cross rc=$?"
timeout 270 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
i=0
while [ $(left) -gt 70 ] && [ $i -lt 4 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench25_$i.jsonl > $OUT/bench25_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
