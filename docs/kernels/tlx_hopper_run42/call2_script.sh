#!/usr/bin/env bash
# Session 41's second call: `tests/kernels` in full (the first full run with split tiles, and with
# the split-ring and PV-pair tests).
# Run: CALL_S=560 bash devrun/next_call2.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
finish
