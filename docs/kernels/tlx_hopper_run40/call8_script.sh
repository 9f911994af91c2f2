#!/usr/bin/env bash
# Run 40 call 8: call 7's 32-key blocks again on the fill-0.1 rows, where they led (q192 0.969,
# q128 0.988): two more samples each, and q192 with seven stages
source benchmarks/device_call.sh
for i in 2 3; do
  ab_run bn32_q192_$i tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "block_n=32,num_buf_kv=6"
  ab_run bn32_q128_$i tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "block_n=32,num_buf_kv=8"
done
ab_run bn32s7_q192 tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "block_n=32,num_buf_kv=7"
finish
