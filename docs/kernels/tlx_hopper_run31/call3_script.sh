#!/usr/bin/env bash
# Session 29, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=520 bash devrun/call3.sh
# The default pma_buf_v=3: 1. tests/kernels in full; 2. A/B forward+backward on PMA q128 against
# the shared K/V ring (pma_buf_v=0), 6 rounds; 3. a full status table.
source benchmarks/device_call.sh
ratios() { python -c "import json,sys; print([round(json.loads(l)['$2'],3) for l in open('$1')])" 2>&1; }
timeout 280 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
grep -E "FAILED|Error" $OUT/tests_kernels.txt | head -20 >> $OUT/call.log
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab-bwd pma_buf_v=0 --ab-rounds 6 --out $OUT/ab_shared_kv.jsonl > $OUT/ab_shared_kv.log 2>&1
log "ab pma_buf_v=0 rc=$? $(ratios $OUT/ab_shared_kv.jsonl tlx_fwdbwd_abbwd_ratio)"
if [ $(left) -gt 100 ]; then
  timeout $(( $(left) - 8 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench31_2.jsonl > $OUT/bench31_2.log 2>&1
  log "bench rc=$? fb $(ratios $OUT/bench31_2.jsonl varlen_fwdbwd_ms_per_tlx)"
fi
finish
