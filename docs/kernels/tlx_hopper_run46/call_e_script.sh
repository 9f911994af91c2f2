#!/usr/bin/env bash
# Run 46's second call (session 46). Call A found the balanced split hanging at the bench's shape
# and traced to the split tile's K/V ring: a group stepping over the other group's blocks only
# counted them, so after more than NUM_BUF_KV of them it could wait on a slot whose previous load
# had not landed (a parity-only mbarrier reads that as done: stale K/V and a release that corrupts
# the ring). The fix: every group waits for and releases every block. This call: (1) the split-tile,
# balanced-split and head-pair tests with the new skewed-length cases; (2) the fix's cost on the
# short row, A/B against the kernel before it (devrun/old_fwd.py = 3f5ecba's, bit-identical
# outputs required), twice; (3) the balanced split's A/B twice, now that it can run; (4) the rest
# of tests/kernels; (5) last, the kernel before the fix on the skewed cases (expected to fail or
# hang: the bug's evidence).
# Run: CALL_S=520 bash docs/kernels/tlx_hopper_run46/call_e_script.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
gpu_tests split tests/kernels -k "split or head_pairs"
for i in 1 2; do
  timeout 90 python -m benchmarks.tlx_fwd_bound --only "$ROW" --kernel-file devrun/old_fwd.py \
    --out "$OUT/ab_before_fix_$i.jsonl" > "$OUT/ab_before_fix_$i.log" 2>&1
  log "before-fix / fixed rc=$? $(ratios "$OUT/ab_before_fix_$i.jsonl" bound_ratio)"
done
export AB_TIMEOUT=90
ab_run balanced_1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
ab_run balanced_2 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
CALL_END=$DEADLINE; DEADLINE=$(( DEADLINE - 60 ))  # keep a minute for the old kernel's evidence
gpu_tests rest tests/kernels -k "not split and not head_pairs"
DEADLINE=$CALL_END
cp devrun/old_fwd.py kernels/tlx_hopper_fwd.py
t=$(( $(left) - 10 )); [ "$t" -gt 50 ] && t=50
timeout "$t" python -m pytest tests/kernels/test_tlx_hopper.py -k "skew and split_tiles_changes" -q \
  -p no:cacheprovider > "$OUT/tests_before_fix_skew.txt" 2>&1
log "before-fix skew tests rc=$? $(tail -1 "$OUT/tests_before_fix_skew.txt")"
finish
