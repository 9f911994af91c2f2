#!/usr/bin/env bash
# Session 28, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=300 bash devrun/call2.sh
# 1. A/B forward, PMA q128 with 128-key blocks (two stages, P cast before the PV issue: no spills)
#    on the current kernels; 2. A/B forward+backward, self with the two-pass backward (no fused dQ).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-300} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 120 python -m benchmarks.tlx_hopper_bench --only "PMA q128" --baseline-rounds 1 --ab block_n=128,num_buf_kv=2,late_p_cast=False --ab-rounds 4 --out $OUT/ab_bn128.jsonl > $OUT/ab_bn128.log 2>&1
log "ab bn128 rc=$?"
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "self" --baseline-rounds 1 --ab-bwd fused_dq=False --ab-rounds 3 --out $OUT/ab_self_two_pass.jsonl > $OUT/ab_self_two_pass.log 2>&1
log "ab self two-pass rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
