#!/usr/bin/env bash
# Run 47, issued by hand (session 49) right after call B on the same warm H100: head pairs twice
# more, with the shifted tail, and on every PMA row (only the q128 fill-0.1 row ran there: head
# pairs need split tiles, which the other rows do not use; so the log's ratio column raised KeyError). Run: CALL_S=200 bash docs/kernels/tlx_hopper_run47/call_b2_script.sh
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"; export AB_TIMEOUT=40
PAIRS="head_pairs=True,num_buf_kv=3,balanced_split=False,free_group_split=False"
for spec in "pairs_2:$PAIRS" "pairs_3:$PAIRS" "shiftpairs_1:shift_tail=True,$PAIRS" "pairs_pma:$PAIRS"; do
  [ "$(left)" -gt 30 ] || break
  case $spec in pairs_pma*) ab_run "${spec%%:*}" tlx_fwd_ab_ratio --only "PMA" --ab "${spec#*:}";; *) ab_run "${spec%%:*}" tlx_fwd_ab_ratio --only "$ROW" --ab "${spec#*:}";; esac
done
finish
