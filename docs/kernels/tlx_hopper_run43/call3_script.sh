#!/usr/bin/env bash
# Session 41, run 43 call 3 (the three-step pass as the default): its other ring split (2 K + 3 V
# slots) in one A/B process; Nsight Compute of the pass on PMA q192 fill 0.5 (tensor pipe, DRAM,
# stalls by warp role); one more full table.
# Run: CALL_S=330 bash devrun/call3.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 400
source benchmarks/device_call.sh
ab_run pma3_k2v3 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma_buf_k=2,pma_buf_v=3"
ncu_by_role bwd_pma3_q192_fill05 jfa_bwd_pma3_kernel "PMA q192 fill0.5"
tables bench43c 1
finish
