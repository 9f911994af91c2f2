#!/usr/bin/env bash
# Session 42's second call: `tests/kernels` in full (with the launcher refactor, the launcher
# test and the load-order switches' tests).
# Run: CALL_S=560 bash devrun/next_call2.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
finish
