#!/usr/bin/env bash
# Prepared in session 43 for the next device call (not run: no machine was lent after call 1).
# (1) What the access pattern costs HBM at equal parallelism (hbm_probe's chunk programs: one
# head's 256 B slices against whole rows of every head); (2) head pairs for the split tile
# (FwdConfig.head_pairs, num_buf_kv 3: both heads' K/V rows requested together): its GPU tests
# (against the reference and bit-identical with the one-head split tile, 6 cases with and without
# the pair ping-pong, + the refusals), forward A/Bs on PMA q128 fill 0.1 (also with 2 slots and
# with the pair ping-pong), Nsight Compute of it.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run45/next_call_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
# Session 44 added (0): the host time per call after its host-path cuts (tlx_launch_probe; run
# 41's host: forward 87.7 us, backward 130.7 us).
source benchmarks/device_call.sh
CAND="head_pairs=True,num_buf_kv=3"
timeout 90 python -m benchmarks.tlx_launch_probe --calls 300 --cprofile > "$OUT/launch_probe_q128.md" 2>&1
log "launch probe rc=$? $(grep -E '^tlx_launch:' "$OUT/launch_probe_q128.md")"
timeout 120 python -m benchmarks.hbm_probe --only "PMA q128" --out "$OUT/hbm_probe.md" > "$OUT/hbm_probe.log" 2>&1
log "hbm_probe rc=$?"; cat "$OUT/hbm_probe.md" >> "$OUT/call.log"
if gpu_tests pairs tests/kernels/test_tlx_hopper.py -k "head_pairs or split_tiles_changes"; then
  ab_run pairs_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  ab_run pairs_2 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
  ab_run pairs2slots_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "head_pairs=True,num_buf_kv=2"
  ab_run pairspp_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND,pair_pingpong=True"
  ab_run pairspp_2 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND,pair_pingpong=True"
  ncu_by_role cand_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" --fwd-config "$CAND"
  ab_run pairs_3 tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "$CAND"
fi
finish
