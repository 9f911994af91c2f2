#!/usr/bin/env bash
# Prepared in session 50 (CPU only) as the next device call: the timeline's new ring-turn stamps
# (when the producer issued each of a CTA's first 64 K loads and when each consumer group's wait
# for it ended) tested on the GPU, then recorded on the PMA q128 fill-0.1 forward, whose second
# group sits idle until ~22 µs (run 48); then status tables while time is left.
# Run: CALL_S=400 bash docs/kernels/tlx_hopper_run49/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
gpu_tests timeline tests/kernels/test_tlx_hopper.py -k "timeline" && {
  timeout 60 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.1" --regime dirty --samples 5 \
    --save "$OUT/timeline_q128_fill01.pt" --out "$OUT/timeline_q128_fill01.md" > "$OUT/timeline.log" 2>&1
  log "timeline rc=$? $(head -1 "$OUT/timeline_q128_fill01.md")"
  # group 1's first epilogue ends at one instant in every CTA (runs 46-48, ±0.1 µs): is it the
  # L2's dirty lines (the dirty regime's preparation) or the kernel's own?
  for regime in none clean; do
    timeout 60 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.1" --regime $regime \
      --samples 3 --save "$OUT/timeline_q128_fill01_$regime.pt" \
      --out "$OUT/timeline_q128_fill01_$regime.md" >> "$OUT/timeline.log" 2>&1
    log "timeline $regime rc=$?"
  done
}
tables bench49 4
finish
