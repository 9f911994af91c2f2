#!/usr/bin/env bash
# Run 39 call 3: FwdConfig.q_slices (three groups rotating over PMA q128's two slices). Forward GPU
# tests (every forward test, the new rotation ones), then the PMA q128 forward A/Bs: 4 and 3 K/V stages.
source benchmarks/device_call.sh
gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "forward or rotating" || { finish; exit; }
ab_run rot4 tlx_fwd_ab_ratio --only "PMA q128" --ab num_groups=3,q_slices=2,consumer_regs=160,late_p_cast=False,block_n=64,num_buf_kv=4
ab_run rot3 tlx_fwd_ab_ratio --only "PMA q128" --ab num_groups=3,q_slices=2,consumer_regs=160,late_p_cast=False,block_n=64,num_buf_kv=3
finish
