#!/usr/bin/env bash
# Prepared in session 47 as the third of the next device calls: up to three full tables on the
# split tile's defaults with call A's winners flipped in (FLIPS; unset: the ones chained on this
# machine by calls A/B; a local merge of the same flips changes nothing here), each logged with its
# ratios and the fill-0.1 rows' host µs per timing; the host's load before them. When call B's
# suite passed on exactly this code (its kernels' checksum chained, or TESTED=1) the tables get
# the whole call; else the suite runs after them, which stop 390 s early for it (the suite gets 330 s).
# Before the tables, where call B's HBM probe chained a rows-over-slices gain of 1.08 or more:
# two A/Bs of prefetch_heads=3 on the q128 fill-0.1 row.
# Run: CALL_S=575 [FLIPS="..."] [TESTED=1] bash docs/kernels/tlx_hopper_run47/next_call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
[ -n "${FLIPS+set}" ] || FLIPS=$(chain_get flips) || FLIPS=""
log "FLIPS=\"$FLIPS\""
if [ -n "$FLIPS" ]; then
  python docs/kernels/tlx_hopper_run47/flip_split.py $FLIPS >> "$OUT/call.log" 2>&1 || { finish; exit; }
  md5sum kernels/*.py > "$OUT/md5_flipped.txt"
fi
[ "$(chain_get tested_md5)" = "$(kernels_md5)" ] && TESTED=1
log "TESTED=${TESTED:-0}"
[ "${TESTED:-0}" = 1 ] || DEADLINE=$(( DEADLINE - 390 ))
# where call B's probe found whole rows streaming >= 8 % faster than one head's slices: the CTAs
# of head 0 prefetching the other three heads' rows (FwdConfig.prefetch_heads, session 48), twice
gain=$(chain_get rows_gain) || gain=0
log "rows over slices (call B): $gain"
if python -c "import sys; sys.exit(0 if float('$gain') >= 1.08 else 1)" 2>/dev/null; then
  export AB_TIMEOUT=50
  for i in 1 2; do
    [ "$(left)" -gt 180 ] && ab_run "prefetch_$i" tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "prefetch_heads=3"
  done
  unset AB_TIMEOUT
fi
uptime >> "$OUT/call.log"
tables bench47 3
[ "${TESTED:-0}" = 1 ] || { DEADLINE=$(( DEADLINE + 390 )); gpu_tests kernels tests/kernels; }
finish
