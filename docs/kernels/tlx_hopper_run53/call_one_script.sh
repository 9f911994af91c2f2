#!/usr/bin/env bash
# Prepared in session 56 for when the budget holds one call only (session 56 lost ~10 device-minutes
# to starts that found no machine). What decides issue 5 first: the whole suite on the code as it
# stands (the first "done" point; early tiles' GPU tests are in it), then early tiles'
# A/Bs on the row, then tables with the winner flipped in.
# 1. `tests/kernels` in full, given 330 s (run 52: 226 s of pytest);
# 2. where early tiles' tests passed there: `--ab early_tiles=True,swap_pairs=False` on the row in
#    three processes, chained and flipped into SPLIT_TILE_FIELDS at a mean ratio of 0.99 or less;
# 3. tables with what time is left.
# Run: CALL_S=580 bash docs/kernels/tlx_hopper_run53/call_one_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s
gpu_tests kernels tests/kernels
DEADLINE=$DEADLINE_SAVE
if ! grep -q "FAILED.*early_tiles" "$OUT/tests_kernels.txt" \
   && grep -q " passed" "$OUT/tests_kernels.txt"; then
  for i in 1 2 3; do
    AB_TIMEOUT=45 ab_run early_$i tlx_fwd_ab_ratio --only "$ROW" --ab early_tiles=True,swap_pairs=False
  done
  gate=$(ab_gate tlx_fwd_ab_ratio "$ROW<=0.99" "$OUT"/ab_early_[123].jsonl)
  log "early_tiles gate: $gate"
  [ "$gate" = yes ] && chain_put early_tiles 1 && flip_split_tile_field early_tiles True
else
  log "early tiles' tests did not pass (or did not run): no A/B"
fi
tables bench53one 3
finish
