#!/usr/bin/env bash
# Session 29, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=420 bash devrun/call2.sh
# BwdConfig.pma_buf_v (V in a ring of its own in the split-role pass): 1. its switch tests;
# 2. A/B forward+backward on PMA q128: 4 K + 2 V slots, 3 K + 3 V slots (each the same 96 KB).
source benchmarks/device_call.sh
ratios() { python -c "import json,sys; print([round(json.loads(l)['$2'],3) for l in open('$1')])" 2>&1; }
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "test_backward_switch and split" -n 14 -q -p no:cacheprovider > $OUT/tests_split_v.txt 2>&1
log "split_v tests rc=$? $(tail -1 $OUT/tests_split_v.txt)"
grep -E "FAILED|Error" $OUT/tests_split_v.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_split_v.txt && ! grep -q "failed" $OUT/tests_split_v.txt; then
  for c in "pma_buf_kv=4,pma_buf_v=2" "pma_buf_kv=3,pma_buf_v=3"; do
    [ $(left) -lt 70 ] && break
    n=$(echo $c | tr -cd '0-9')
    timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab-bwd $c --ab-rounds 4 --out $OUT/ab_split_v$n.jsonl > $OUT/ab_split_v$n.log 2>&1
    log "ab $c rc=$? $(ratios $OUT/ab_split_v$n.jsonl tlx_fwdbwd_abbwd_ratio)"
  done
fi
finish
