#!/usr/bin/env bash
# Prepared in session 50 for a session whose device time went mostly on refused starts: run 48's
# two calls folded into one, so that one start buys all of it. A full table first (the merged
# default's status on this card), the packed key stream's best case on the q128 fill-0.1 row, then
# `tests/kernels` in full on the merged code (the kernels' checksum chained when it passes), then
# tables while time is left.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run48/call_one_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s CALL_S + 20
source benchmarks/device_call.sh
ROW="PMA q128 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
uptime >> "$OUT/call.log"
tables bench48 1
[ "$(left)" -gt 60 ] && {
  timeout 55 python -m benchmarks.tlx_packed_bound --only "$ROW" --out "$OUT/packed_bound.jsonl" \
    > "$OUT/packed_bound.log" 2>&1
  log "packed bound rc=$? $(ratios "$OUT/packed_bound.jsonl" packed_ratio)"
}
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s (run 47: 316 s)
[ "$DEADLINE" -le "$DEADLINE_SAVE" ] && gpu_tests kernels tests/kernels && chain_put tested_md5 "$(kernels_md5)"
DEADLINE=$DEADLINE_SAVE
uptime >> "$OUT/call.log"
tables bench48b 2
finish
