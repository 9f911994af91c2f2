#!/usr/bin/env bash
# Session 41, run 43 call 5: the shared-role pass at two steps (PMA q128, a switch) against the
# split-role default: a smoke test (one q128 switch case and one q192 default case), its GPU
# tests, one A/B process on the PMA q128 rows.
# Run: CALL_S=200 bash devrun/call5.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 240
source benchmarks/device_call.sh
timeout 90 python -m pytest tests/kernels/test_tlx_hopper.py -q -p no:cacheprovider -x \
  -k "(bwd-pma-shared-q128 and B120-q100) or (test_backward[ and B120-q192-kv300)" > "$OUT/tests_smoke.txt" 2>&1
log "smoke rc=$? $(tail -1 "$OUT/tests_smoke.txt")"
if grep -q " passed" "$OUT/tests_smoke.txt" && ! grep -q "failed" "$OUT/tests_smoke.txt"; then
  if gpu_tests shared_q128 tests/kernels/test_tlx_hopper.py -k "pma-shared-q128 or pma_shared_roles_backward"; then
    ab_run shared_q128 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd "pma_shared_roles=True"
  fi
else
  grep -E "Error|error|assert|Timeout" "$OUT/tests_smoke.txt" | head -20 >> "$OUT/call.log"
fi
finish
