#!/usr/bin/env bash
# Run 39 call 2: test_tlx_hopper.py on the GPU (persistent_grid helper's first GPU run)
source benchmarks/device_call.sh
gpu_tests hopper tests/kernels/test_tlx_hopper.py
finish
