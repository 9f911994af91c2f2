#!/usr/bin/env bash
# Prepared in session 54 as the call after run 53's call a, on the same warm machine (issue it in
# the same message). Whether the q128 fill-0.1 forward's consumers still cost it anything, or only
# the way it moves its bytes does, was never measured on an H200:
# 0. call a's winner (early_tiles, else swap_pairs; chained only at a mean ratio of 0.99 or less)
#    flipped into SPLIT_TILE_FIELDS first (`flip_winner.sh`), so the tables run the merge candidate;
# 1. `tlx_fwd_bound` (session 44): the forward without its math (`nomath`: every consumer passes
#    its K/V blocks and stores zeros; loads, ring, stores and schedule real), nomath in two
#    processes, and without its stores too (`nostore`), A/B'd against the real one in the bench's
#    regime on q128 fill 0.1 / 0.9 and q192 fill 0.1. nomath / real near 1: the data movement is
#    the limit; well under 1: the consumers' chain is;
# 2. the HBM probe on the row (plain streaming of its bytes: run 26's 0.077 ms is the goal's size)
#    and its slices-over-rows ratio (run 47 measured it on an H100 only: 0.983);
# 3. tables.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run53/call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROWS="PMA q128 fill0.1,PMA q128 fill0.9,PMA q192 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
source docs/kernels/tlx_hopper_run53/flip_winner.sh
bound() {  # NAME VARIANT: tlx_fwd_bound on ROWS, 4 ABBA rounds, its ratios logged
  timeout 120 python -m benchmarks.tlx_fwd_bound --only "$ROWS" --variant "$2" --rounds 4 \
    --out "$OUT/bound_$1.jsonl" > "$OUT/bound_$1.log" 2>&1
  log "bound $1 rc=$? $(ratios "$OUT/bound_$1.jsonl" bound_ratio)"
}
bound nomath_1 nomath
bound nostore nostore
bound nomath_2 nomath
timeout 90 python -m benchmarks.hbm_probe --only "PMA q128 fill0.1" --out "$OUT/hbm_probe.md" \
  > "$OUT/hbm_probe.log" 2>&1
log "hbm probe rc=$? $(grep -m1 'q128 fill0.1' "$OUT/hbm_probe.md" | tr -s ' ')"
# one head's 256 B slices' time over whole 1 KB rows' at equal parallelism, O written: well above
# 1 would bring head pairs / row-wise loads back
log "slices over rows: $(python -m benchmarks.hbm_probe --rows-over-slices "$OUT/hbm_probe.md" | tr '\t' ' ')"
tables bench53b 4
finish
