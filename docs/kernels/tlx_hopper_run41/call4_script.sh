#!/usr/bin/env bash
# Run 41 call 4: Nsight Compute of the fill-0.1 PMA forwards with run 40's short-key default
# (32-key blocks; run 40's profile, 79.9 us at q128, was of the 64-key tile), by warp role.
# Run: CALL_S=220 bash devrun/call4.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
ncu_by_role short_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
ncu_by_role short_q192_fill01 jfa_fwd_kernel "PMA q192 fill0.1"
finish
