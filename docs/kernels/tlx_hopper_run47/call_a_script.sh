#!/usr/bin/env bash
# Prepared in session 47 (no machine lent: paused) as the first of the next device calls: the
# candidates for the last short goal (PMA q128 fill-0.1 forward), behind their GPU tests, A/B'd
# on that row (4 ABBA rounds, both sides checked against varlen; *_identical says bit-identity),
# the two gated ones twice first, then all four together (session 48: "package"):
#   free_group_split  a split tile to whichever group reaches it first (session 47)
#   shift_tail        a partial last K/V block loaded ending at the sequence's last key (session 47)
#   claim_tiles       the resident CTAs claim their pair's batch elements at run time (session 47)
#   local_order       no build kernel: the CTAs write the schedule themselves (session 47)
#   balanced_split    session 44's, A/B'd after run 46's ring mend (it hung before it)
#   head_pairs        session 43's, never measured
# then what the schedule build costs the call (--ab-schedule-cached), run 46's mend against
# 3f5ecba's kernel and the free-group split's timeline. tests/kernels in full and the default
# flips follow in next_call_b_script.sh (FLIPS from this call's gates, logged at the end and
# chained: issue calls A, B and C back to back in one message and B and C find them).
# Needs: git show 3f5ecba:kernels/tlx_hopper_fwd.py > devrun/old_fwd.py (untracked; it travels).
# Run: CALL_S=575 bash docs/kernels/tlx_hopper_run47/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
export AB_TIMEOUT=50
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 240 ))  # the tests get 180 s (run 46 call F: 122 in 52 s; more builds now)
gpu_tests new tests/kernels -k "shift_tail or claim or free_group or local_order or split_tiles or balanced or head_pairs" \
  && new_ok=1
DEADLINE=$DEADLINE_SAVE
if [ "${new_ok:-0}" = 1 ]; then
  # the gated two first (two A/Bs each), then all four together (can the row reach its goal?),
  # head pairs alone and with the other three (512 B K/V runs instead of the free group), the rest
  FREE="free_group_split=True,balanced_split=False"
  PAIRS="head_pairs=True,num_buf_kv=3,balanced_split=False,free_group_split=False"
  for spec in "free_1:$FREE" "shift_1:shift_tail=True" "free_2:$FREE" "shift_2:shift_tail=True" \
              "package_1:shift_tail=True,claim_tiles=True,local_order=True,$FREE" \
              "pairs_1:$PAIRS" \
              "package_pairs_1:shift_tail=True,claim_tiles=True,local_order=True,$PAIRS" \
              "claimfree_1:claim_tiles=True,$FREE" "local_1:local_order=True" \
              "balanced_1:balanced_split=True" "claim_1:claim_tiles=True"; do
    [ "$(left)" -gt 60 ] || break
    ab_run "${spec%%:*}" tlx_fwd_ab_ratio --only "$ROW" --ab "${spec#*:}"
  done
fi
# what the schedule build costs the row's call: the forward with its schedule cached / built
[ "$(left)" -gt 60 ] && ab_run cached_1 tlx_fwd_abcached_ratio --only "$ROW" --ab-schedule-cached
[ "$(left)" -gt 50 ] && {
  timeout 45 python -m benchmarks.tlx_fwd_bound --only "$ROW" --kernel-file devrun/old_fwd.py \
    --out "$OUT/ab_before_fix.jsonl" > "$OUT/ab_before_fix.log" 2>&1
  log "before-fix / fixed rc=$? $(ratios "$OUT/ab_before_fix.jsonl" bound_ratio)"
}
[ "$(left)" -gt 50 ] && {
  timeout 40 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 5 \
    --fwd-config "free_group_split=True,balanced_split=False" --save "$OUT/timeline_free.pt" \
    --out "$OUT/timeline_free.md" > "$OUT/timeline_free.log" 2>&1
  log "timeline free rc=$? $(head -1 "$OUT/timeline_free.md")"
}
# the split tile's defaults to flip in the next call (two A/Bs averaging 0.985 or less)
flips=""
for spec in "free:free_group_split=True" "shift:shift_tail=True"; do
  gate=$(ab_gate tlx_fwd_ab_ratio "$ROW<=0.985" "$OUT/ab_${spec%%:*}_1.jsonl" "$OUT/ab_${spec%%:*}_2.jsonl" 2>/dev/null)
  log "gate ${spec%%:*}: $gate"
  [ "$gate" = yes ] && flips="$flips ${spec#*:}"
done
log "FLIPS=\"${flips# }\""
chain_put flips "${flips# }"  # call B (and C) read it when issued right after this call
finish
