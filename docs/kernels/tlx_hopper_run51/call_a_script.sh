#!/usr/bin/env bash
# Prepared in session 52 as the next device call (an H200 wanted: run 50's calls b-d got H100s).
# 1. Tests: `FwdConfig.split_first`, `tail_branch` and `first_branch` (all off), with the split
#    tile's.
# 2. Which group stalls when the split tile's groups swap their tiles (`split_first=1`: group 1
#    takes each CTA's first tile)? Runs 49-50: the second group's first tile loses ~5-7 µs whenever
#    it runs and whatever the ring depth. A stall moving to group 0 ties it to being second in
#    time; one staying in group 1 ties it to that replica's code (run 50's reading: first
#    executions slow beyond ~60-64 KB of the 83.6 KB split build).
# 3. Less code: `tail_branch` (the shifted last block in the bulk loop, its mask under a run-time
#    branch) with `first_branch` (the first block's one softmax, its mask under the branch that
#    now picks between two copies): the split build 5,224 -> 3,904 SASS instructions (62.5 KB).
#    Its split-tile timeline (does the second group's stall shrink with the code?), two A/Bs on
#    the six PMA rows; `first_branch` alone on every row (it changes every forward build).
# 4. The split tile with four K/V stages instead of eight (H100: 0.991-0.993 in four processes; the
#    H200 streams ~40 % faster, so it may want the deeper ring), two processes on that row.
# 5. Status tables with what time is left.
# Winners become defaults (`fwd_config`; `SPLIT_TILE_FIELDS` for the split tile).
# Run: CALL_S=580 bash docs/kernels/tlx_hopper_run51/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
BOTH="tail_branch=True,first_branch=True"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
timeline() {  # NAME FWD-CONFIG: the row's timeline (L2 dirty, two samples), its epilogue table logged
  timeout 45 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 2 \
    --fwd-config "$2" --out "$OUT/timeline_$1.md" > "$OUT/timeline_$1.log" 2>&1
  log "timeline $1 rc=$? $(grep -A3 '^| group | last K wait' "$OUT/timeline_$1.md" | tail -2 | tr '\n' ' ')"
}
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 190 ))  # the tests get 130 s
gpu_tests new tests/kernels/test_tlx_hopper.py -k "split_first or split_tiles or tail_branch or first_branch"
tested=$?
DEADLINE=$DEADLINE_SAVE
if [ "$tested" = 0 ]; then
  timeline split_first split_first=1
  timeline branches "$BOTH"
  for i in 1 2; do
    AB_TIMEOUT=80 ab_run "branches_$i" tlx_fwd_ab_ratio --only "PMA" --ab "$BOTH"
  done
  AB_TIMEOUT=120 ab_run first_branch tlx_fwd_ab_ratio --ab first_branch=True
fi
for i in 1 2; do
  AB_TIMEOUT=45 ab_run "nbuf4_$i" tlx_fwd_ab_ratio --only "$ROW" --ab num_buf_kv=4
done
tables bench51 3
finish
