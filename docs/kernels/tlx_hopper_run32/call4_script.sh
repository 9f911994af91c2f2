#!/usr/bin/env bash
# Run 32 call 4: BwdConfig.pma_tma_store (dK/dV of whole tiles by TMA store in the split-role pass):
# its GPU tests, then the forward+backward A/B on PMA q128.
source benchmarks/device_call.sh
if gpu_tests tma_store tests/kernels/test_tlx_hopper.py -k "pma_tma_store or (test_backward_switch and tma)"; then
  ab_run tma_store tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_tma_store=True
fi
finish
