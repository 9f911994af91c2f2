#!/usr/bin/env bash
# Prepared in session 53 as the call after run 52's call a, on the same warm machine: the final
# code's `tests/kernels` in full on the H200 (its last full run was run 50's code on an H100; run
# 51 changed the 32-key broadcast tiles' defaults and ran their tests only), then tables. Issue it
# after call a's defaults are settled (a flip of balanced_split into SPLIT_TILE_FIELDS first).
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run52/call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
# call a's balanced_split winner (chained only at a mean ratio of 0.99 or less) into
# SPLIT_TILE_FIELDS, so the suite and the tables below run the merge candidate
if cost=$(chain_get balanced_cost); then
  sed -i "s/\"first_branch\": True})/\"first_branch\": True, \"balanced_split\": True, \"split_tile_cost\": $cost})/" \
    kernels/tlx_hopper.py
  if grep -q "\"split_tile_cost\": $cost})" kernels/tlx_hopper.py; then
    md5sum kernels/*.py > "$OUT/md5_flipped.txt"
    log "flipped: balanced_split=True, split_tile_cost=$cost in SPLIT_TILE_FIELDS"
  else
    log "flip of balanced_split (cost $cost) failed: SPLIT_TILE_FIELDS not found; the default runs"
  fi
fi
tables bench52b 1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s (run 48: 266 s)
gpu_tests kernels tests/kernels
DEADLINE=$DEADLINE_SAVE
tables bench52c 3
finish
