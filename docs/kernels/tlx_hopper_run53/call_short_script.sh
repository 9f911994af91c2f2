#!/usr/bin/env bash
# Prepared in session 57, whose budget held ~680 device-seconds after a start that found no machine:
# run 53's call_one_script.sh (suite first; removed since, never run) would leave early tiles'
# A/Bs no time. Here the new information comes first:
# 1. early tiles' tests (`-k early`: values, schedule, launcher, config) on the H200;
# 2. where they passed: `--ab early_tiles=True,swap_pairs=False` on the row in three processes,
#    chained and flipped into SPLIT_TILE_FIELDS at a mean ratio of 0.99 or less;
# 3. `tests/kernels` in full where its 390 s still fit, else skipped (said so);
# 4. tables with what time is left.
# Run: CALL_S=450 bash docs/kernels/tlx_hopper_run53/call_short_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 480
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 180 ))  # early tiles' tests get 120 s
gpu_tests early tests/kernels -k early
early_ok=$?
DEADLINE=$DEADLINE_SAVE
if [ $early_ok -eq 0 ]; then
  for i in 1 2 3; do
    AB_TIMEOUT=45 ab_run early_$i tlx_fwd_ab_ratio --only "$ROW" --ab early_tiles=True,swap_pairs=False
  done
  gate=$(ab_gate tlx_fwd_ab_ratio "$ROW<=0.99" "$OUT"/ab_early_[123].jsonl)
  log "early_tiles gate: $gate"
  [ "$gate" = yes ] && chain_put early_tiles 1 && flip_split_tile_field early_tiles True
else
  log "early tiles' tests did not pass: no A/B"
fi
if [ "$(left)" -ge 450 ]; then
  DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s
  gpu_tests kernels tests/kernels
  DEADLINE=$DEADLINE_SAVE
else
  log "suite skipped: $(left) s left, under the 450 s it and a table need"
fi
tables bench53s 3
finish
