#!/usr/bin/env bash
# Run 47, issued by hand (session 49) after call C on the same warm H100: the shifted tail on every
# PMA row again (call B's A/B was cut by its timeout after five rows).
# Run: CALL_S=160 bash docs/kernels/tlx_hopper_run47/call_d_script.sh
source benchmarks/device_call.sh
export AB_TIMEOUT=130
ab_run shift_pma_2 tlx_fwd_ab_ratio --only "PMA" --ab "shift_tail=True"
finish
