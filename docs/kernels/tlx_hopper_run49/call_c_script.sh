#!/usr/bin/env bash
# Session 51, after run 49's calls a-b: the split tile's second group loses ~5-7 µs the first time
# it runs its bulk loop, tail and epilogue (pure-ALU normalise 5x slower), ending at one instant in
# every CTA. Run 45's SASS samples of the same kernel put 7.4 % of that group's samples on
# "no instruction" (the first group 3.9 %), most near its code's 64 KB mark. Here: the same Nsight
# Compute SASS samples of today's default PMA q128 fill-0.1 forward (by role, with its
# `stall_no_inst` column in the CSV), then tables while time is left.
# Run: CALL_S=170 bash docs/kernels/tlx_hopper_run49/call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
ncu_by_role default_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
tables bench49d 2
finish
