#!/usr/bin/env bash
# Run 39 call 1 (session 37): Nsight Compute by warp role of the PMA q128 forwards (fill 0.1, 0.5)
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee -a "$OUT/call.log"
ncu_by_role fwd_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
ncu_by_role fwd_q128_fill05 jfa_fwd_kernel "PMA q128 fill0.5"
finish
