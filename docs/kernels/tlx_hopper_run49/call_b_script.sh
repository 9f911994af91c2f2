#!/usr/bin/env bash
# Session 51, after run 49's call a: the split tile's second group waits ~6 µs in its first own
# tile's epilogue, ending at one instant in every CTA. The diagnostic build now also stamps that
# epilogue's phases (last PV done, O normalised; `tlx_timeline.epilogue_stamps`): tested on the GPU,
# then recorded on the PMA q128 fill-0.1 forward (L2 dirty and clean), then tables while time is left.
# Run: CALL_S=300 bash docs/kernels/tlx_hopper_run49/call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
gpu_tests timeline tests/kernels/test_tlx_hopper.py -k "timeline" && {
  for regime in dirty clean; do
    timeout 60 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.1" --regime $regime \
      --samples 3 --save "$OUT/timeline_b_$regime.pt" --out "$OUT/timeline_b_$regime.md" \
      >> "$OUT/timeline.log" 2>&1
    log "timeline $regime rc=$? $(tail -4 "$OUT/timeline_b_$regime.md" | tr '\n' ' ')"
  done
}
tables bench49c 3
finish
