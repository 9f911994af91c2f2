#!/usr/bin/env bash
# Run 44 call 4 (session 42): the final code (the shared-role pass's new load order, the eviction
# switches removed: forward SASS identical to run 44's tested build) in two full tables, then
# `tests/kernels` in full.
# Run: CALL_S=570 bash devrun/call_b.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
tables bench44b 2
gpu_tests kernels tests/kernels
finish
