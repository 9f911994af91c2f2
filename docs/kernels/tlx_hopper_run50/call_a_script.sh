#!/usr/bin/env bash
# Prepared in session 51 (CPU only) as the next device call: FwdConfig.warm_first (each split-tile
# CTA's first pair of tiles swapped with a medium pair a quarter of the way in, so both consumer
# groups run all their code early: run 49 found the second group's first runs of its bulk loop,
# tail and epilogue ~5-7 µs slow, ending at one instant in every CTA). Its GPU tests, then its A/B on
# the PMA q128 fill-0.1 row, the only bench row the split tile runs (two processes of 4 ABBA
# rounds), and its timeline; then tables while time is left.
# Run: CALL_S=420 bash docs/kernels/tlx_hopper_run50/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
gpu_tests warm tests/kernels/test_tlx_hopper.py -k "warm_first or split_tiles or timeline" && {
  for i in 1 2; do
    AB_TIMEOUT=80 ab_run "warm_$i" tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab warm_first=True
  done
  timeout 60 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.1" --regime dirty \
    --samples 3 --fwd-config warm_first=True --out "$OUT/timeline_warm.md" > "$OUT/timeline.log" 2>&1
  log "timeline warm rc=$? $(tail -4 "$OUT/timeline_warm.md" | tr '\n' ' ')"
  # the "no instruction" stalls by warp role and address (sass_*.csv.gz), default and warm_first
  ncu_by_role default_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
  ncu_by_role warm_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config warm_first=True
}
tables bench50 3
finish
