#!/usr/bin/env bash
# Prepared in session 52 as the next device call (an H200 wanted: run 50's calls b-d got H100s).
# 1. Which group stalls when the split tile's groups swap their tiles (`FwdConfig.split_first=1`:
#    group 1 takes each CTA's first tile, group 0 the second)? Runs 49-50: the second group's first
#    tile loses ~5-7 µs whenever it runs and whatever the ring depth, the ping-pong tile's groups
#    do not. A stall moving to group 0 ties it to being second in time; one staying in group 1
#    ties it to that group's copy of the code. Its GPU tests first, the timeline only if they pass.
# 2. The split tile with four K/V stages instead of eight (H100, PMA q128 fill 0.1: 0.991-0.993 in
#    four processes; the H200 streams ~40 % faster, so it may want the deeper ring) A/B'd in three
#    processes on that row; a win becomes a `SPLIT_TILE_FIELDS` default.
# 3. Status tables.
# Run: CALL_S=450 bash docs/kernels/tlx_hopper_run51/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 150 ))  # the tests get 90 s
gpu_tests split_first tests/kernels/test_tlx_hopper.py -k "split_first or split_tiles" && {
  timeout 45 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 2 \
    --fwd-config split_first=1 --out "$OUT/timeline_split_first.md" > "$OUT/timeline_split_first.log" 2>&1
  log "timeline split_first rc=$? $(grep -A3 '^| group | last K wait' "$OUT/timeline_split_first.md" | tail -2 | tr '\n' ' ')"
}
DEADLINE=$DEADLINE_SAVE
for i in 1 2 3; do
  AB_TIMEOUT=45 ab_run "nbuf4_$i" tlx_fwd_ab_ratio --only "$ROW" --ab num_buf_kv=4
done
tables bench51 5
finish
