#!/usr/bin/env bash
# Run 39 call 6: FwdConfig.fast_epilogue: its GPU tests, then the forward A/B on every row
source benchmarks/device_call.sh
gpu_tests fast tests/kernels/test_tlx_hopper.py -k "fast_epilogue" || { finish; exit; }
ab_run fast tlx_fwd_ab_ratio --ab fast_epilogue=True
finish
