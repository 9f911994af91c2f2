#!/usr/bin/env bash
# Run 40 call 2: FwdConfig.ctas_per_sm = 2 with one consumer group per CTA (64-row q-blocks, each
# CTA its own K/V ring, 128 registers at launch): GPU tests, then forward A/Bs on the PMA rows
# with 64-key blocks (2 stages) and, for q128, 32-key blocks (4 stages)
source benchmarks/device_call.sh
if gpu_tests two_ctas tests/kernels/test_tlx_hopper.py -k "two_ctas"; then
  ab_run g1_64 tlx_fwd_ab_ratio --only "PMA" \
    --ab "num_groups=1,num_buf_kv=2,consumer_regs=216,ctas_per_sm=2,block_n=64,late_p_cast=True"
  ab_run g1_32 tlx_fwd_ab_ratio --only "PMA q128" \
    --ab "num_groups=1,num_buf_kv=4,consumer_regs=216,ctas_per_sm=2,block_n=32,late_p_cast=True"
fi
finish
