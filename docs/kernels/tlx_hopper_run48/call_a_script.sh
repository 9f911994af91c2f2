#!/usr/bin/env bash
# Prepared in session 49 as the first of the next device calls (an H200 wanted: run 47 ran on an
# H100): run 47's merge (the shifted tail on for broadcast Q at D = 128 without a mask) and its
# removals (five losing candidates and prefetch_heads) tested in full, the kernels' checksum
# chained when the suite passes; then, on the q128 fill-0.1 row, the packed key stream's best case
# (`tlx_packed_bound`), the forward's timeline (dirty L2) and its no-math bound. Tables follow in run 47's next_call_c_script.sh (no flips
# chained here; it skips the suite when this call's passed on its code).
# Run: CALL_S=575 bash docs/kernels/tlx_hopper_run48/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s (run 47: 316 s)
gpu_tests kernels tests/kernels && chain_put tested_md5 "$(kernels_md5)"
DEADLINE=$DEADLINE_SAVE
# the packed key stream's best case: the row against its keys re-cut to whole 32-key blocks
[ "$(left)" -gt 60 ] && {
  timeout 55 python -m benchmarks.tlx_packed_bound --only "$ROW" --out "$OUT/packed_bound.jsonl" \
    > "$OUT/packed_bound.log" 2>&1
  log "packed bound rc=$? $(ratios "$OUT/packed_bound.jsonl" packed_ratio)"
}
[ "$(left)" -gt 60 ] && {
  timeout 50 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 5 \
    --save "$OUT/timeline_q128_fill01.pt" --out "$OUT/timeline_q128_fill01.md" > "$OUT/timeline.log" 2>&1
  log "timeline rc=$? $(head -1 "$OUT/timeline_q128_fill01.md")"
}
[ "$(left)" -gt 60 ] && {
  timeout 50 python -m benchmarks.tlx_fwd_bound --only "$ROW" --variant nomath \
    --out "$OUT/bound_nomath.jsonl" > "$OUT/bound_nomath.log" 2>&1
  log "bound nomath rc=$? $(ratios "$OUT/bound_nomath.jsonl" bound_ratio)"
}
finish
