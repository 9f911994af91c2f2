#!/usr/bin/env bash
# Run 46's last call (session 46), when call E could not be lent and ~4 device-minutes were left:
# the mended split tile's tests alone (split tiles, balanced split, head pairs, with the skewed
# cases; the q128 forward tests where the launcher takes the split tile), then, while time is
# left, the kernel before the mend on the skewed cases (expected to fail or hang).
# Run: CALL_S=150 bash docs/kernels/tlx_hopper_run46/call_f_script.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
DEADLINE=$(( DEADLINE + 50 ))  # gpu_tests keeps 60 s back; 10 are enough here
gpu_tests fwd_split tests/kernels -k "split or head_pairs or (q128 and not bwd and not backward and not grad)"
t=$(( $(left) - 8 )); [ "$t" -gt 45 ] && t=45
if [ "$t" -gt 15 ]; then
  cp devrun/old_fwd.py kernels/tlx_hopper_fwd.py
  timeout "$t" python -m pytest tests/kernels/test_tlx_hopper.py -k "skew and split_tiles_changes" -q \
    -p no:cacheprovider > "$OUT/tests_before_fix_skew.txt" 2>&1
  log "before-fix skew tests rc=$? $(tail -1 "$OUT/tests_before_fix_skew.txt")"
fi
finish
