#!/usr/bin/env bash
# Prepared in session 51 (CPU only) as the next device call: two answers to run 49's finding (the
# split tile's second consumer group runs its bulk loop, tail and epilogue ~5-7 µs slower the first
# time, ending at one instant in every CTA: its instructions fetched late in the launch).
#   warm_first: each split-tile CTA's first pair of tiles swapped with a medium pair a quarter of
#     the way in, so both groups run all their code early (the PMA q128 fill-0.1 row only: the only
#     bench row the split tile runs);
#   merge_tail: the shifted tail run by the bulk loop (~920-1,040 fewer SASS instructions in every
#     mask-free PMA forward at D = 128; all six PMA rows).
# Their GPU tests, two A/B processes of 4 ABBA rounds each, warm_first's timeline, Nsight Compute's
# SASS samples of the default and both candidates; then tables while time is left.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run50/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
gpu_tests warm tests/kernels/test_tlx_hopper.py \
  -k "warm_first or merge_tail or split_tiles or timeline" && {
  for i in 1 2; do
    AB_TIMEOUT=80 ab_run "warm_$i" tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab warm_first=True
    AB_TIMEOUT=120 ab_run "merge_$i" tlx_fwd_ab_ratio --only "PMA" --ab merge_tail=True
    if [ "$i" = 1 ]; then
      timeout 60 python -m benchmarks.tlx_timeline --shape "PMA q128 fill0.1" --regime dirty \
        --samples 3 --fwd-config warm_first=True --out "$OUT/timeline_warm.md" > "$OUT/timeline.log" 2>&1
      log "timeline warm rc=$? $(tail -4 "$OUT/timeline_warm.md" | tr '\n' ' ')"
    fi
  done
  # the "no instruction" stalls by warp role and address (sass_*.csv.gz)
  ncu_by_role default_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
  ncu_by_role warm_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config warm_first=True
  ncu_by_role merge_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config merge_tail=True
}
tables bench50 3
finish
