#!/usr/bin/env bash
# Session 41's first call (written in sessions 39-40): two full tables with run 41's final code
# before anything else (run 41: tables right after the GPU tests came out host-stalled); the GPU
# tests of session 40's two prepared switches (CPU only so far): `FwdConfig.split_rings` (a K/V
# ring per consumer group of the split tile) and `FwdConfig.pv_chain` (the bulk's blocks in unrolled
# chains, each QK^T but the first issued before the wait for the previous PV); then, for each whose
# tests pass, A/B processes of 4 ABBA rounds on the rows where it compiles with few or no spills (split rings:
# three on PMA q128 fill 0.1; PV chains of 2, 4, 2 over five PMA rows, not q128 fill 0.1's split
# tile, which spills with them).
# Then devrun/next_call2.sh (tests/kernels in full) in the same message.
# Run: CALL_S=570 bash devrun/next_call.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
tables bench42 2
if gpu_tests rings tests/kernels/test_tlx_hopper.py -k "split_tiles or split_rings"; then
  for i in 1 2 3; do
    ab_run rings_q128_$i tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "split_rings=True"
  done
fi
if gpu_tests chain tests/kernels/test_tlx_hopper.py -k "pv_chain"; then
  for run in 2_1 4_1 2_2; do
    ab_run chain$run tlx_fwd_ab_ratio --only "PMA q128 fill0.5,PMA q128 fill0.9,PMA q192" --ab "pv_chain=${run%_*}"
  done
fi
finish
