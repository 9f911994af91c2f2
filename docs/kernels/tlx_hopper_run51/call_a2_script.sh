#!/usr/bin/env bash
# Session 53: run inline on call a's warm H100 (written to /tmp/c.sh there and run with
# CALL_S=200): the q128 fill-0.1 row's A/Bs of the branches with four K/V stages, the tail branch
# alone and both branches (two processes each), and the default's timeline. Kept as the record.
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
for i in 1 2; do
AB_TIMEOUT=45 ab_run "both_nbuf4_$i" tlx_fwd_ab_ratio --only "$ROW" --ab tail_branch=True,first_branch=True,num_buf_kv=4
AB_TIMEOUT=45 ab_run "tail_$i" tlx_fwd_ab_ratio --only "$ROW" --ab tail_branch=True
AB_TIMEOUT=45 ab_run "both_$i" tlx_fwd_ab_ratio --only "$ROW" --ab tail_branch=True,first_branch=True
done
timeout 45 python -m benchmarks.tlx_timeline --shape "$ROW" --regime dirty --samples 2 --out "$OUT/timeline_default.md" > "$OUT/timeline_default.log" 2>&1
finish
