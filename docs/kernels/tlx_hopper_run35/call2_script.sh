#!/usr/bin/env bash
# Run 35 call 2: own_fences (kernels compiled without Triton's fence-insertion pass, their own
# proxy fences only): its GPU tests, then A/Bs: forward+backward on every row (BwdConfig), forward
# on the self/dense rows (FwdConfig; the broadcast forwards have no pass-inserted fence in a loop).
source benchmarks/device_call.sh
if gpu_tests own tests/kernels/test_tlx_hopper.py -k "own"; then
  ab_run own_bwd tlx_fwdbwd_abbwd_ratio --bwd --ab-bwd own_fences=True
  ab_run own_fwd tlx_fwd_ab_ratio --only "self,dense" --ab own_fences=True
fi
finish
