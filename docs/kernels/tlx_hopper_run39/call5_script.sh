#!/usr/bin/env bash
# Run 39 call 5: Nsight Compute by role of the rotating PMA q128 forward (three groups over two
# slices), fill 0.1, beside call 1's default
source benchmarks/device_call.sh
ncu_by_role rot_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config num_groups=3,q_slices=2,consumer_regs=160,late_p_cast=False,block_n=64,num_buf_kv=4
finish
