#!/usr/bin/env bash
# Prepared in session 45 (no machine lent; sessions 43-45 got one device call between them) as the
# first of the next device calls, so that one call alone settles the most: (1) the forward's GPU
# tests (session 45 changed its launcher: a plan per call signature, constexprs passed
# positionally; the kernels' sm_90 SASS is unchanged; the set holds the timeline's and the
# balanced split's tests); (2) the host time per call (tlx_launch_probe; run 41's host: forward
# 87.7 us, backward 130.7 us; the CPU proxy went 54.7 -> 42.4 us over sessions 44-45); (3) the
# balanced split (FwdConfig.balanced_split, session 44) A/B'd twice on the one short row, PMA q128
# fill 0.1; (4) that row's per-CTA timeline with the default and with the balanced split (the
# groups' ends apart, the tail, the PDL wait); (5) its no-math bound. The rest of session 44's
# diagnostics follow in next_call_b_script.sh, head pairs in next_call_c_script.sh, tables in
# next_call_d_script.sh.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run46/next_call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "not backward and not pma" || { finish; exit; }
timeout 90 python -m benchmarks.tlx_launch_probe --calls 300 --cprofile > "$OUT/launch_probe_q128.md" 2>&1
log "launch probe rc=$? $(grep -E '^tlx_launch:' "$OUT/launch_probe_q128.md")"
ab_run balanced_1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
ab_run balanced_2 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
for spec in "default:" "balanced:balanced_split=True"; do
  name=${spec%%:*}; cfg=${spec#*:}
  [ "$(left)" -gt 100 ] || break
  timeout 90 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 5 \
    ${cfg:+--fwd-config "$cfg"} --save "$OUT/timeline_$name.pt" --out "$OUT/timeline_$name.md" \
    > "$OUT/timeline_$name.log" 2>&1
  log "timeline $name rc=$? $(head -1 "$OUT/timeline_$name.md")"
done
[ "$(left)" -gt 100 ] && {
  timeout 90 python -m benchmarks.tlx_fwd_bound --only "$ROW" --variant nomath \
    --out "$OUT/bound_nomath.jsonl" > "$OUT/bound_nomath.log" 2>&1
  log "bound nomath rc=$? $(ratios "$OUT/bound_nomath.jsonl" bound_ratio)"
}
[ "$(left)" -gt 60 ] && ab_run balanced_cost1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True,split_tile_cost=1"
finish
