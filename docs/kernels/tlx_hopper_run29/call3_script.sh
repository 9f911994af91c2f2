#!/usr/bin/env bash
# Session 27, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=200 bash devrun/call3.sh
# main after the two removals (kernels = d7e9a77's): two full status tables.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-200} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
for i in 2 3; do
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench29_$i.jsonl > $OUT/bench29_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
