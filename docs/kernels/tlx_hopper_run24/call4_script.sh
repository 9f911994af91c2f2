#!/usr/bin/env bash
# Run 24, call 4 (session 22): full-table samples of the final code, the first with CUDA-graph times.
set -u
T0=$(date +%s)
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/tlx_hopper.py kernels/tlx_hopper_fwd.py > $OUT/md5.txt
timeout 100 python -m benchmarks.tlx_hopper_bench --bwd --graph --baseline-rounds 2 --out $OUT/bench24_8.jsonl > $OUT/bench24_8.log 2>&1
log "bench 8 (graph) rc=$?"
timeout 70 python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench24_9.jsonl > $OUT/bench24_9.log 2>&1
log "bench 9 rc=$?"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
