#!/usr/bin/env bash
# Prepared in session 47 as the second of the next device calls (after call_a_script.sh and a
# local merge of its winners): the shifted tail, the claimed tiles and the local order on every
# PMA row (forward; off by default, so the A/Bs hold whatever call A merged on both sides), what
# the schedule build costs each PMA row's call, then up to three full tables. TESTED=1 when
# tests/kernels in full passed on exactly this code (call A's, if nothing changed after its
# flips); else the suite runs after the tables, which stop 330 s early for it.
# Run: CALL_S=570 [TESTED=1] bash docs/kernels/tlx_hopper_run47/next_call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
[ "${TESTED:-0}" = 1 ] || DEADLINE=$(( DEADLINE - 330 ))
export AB_TIMEOUT=90  # six rows of 4 ABBA rounds: ~50 s (run 44)
ab_run shift_pma_1 tlx_fwd_ab_ratio --only "PMA" --ab "shift_tail=True"
ab_run claim_pma_1 tlx_fwd_ab_ratio --only "PMA" --ab "claim_tiles=True"
ab_run cached_pma_1 tlx_fwd_abcached_ratio --only "PMA" --ab-schedule-cached
ab_run local_pma_1 tlx_fwd_ab_ratio --only "PMA" --ab "local_order=True"
[ "$(left)" -gt 200 ] && ab_run shift_pma_2 tlx_fwd_ab_ratio --only "PMA" --ab "shift_tail=True"
uptime >> "$OUT/call.log"
tables bench47 3
[ "${TESTED:-0}" = 1 ] || { DEADLINE=$(( DEADLINE + 330 )); gpu_tests kernels tests/kernels; }
finish
