#!/usr/bin/env bash
# Prepared in session 47 as the third of the next device calls: up to three full tables on the
# merged defaults (merge call A's winners locally first: flip_split.py FLIPS, then commit), each
# logged with its ratios and the fill-0.1 rows' host µs per timing; the host's load before them.
# TESTED=1 when call B's suite passed on exactly this code; else the suite runs after the tables,
# which stop 330 s early for it.
# Run: CALL_S=575 [TESTED=1] bash docs/kernels/tlx_hopper_run47/next_call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
[ "${TESTED:-0}" = 1 ] || DEADLINE=$(( DEADLINE - 330 ))
uptime >> "$OUT/call.log"
tables bench47 3
[ "${TESTED:-0}" = 1 ] || { DEADLINE=$(( DEADLINE + 330 )); gpu_tests kernels tests/kernels; }
finish
