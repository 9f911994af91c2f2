#!/usr/bin/env bash
# Session 28, call 5 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=300 bash devrun/call5.sh
# The final code (kernel files = run 29's): two full status tables.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-300} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
for i in 1 2; do
  [ $(left) -lt 80 ] && break
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench30_$i.jsonl > $OUT/bench30_$i.log 2>&1
  log "table $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
