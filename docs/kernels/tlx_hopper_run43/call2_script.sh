#!/usr/bin/env bash
# Session 41, run 43 call 2: the three-step PMA q192 backward as the default: two full tables
# first, then `tests/kernels` in full.
# Run: CALL_S=560 bash devrun/call2.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
tables bench43 2
gpu_tests kernels tests/kernels
finish
