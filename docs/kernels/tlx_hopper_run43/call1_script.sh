#!/usr/bin/env bash
# Session 41, run 43 call 1: the three-step PMA q192 backward (`BwdConfig.pma3`, new, CPU
# compile-checked only): a smoke test with a short timeout (a deadlock costs 150 s, not 300),
# then its GPU tests, then, where they pass, two A/B processes (forward+backward, 4 ABBA rounds)
# on the PMA q192 rows against the default fused dK/dV pass.
# Run: CALL_S=570 bash devrun/call1.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -q -p no:cacheprovider -x \
  -k "bwd-pma3 and B120-q192" > "$OUT/tests_smoke.txt" 2>&1
log "smoke rc=$? $(tail -1 "$OUT/tests_smoke.txt")"
if grep -q " passed" "$OUT/tests_smoke.txt" && ! grep -q "failed" "$OUT/tests_smoke.txt"; then
  if gpu_tests pma3 tests/kernels/test_tlx_hopper.py -k "pma3"; then
    ab_run pma3_1 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma3=True"
    ab_run pma3_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma3=True"
  fi
else
  grep -E "Error|error|assert|Timeout" "$OUT/tests_smoke.txt" | head -20 >> "$OUT/call.log"
fi
finish
