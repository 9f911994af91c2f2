#!/usr/bin/env bash
# Run 52's third call (session 54), issued by hand on the same warm H200 right after call b with
# the device budget that was left: six full tables of the same code (no flip: call a's
# balanced_split did not pass its gate).
# Run: the line below as the command, carry [".gpu/tools", ".gpu/kernels"], timeout_s 340
source benchmarks/device_call.sh; CALL_S=330; tables bench52d 6; finish
