#!/usr/bin/env bash
# Prepared in session 43/44 (as run 45's next_call_script.sh), cut to head pairs in session 45
# (the balanced split's tests and A/Bs moved to next_call_a_script.sh / next_call_c_script.sh):
# the second of the next device calls, the other candidate for the PMA q128 fill-0.1 forward
# (the HBM probe found one head's 256 B slices streaming at 2.45-2.52 TB/s against 3.33 for whole
# stretches, run 26). FwdConfig.head_pairs (session 43, num_buf_kv 3: both heads'
# K/V rows requested together), behind its GPU tests (against the reference and bit-identical with
# the one-head split tile), with and without the pair ping-pong; Nsight Compute of it last, while
# time is left.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run46/next_call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
CAND="head_pairs=True,num_buf_kv=3,balanced_split=False"  # one head per tile: the alternating split
if gpu_tests pairs tests/kernels/test_tlx_hopper.py -k "head_pairs"; then
  ab_run pairs_1 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND"
  ab_run pairs_2 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND"
  ab_run pairspp_1 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND,pair_pingpong=True"
  [ "$(left)" -gt 120 ] && ncu_by_role cand_q128_fill01 jfa_fwd_kernel "$ROW" --fwd-config "$CAND"
fi
finish
