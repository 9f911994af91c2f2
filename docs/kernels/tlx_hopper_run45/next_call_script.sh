#!/usr/bin/env bash
# Prepared in session 43 (not run: no machine was lent after call 1), to run after
# next_call_a_script.sh (session 44 moved this call's first step, the HBM access-pattern probe,
# there): head pairs for the split tile (FwdConfig.head_pairs, num_buf_kv 3: both heads' K/V rows
# requested together): its GPU tests (against the reference and bit-identical with the one-head
# split tile, 6 cases with and without the pair ping-pong, + the refusals), forward A/Bs on PMA
# q128 fill 0.1 (also with 2 slots and with the pair ping-pong), Nsight Compute of it.
# Run: CALL_S=500 bash docs/kernels/tlx_hopper_run45/next_call_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
CAND="head_pairs=True,num_buf_kv=3"
if gpu_tests pairs tests/kernels/test_tlx_hopper.py -k "head_pairs or split_tiles_changes"; then
  ab_run pairs_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  ab_run pairs_2 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  ab_run pairs2slots_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "head_pairs=True,num_buf_kv=2"
  ab_run pairspp_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND,pair_pingpong=True"
  ab_run pairspp_2 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND,pair_pingpong=True"
  ncu_by_role cand_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config "$CAND"
  ab_run pairs_3 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
fi
finish
