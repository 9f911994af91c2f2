#!/usr/bin/env bash
# Run 40 call 9: the short-key default (broadcast Q at D=128, mean keys < SHORT_KV_MEAN: 32-key
# blocks): the forward tests and the new cases; the old 64-key default A/B'd against it on the
# fill-0.1 rows (candidate = the old default); then full tables
source benchmarks/device_call.sh
if gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "forward or short_key or fast_epilogue"; then
  ab_run old64_q192 tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "block_n=64,num_buf_kv=3"
  ab_run old64_q128 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "block_n=64,num_buf_kv=4"
  tables bench40d 2
fi
finish
