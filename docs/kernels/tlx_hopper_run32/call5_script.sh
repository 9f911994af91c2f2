#!/usr/bin/env bash
# Next session, one call on branch prep/dk-stage (carry [".gpu/tools", ".gpu/kernels"]):
#   git checkout prep/dk-stage && CALL_S=400 bash devrun/next_call.sh
# 1. the prepared switch's GPU tests; 2. A/Bs (PMA q128 forward+backward): dK in its own staging
# tile with 3 K + 2 V slots, and 3 K + 2 V alone (what the V slot it costs is worth).
source benchmarks/device_call.sh
if gpu_tests dk_stage tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "dk_stage or dk-stage"; then
  ab_run dk_stage tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dk_stage=True,pma_buf_v=2
  ab_run v2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_buf_v=2
fi
finish
