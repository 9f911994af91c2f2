#!/usr/bin/env bash
# Prepared in session 44 (as run 45's next_call_a_script.sh), reordered in session 45: the third
# of the next device calls, after next_call_a_script.sh (which took the launch probe, the balanced
# split's A/Bs at costs 2 and 1, the q128 fill-0.1 timelines and no-math bound, and the tests) and
# next_call_b_script.sh (head pairs). Here: (1) the forward's per-CTA timeline (benchmarks/tlx_timeline.py) of PMA q128 fill 0.1
# after a clean L2 (call A's: dirty), q192 fill 0.1 and q128 fill 0.9 (the .pt files are plotted
# locally: `--load F --plot F.png`); (2) the forward without its math (benchmarks/tlx_fwd_bound.py:
# nomath keeps the K/V loads, the ring's protocol and the O/LSE stores; nostore drops the stores
# too) on the rows call A left, A/B against the real one in the bench's regime; (3) session 43's
# HBM access-pattern probe (one head's 256 B slices against whole rows); (4) the balanced split
# at a per-tile cost of 4 blocks.
# Run: CALL_S=460 bash docs/kernels/tlx_hopper_run46/next_call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 500
source benchmarks/device_call.sh
for spec in "PMA q128 fill0.1:clean" "PMA q192 fill0.1:dirty" "PMA q128 fill0.9:dirty"; do
  shape=${spec%:*}; regime=${spec#*:}; tag=$(echo "$shape $regime" | tr ' .' '__')
  timeout 120 python -m benchmarks.tlx_timeline --shape "$shape" --regime "$regime" --samples 5 \
    --save "$OUT/timeline_$tag.pt" --out "$OUT/timeline_$tag.md" > "$OUT/timeline_$tag.log" 2>&1
  log "timeline $tag rc=$? $(head -1 "$OUT/timeline_$tag.md")"
done
timeout 120 python -m benchmarks.tlx_fwd_bound --only "PMA q192 fill0.1,PMA q128 fill0.9" \
  --variant nomath --out "$OUT/bound_nomath.jsonl" > "$OUT/bound_nomath.log" 2>&1
log "bound nomath rc=$? $(ratios "$OUT/bound_nomath.jsonl" bound_ratio)"
timeout 90 python -m benchmarks.tlx_fwd_bound --only "PMA q128 fill0.1" --variant nostore \
  --out "$OUT/bound_nostore.jsonl" > "$OUT/bound_nostore.log" 2>&1
log "bound nostore rc=$? $(ratios "$OUT/bound_nostore.jsonl" bound_ratio)"
timeout 120 python -m benchmarks.hbm_probe --only "PMA q128" --out "$OUT/hbm_probe.md" > "$OUT/hbm_probe.log" 2>&1
log "hbm_probe rc=$?"; cat "$OUT/hbm_probe.md" >> "$OUT/call.log"
[ "$(left)" -gt 60 ] && ab_run balanced_cost4 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" \
  --ab "balanced_split=True,split_tile_cost=4"
finish
