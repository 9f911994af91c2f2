#!/usr/bin/env bash
# Prepared in session 55 as the third call of run 53, on the same warm machine after calls a and b
# (issue it in the same message when the budget holds ~450 s more: a start ~150 s, calls a and b
# 560 s each). The issue's first "done" point is the whole `tests/kernels` suite passing on the
# H200; its last full run (run 52) had 1,039 passed and 1 failed, a test's own configuration
# (`test_shift_tail_reads_no_row_of_the_next_sequence`: tail_branch left on), mended since and run
# first by call a. This call runs the suite on the code the tables time:
# 0. call a's winner (early_tiles, else swap_pairs; chained only at a mean ratio of 0.99 or less)
#    flipped into SPLIT_TILE_FIELDS, as call b does (`flip_winner.sh`);
# 1. `tests/kernels` in full (run 52: 226 s of pytest), given 330 s, only where that much is left
#    (a shorter call keeps its tables instead);
# 2. tables with what time is left.
# Run: CALL_S=440 bash docs/kernels/tlx_hopper_run53/call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 480
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
source docs/kernels/tlx_hopper_run53/flip_winner.sh
if [ "$(left)" -ge 390 ]; then
  DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s
  gpu_tests kernels tests/kernels
  DEADLINE=$DEADLINE_SAVE
else
  log "suite skipped: $(left) s left, under the 390 s it needs"
fi
tables bench53c 3
finish
