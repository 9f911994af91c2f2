#!/usr/bin/env bash
# Run 35 call 4: pma_dv_in_dk_stage (the split-role pass hands P^T back before dV's epilogue, dV
# staged in dK's tile): its GPU tests, then two A/B processes forward+backward on the PMA q128 rows.
source benchmarks/device_call.sh
if gpu_tests dv_in_dk tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "dv-in-dk or dv_in_dk or epilogues"; then
  ab_run dv_in_dk tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_in_dk_stage=True
  ab_run dv_in_dk_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_in_dk_stage=True
fi
finish
