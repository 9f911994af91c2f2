#!/usr/bin/env bash
# Prepared in session 52 as the next device call (an H200: run 50's calls b-d got H100s): the split
# tile with four K/V stages instead of eight (H100, PMA q128 fill 0.1: 0.991-0.993 in four
# processes; the H200 streams ~40 % faster, so it may want the deeper ring) A/B'd in three
# processes on that row, then status tables. A win becomes a `SPLIT_TILE_FIELDS` default.
# Run: CALL_S=420 bash docs/kernels/tlx_hopper_run51/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
for i in 1 2 3; do
  AB_TIMEOUT=45 ab_run "nbuf4_$i" tlx_fwd_ab_ratio --only "$ROW" --ab num_buf_kv=4
done
tables bench51 5
finish
