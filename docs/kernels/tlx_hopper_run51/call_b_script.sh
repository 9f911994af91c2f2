#!/usr/bin/env bash
# Prepared in session 53 after call a (an H100): the split tile's stall stayed with group 1 when
# the groups swapped their tiles (it follows the second consumer replica's code) and was gone
# with one block body per consumer (tail_branch + first_branch: 3,904 SASS). Merged on that H100
# evidence: both branches for the 32-key broadcast tiles (q192 fill 0.1 0.982 / 0.982, q128 fill
# 0.1 0.988 / 0.988) and the split tile's four K/V stages (with both 0.980 / 0.979). This call:
# 1. Tests of the new defaults: the split tile, the short-key cases, the switches' identity flips.
# 2. Reverse A/Bs on the H200 (the candidate is the old default: a ratio above 1 means the new
#    default is faster): q128 fill 0.1 all three and eight stages alone, q192 fill 0.1 the
#    branches; two processes each.
# 3. The new default's timeline on that row (does the second group's stall stay gone?).
# 4. Status tables with what time is left.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run51/call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
OLD_Q128="tail_branch=False,first_branch=False,num_buf_kv=8"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 190 ))  # the tests get 130 s
gpu_tests defaults tests/kernels/test_tlx_hopper.py \
  -k "split_tiles or tail_branch or first_branch or short or switch_changes"
DEADLINE=$DEADLINE_SAVE
for i in 1 2; do
  AB_TIMEOUT=45 ab_run "old_q128_$i" tlx_fwd_ab_ratio --only "$ROW" --ab "$OLD_Q128"
  AB_TIMEOUT=45 ab_run "nbuf8_$i" tlx_fwd_ab_ratio --only "$ROW" --ab num_buf_kv=8
  AB_TIMEOUT=45 ab_run "old_q192_$i" tlx_fwd_ab_ratio --only "PMA q192 fill0.1" \
    --ab tail_branch=False,first_branch=False
done
timeout 45 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 2 \
  --out "$OUT/timeline_default.md" > "$OUT/timeline_default.log" 2>&1
log "timeline default rc=$? $(grep -A3 '^| group | last K wait' "$OUT/timeline_default.md" | tail -2 | tr '\n' ' ')"
tables bench51b 6
finish
