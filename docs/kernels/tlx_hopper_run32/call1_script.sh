#!/usr/bin/env bash
# Next session, one call on branch prep/next (carry [".gpu/tools", ".gpu/kernels"]):
#   git checkout prep/next && CALL_S=540 bash devrun/next_call.sh
# 1. the two prepared switches' GPU tests; 2. A/Bs: the split-role pass's 16-byte direct store
# (PMA q128 forward+backward), the forward's V ring one slot deeper (PMA q128: fill 0.9 takes the
# 128-key tile, 2 K + 3 V; fill 0.1 / 0.5 the 64-key tile, 4 K + 5 V).
source benchmarks/device_call.sh
if gpu_tests prep tests/kernels/test_tlx_hopper.py -k "(test_backward_switch and direct) or v_ring"; then
  ab_run quad_store tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_direct_store=True
  ab_run v3_long tlx_fwd_ab_ratio --only "PMA q128 fill0.9" --ab num_buf_v=3
  ab_run v5 tlx_fwd_ab_ratio --only "PMA q128 fill0.1,PMA q128 fill0.5" --ab num_buf_v=5
fi
finish
