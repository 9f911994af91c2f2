#!/usr/bin/env bash
# Run 41 call 5: FwdConfig.split_tiles (each consumer group a whole 128-row tile of its own, no
# ping-pong) on the short-key PMA q128 tile: its GPU tests, the A/B on PMA q128 fill 0.1 (two
# processes of 4 ABBA rounds), and its Nsight Compute profile by warp role beside call 4's.
# Run: CALL_S=420 bash devrun/call5.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
if gpu_tests split tests/kernels/test_tlx_hopper.py -k "split_tiles or short_key"; then
  ab_run split_q128 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "split_tiles=True,late_p_cast=False"
  ab_run split_q128b tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "split_tiles=True,late_p_cast=False"
  ncu_by_role split_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config "split_tiles=True,late_p_cast=False"
fi
finish
