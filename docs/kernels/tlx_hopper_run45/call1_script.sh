#!/usr/bin/env bash
# Run 45 call 1 (session 43): split tiles cut into 64-row slices over three consumer groups
# (FwdConfig.split_groups=3, split_slices=2, consumer_regs=160; the default: two groups of whole
# 128-row tiles). Its GPU tests (against the reference and bit-identical with the default split
# tile, 6 + the default split tile's 6); forward A/Bs on PMA q128 fill 0.1 (3 processes of 4 ABBA
# rounds); the write-back probe (device-only times) with and without; Nsight Compute of both.
# Run: CALL_S=560 bash devrun/call1.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
CAND="split_groups=3,split_slices=2,consumer_regs=160"
if gpu_tests slices tests/kernels/test_tlx_hopper.py -k "split_slices or split_tiles_changes"; then
  ab_run slices_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  for cfg in "" "$CAND"; do
    timeout 60 python -m benchmarks.writeback_probe --only "PMA q128 fill0.1" \
      --fwd-config "$cfg" > "$OUT/writeback_${cfg:+cand}.md" 2>&1
    log "writeback '$cfg' rc=$?"; cat "$OUT/writeback_${cfg:+cand}.md" >> "$OUT/call.log"
  done
  ab_run slices_2 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  ncu_by_role cand_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config "$CAND"
  ab_run slices_3 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  [ "$(left)" -gt 70 ] && ncu_by_role default_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
fi
finish
