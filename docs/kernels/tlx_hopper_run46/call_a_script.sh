#!/usr/bin/env bash
# Prepared in session 45 (no machine lent; sessions 43-45 got one device call between them) as the
# first of the next device calls, so that one call alone settles the most. Measurements first
# (timings right after pytest came out host-stalled in run 41), `tests/kernels` in full last:
# (1) the host time per call (tlx_launch_probe; run 41's host: forward 87.7 us, backward 130.7 us;
# the CPU proxy went 54.7 -> 40.4 us over sessions 44-45); (2) the balanced split
# (FwdConfig.balanced_split, session 44) A/B'd twice on the one short row, PMA q128 fill 0.1 (the
# bench rows check both sides' O against varlen and for bit-identity); (3) that row's per-CTA
# timeline with the alternating and the balanced split (the groups' ends apart, the tail, the PDL
# wait); (4) its no-math bound; (5) the balanced split at a per-tile cost of 1; (6) when the two
# A/Bs' mean is 0.985 or less, the balanced split made the default in this call's tree
# (flip_balanced.py: one line of kernels/tlx_hopper.py; the tests are written for either default);
# (7) `tests/kernels` in full, on that default: session 45 changed the forward's launcher (a plan
# per call signature) and the schedule build's (constexprs passed positionally in both; the
# kernels' sm_90 SASS unchanged); the suite holds the timeline's and the balanced split's tests. Head pairs follow in
# next_call_b_script.sh, the rest of session 44's diagnostics in next_call_c_script.sh, tables in
# next_call_d_script.sh.
# Run: CALL_S=570 bash docs/kernels/tlx_hopper_run46/next_call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
TESTS_S=330  # tests/kernels in full: 279-307 s in run 44
timeout 90 python -m benchmarks.tlx_launch_probe --calls 300 --cprofile > "$OUT/launch_probe_q128.md" 2>&1
log "launch probe rc=$? $(grep -E '^tlx_launch:' "$OUT/launch_probe_q128.md")"
export AB_TIMEOUT=60  # an A/B of one row takes ~15 s (run 45); the tests keep their time
ab_run balanced_1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
ab_run balanced_2 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
for spec in "default:" "balanced:balanced_split=True"; do
  name=${spec%%:*}; cfg=${spec#*:}
  [ "$(left)" -gt $(( TESTS_S + 60 )) ] || break
  timeout 60 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 5 \
    ${cfg:+--fwd-config "$cfg"} --save "$OUT/timeline_$name.pt" --out "$OUT/timeline_$name.md" \
    > "$OUT/timeline_$name.log" 2>&1
  log "timeline $name rc=$? $(head -1 "$OUT/timeline_$name.md")"
done
[ "$(left)" -gt $(( TESTS_S + 60 )) ] && {
  timeout 60 python -m benchmarks.tlx_fwd_bound --only "$ROW" --variant nomath \
    --out "$OUT/bound_nomath.jsonl" > "$OUT/bound_nomath.log" 2>&1
  log "bound nomath rc=$? $(ratios "$OUT/bound_nomath.jsonl" bound_ratio)"
}
[ "$(left)" -gt $(( TESTS_S + 40 )) ] && AB_TIMEOUT=40 ab_run balanced_cost1 tlx_fwd_ab_ratio \
  --only "$ROW" --ab "balanced_split=True,split_tile_cost=1"
gate=$(ab_gate tlx_fwd_ab_ratio "$ROW<=0.985" "$OUT/ab_balanced_1.jsonl" "$OUT/ab_balanced_2.jsonl")
log "balanced split gate: $gate"
[ "$gate" = yes ] && python docs/kernels/tlx_hopper_run46/flip_balanced.py >> "$OUT/call.log" 2>&1 \
  && md5sum kernels/*.py > "$OUT/md5_flipped.txt"
gpu_tests kernels tests/kernels
finish
