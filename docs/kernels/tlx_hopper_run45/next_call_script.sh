#!/usr/bin/env bash
# The second of the next three device calls (after next_call_a_script.sh): two split-tile
# candidates for the PMA q128 fill-0.1 forward, each behind its own GPU tests (against the
# reference and bit-identical with the alternating split tile):
# (1) FwdConfig.balanced_split (session 44): a tile to the group with less estimated work instead
#     of every other tile (a model puts the last CTA 6-7 % over an even share when alternating,
#     1.6-2 % balanced: benchmarks/split_balance_model.py); A/Bs with its per-tile cost estimate
#     at 2 (default), 1 and 4 blocks, and its timeline (the groups' ends apart, the tail);
# (2) FwdConfig.head_pairs (session 43, num_buf_kv 3: both heads' K/V rows requested together),
#     with and without the pair ping-pong; Nsight Compute of it last, while time is left.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run45/next_call_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
if gpu_tests balanced tests/kernels/test_tlx_hopper.py -k "balanced_split or split_tiles_changes"; then
  ab_run balanced_1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
  ab_run balanced_2 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True"
  ab_run balanced_cost1 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True,split_tile_cost=1"
  ab_run balanced_cost4 tlx_fwd_ab_ratio --only "$ROW" --ab "balanced_split=True,split_tile_cost=4"
  # its timeline beside call A's of the alternating split: the groups' ends apart, the tail
  timeout 90 python -m benchmarks.tlx_timeline --shape "$ROW" --fwd-config balanced_split=True \
    --save "$OUT/timeline_balanced.pt" --out "$OUT/timeline_balanced.md" > "$OUT/timeline_balanced.log" 2>&1
  log "timeline balanced rc=$? $(head -1 "$OUT/timeline_balanced.md")"
fi
CAND="head_pairs=True,num_buf_kv=3"
if gpu_tests pairs tests/kernels/test_tlx_hopper.py -k "head_pairs"; then
  ab_run pairs_1 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND"
  ab_run pairs_2 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND"
  ab_run pairspp_1 tlx_fwd_ab_ratio --only "$ROW" --ab "$CAND,pair_pingpong=True"
  [ "$(left)" -gt 120 ] && ncu_by_role cand_q128_fill01 jfa_fwd_kernel "$ROW" --fwd-config "$CAND"
fi
finish
