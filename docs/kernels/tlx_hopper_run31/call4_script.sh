#!/usr/bin/env bash
# Session 29, call 4 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=300 bash devrun/call4.sh
# BwdConfig.pma_direct_store (dK/dV stored from the gradient warpgroup's registers): 1. its switch
# tests; 2. A/B forward+backward on PMA q128.
source benchmarks/device_call.sh
ratios() { python -c "import json,sys; print([round(json.loads(l)['$2'],3) for l in open('$1')])" 2>&1; }
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "test_backward_switch and direct" -n 14 -q -p no:cacheprovider > $OUT/tests_direct_store.txt 2>&1
log "direct_store tests rc=$? $(tail -1 $OUT/tests_direct_store.txt)"
grep -E "FAILED|Error" $OUT/tests_direct_store.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_direct_store.txt && ! grep -q "failed" $OUT/tests_direct_store.txt; then
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab-bwd pma_direct_store=True --ab-rounds 4 --out $OUT/ab_direct_store.jsonl > $OUT/ab_direct_store.log 2>&1
  log "ab direct_store rc=$? $(ratios $OUT/ab_direct_store.jsonl tlx_fwdbwd_abbwd_ratio) grad_rel $(ratios $OUT/ab_direct_store.jsonl ab_bwd_grad_rel)"
fi
finish
