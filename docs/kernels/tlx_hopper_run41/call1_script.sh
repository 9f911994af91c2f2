#!/usr/bin/env bash
# Next session's first call (written in session 38): `tests/kernels` in full with run 40's
# short-key default (its first full run: the broadcast backward cases take its LSE), then the
# short-key tile with one more stage (q128 nine, q192 seven: call 8's one q192 sample gave 0.967),
# then full tables while time is left.
# Run: CALL_S=560 bash devrun/next_call.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
if gpu_tests kernels tests/kernels; then
  ab_run bn32s9_q128 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "num_buf_kv=9"
  ab_run bn32s7_q192 tlx_fwd_ab_ratio --only "PMA q192 fill0.1" --ab "num_buf_kv=7"
  tables bench41 3
fi
finish
