#!/usr/bin/env bash
# Prepared in session 47 as the third of the next device calls: up to three full tables on the
# split tile's defaults with call A's winners flipped in (FLIPS; unset: the ones chained on this
# machine by calls A/B; a local merge of the same flips changes nothing here), each logged with its
# ratios and the fill-0.1 rows' host µs per timing; the host's load before them. When call B's
# suite passed on exactly this code (its kernels' checksum chained, or TESTED=1) the tables get
# the whole call; else the suite runs after them, which stop 390 s early for it (the suite gets 330 s).
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
uptime >> "$OUT/call.log"
tables bench47 3
[ "${TESTED:-0}" = 1 ] || { DEADLINE=$(( DEADLINE + 390 )); gpu_tests kernels tests/kernels; }
finish
