#!/usr/bin/env bash
# Session 28, call 6 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=330 bash devrun/call6.sh
# 128-key blocks for broadcast Q with long keys (fwd_config's long_kv): 1. the forward tests
# (the long-key cases included); 2. A/B forward, the old 64-key choice against the new default on
# PMA q128 (fill 0.1 / 0.5: the same config on both sides); 3. one full status table.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-330} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "forward or long_key" -n 14 -q -p no:cacheprovider > $OUT/tests_forward.txt 2>&1
log "forward tests rc=$? $(tail -1 $OUT/tests_forward.txt)"
grep -E "FAILED|Error" $OUT/tests_forward.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_forward.txt && ! grep -q "failed" $OUT/tests_forward.txt; then
  timeout 100 python -m benchmarks.tlx_hopper_bench --only "PMA q128" --baseline-rounds 1 --ab block_n=64,num_buf_kv=4,late_p_cast=True --ab-rounds 4 --out $OUT/ab_long_kv.jsonl > $OUT/ab_long_kv.log 2>&1
  log "ab old 64-key choice / new rc=$? $(python -c "import json; print([round(json.loads(l)['tlx_fwd_ab_ratio'],3) for l in open('$OUT/ab_long_kv.jsonl')])" 2>&1)"
  [ $(left) -gt 80 ] && timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench30_3.jsonl > $OUT/bench30_3.log 2>&1
  log "table rc=$?"
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
