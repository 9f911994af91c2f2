#!/usr/bin/env bash
# Prepared in session 46 as run 46's second call. Call A found the balanced split hanging at the bench's shape,
# traced to the split tile's K/V ring: a group stepping over the other group's blocks only counted
# them, so after more than NUM_BUF_KV of them it could wait on a slot whose previous load had not
# landed (a parity-only mbarrier reads that as done: stale K/V, and a release that corrupts the
# ring). The fix: every group waits for and releases every block. With ~11 device-minutes left:
# (1) the split-tile, balanced-split and head-pair tests with the new skewed-length cases, and the
# q128 forward tests (where the launcher takes the split tile); (2) the fix's cost on the short row,
# A/B against the kernel before it (devrun/old_fwd.py = 3f5ecba's; bit-identical outputs required);
# (3) the balanced split's A/B, now that it can run; (4) the kernel before the fix on the skewed
# cases (expected to fail or hang: the bug's evidence); (5) while time is left, the same A/Bs again
# and the rest of tests/kernels.
# Not run in session 46 (no machine lent in time; call F ran its tests). Before running:
#   git show 3f5ecba:kernels/tlx_hopper_fwd.py > devrun/old_fwd.py   (untracked; it travels)
# Run: CALL_S=430 bash docs/kernels/tlx_hopper_run46/next_call_e_script.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
before_fix() {
  timeout 80 python -m benchmarks.tlx_fwd_bound --only "$ROW" --kernel-file devrun/old_fwd.py \
    --out "$OUT/ab_before_fix_$1.jsonl" > "$OUT/ab_before_fix_$1.log" 2>&1
  log "before-fix / fixed rc=$? $(ratios "$OUT/ab_before_fix_$1.jsonl" bound_ratio)"
}
CALL_END=$DEADLINE; DEADLINE=$(( DEADLINE - 55 ))  # the old kernel's evidence keeps 55 s
gpu_tests fwd_split tests/kernels -k "split or head_pairs or (q128 and not bwd and not backward and not grad)"
[ "$(left)" -gt 60 ] && before_fix 1
[ "$(left)" -gt 60 ] && AB_TIMEOUT=$(( $(left) > 80 ? 80 : $(left) )) ab_run balanced_1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
DEADLINE=$CALL_END
cp kernels/tlx_hopper_fwd.py /tmp/fixed_fwd.py && cp devrun/old_fwd.py kernels/tlx_hopper_fwd.py
t=$(( $(left) - 8 )); [ "$t" -gt 45 ] && t=45
timeout "$t" python -m pytest tests/kernels/test_tlx_hopper.py -k "skew and split_tiles_changes" -q \
  -p no:cacheprovider > "$OUT/tests_before_fix_skew.txt" 2>&1
log "before-fix skew tests rc=$? $(tail -1 "$OUT/tests_before_fix_skew.txt")"
grep -E "^E .*(mismatch|Mismatched|assert)" "$OUT/tests_before_fix_skew.txt" | head -5 >> "$OUT/call.log"
cp /tmp/fixed_fwd.py kernels/tlx_hopper_fwd.py && md5sum kernels/tlx_hopper_fwd.py >> "$OUT/call.log"
[ "$(left)" -gt 100 ] && before_fix 2
[ "$(left)" -gt 100 ] && AB_TIMEOUT=80 ab_run balanced_2 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
[ "$(left)" -gt 120 ] && gpu_tests rest tests/kernels -k "not split and not head_pairs and not (q128 and not bwd and not backward and not grad)"
finish
