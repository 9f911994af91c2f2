#!/usr/bin/env bash
# Session 29, call 6 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=240 bash devrun/call6.sh
# BwdConfig.pma_stage_over_v again, now over the split V ring: 1. its switch tests; 2. A/B
# forward+backward on PMA q128.
source benchmarks/device_call.sh
ratios() { python -c "import json,sys; print([round(json.loads(l)['$2'],3) for l in open('$1')])" 2>&1; }
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "test_backward_switch and stage" -n 14 -q -p no:cacheprovider > $OUT/tests_stage_over_v.txt 2>&1
log "stage_over_v tests rc=$? $(tail -1 $OUT/tests_stage_over_v.txt)"
grep -E "FAILED|Error" $OUT/tests_stage_over_v.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_stage_over_v.txt && ! grep -q "failed" $OUT/tests_stage_over_v.txt; then
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab-bwd pma_stage_over_v=True --ab-rounds 4 --out $OUT/ab_stage_over_v.jsonl > $OUT/ab_stage_over_v.log 2>&1
  log "ab stage_over_v rc=$? $(ratios $OUT/ab_stage_over_v.jsonl tlx_fwdbwd_abbwd_ratio)"
fi
finish
