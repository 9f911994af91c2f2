#!/usr/bin/env bash
# Session 52's second call: run 50's removals (warm_first, merge_tail) tested in full; a probe of
# run 50's reading of the second split-tile group's first-run stall (a new stretch of its code
# waits behind the K/V loads every SM's eight ring stages keep queued at HBM): the q128 fill-0.1
# forward's timeline and A/B with four and six stages instead of eight. A shallower ring queues
# less, so if the reading holds that group's first bulk block and tail (6.2 and 4.7 µs in run 50)
# shrink with it; the A/B tells what the row pays for the shallower ring. Then tables.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run50/call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
tables bench50b 1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s (run 48: 266 s)
gpu_tests kernels tests/kernels
DEADLINE=$DEADLINE_SAVE
for nbuf in 4 6; do
  [ "$(left)" -gt 90 ] || break
  timeout 40 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 2 \
    --fwd-config num_buf_kv=$nbuf --out "$OUT/timeline_nbuf$nbuf.md" > "$OUT/timeline_nbuf$nbuf.log" 2>&1
  log "timeline nbuf$nbuf rc=$? $(grep -A3 '^| group | last K wait' "$OUT/timeline_nbuf$nbuf.md" | tail -2 | tr '\n' ' ')"
  AB_TIMEOUT=60 ab_run "nbuf$nbuf" tlx_fwd_ab_ratio --only "$ROW" --ab num_buf_kv=$nbuf
done
tables bench50c 3
finish
