#!/usr/bin/env bash
# Call d: does the second consumer group's first epilogue stall where both groups run it at the
# same instant? The PMA q128 fill-0.5 forward's ping-pong tile (both groups share each tile, so
# their first epilogues coincide) timed by the epilogue stamps: group 1 slower than group 0 there
# ties the stall to its copy of the code, not to when in the launch it runs. Then the four-stage
# ring's A/B on the q128 fill-0.1 row (H100: 0.993 / 0.991).
# Run: CALL_S=200 bash docs/kernels/tlx_hopper_run50/call_d_script.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
timeout 45 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.5" --regime dirty --samples 2 \
  --out "$OUT/timeline_q128_fill05.md" > "$OUT/timeline_q128_fill05.log" 2>&1
log "timeline q128 fill0.5 rc=$? $(grep -A3 '^| group | last K wait' "$OUT/timeline_q128_fill05.md" | tail -2 | tr '\n' ' ')"
for i in 1 2; do
  [ "$(left)" -gt 50 ] && AB_TIMEOUT=45 ab_run "nbuf4_$i" tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab num_buf_kv=4
done
finish
