#!/usr/bin/env bash
# Session 28, call 1 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=500 bash devrun/call1.sh
# BwdConfig.dkdv_dq_red (the fused dQ reduce-added from registers by red.global.add.v2.f32):
# 1. its switch tests; 2. A/B forward+backward on the rows of the fused pass; 3. the PMA q128 rows
# through the fused pass with it, against the split-role default.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-500} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "test_backward_switch and dq" -n 14 -q -p no:cacheprovider > $OUT/tests_dq_red.txt 2>&1
log "dq_red tests rc=$? $(tail -1 $OUT/tests_dq_red.txt)"
grep -E "FAILED|Error" $OUT/tests_dq_red.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_dq_red.txt && ! grep -q "failed" $OUT/tests_dq_red.txt; then
  timeout 200 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q192,self,dense" --baseline-rounds 1 --ab-bwd dkdv_dq_red=True --ab-rounds 4 --out $OUT/ab_dq_red.jsonl > $OUT/ab_dq_red.log 2>&1
  log "ab dq_red rc=$?"
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab-bwd pma_roles=False,dkdv_dq_red=True --ab-rounds 4 --out $OUT/ab_q128_fused_red.jsonl > $OUT/ab_q128_fused_red.log 2>&1
  log "ab q128 fused+red rc=$?"
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
