#!/usr/bin/env bash
# Run 41 call 3: call 1's q192 short-tile A/B was host-stalled (both sides 0.15 ms against the
# table's 0.113): seven and eight K/V stages (compile check: 213.5 / 229.9 KB, no spill) again on
# a fresh host, then full tables with no tests before them.
# Run: CALL_S=330 bash devrun/call3.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
ab_run s7_q192 tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "num_buf_kv=7"
ab_run s8_q192 tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "num_buf_kv=8"
ab_run s7_q192b tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "num_buf_kv=7"
tables bench41b 3
finish
