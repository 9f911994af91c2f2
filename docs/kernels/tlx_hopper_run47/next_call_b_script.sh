#!/usr/bin/env bash
# Prepared in session 47 as the second of the next device calls (after call_a_script.sh):
# tests/kernels in full on the split tile's defaults with call A's winners flipped in (FLIPS, the
# FIELD=True words call A logs; flip_split.py; the tests hold either default), then the shifted
# tail, the claimed tiles, the local order and the build's cost on every PMA row (forward; off by
# default, so the A/Bs hold the flipped split tile on both sides), after the HBM probe's access
# patterns on the q128 fill-0.1 row (session 48: moved here from run 46's call C). Tables follow in
# next_call_c_script.sh (it knows through the chain whether this call's suite passed on its code).
# FLIPS unset: the ones call A chained on this machine (none when it did not run here).
# Run: CALL_S=575 [FLIPS="..."] bash docs/kernels/tlx_hopper_run47/next_call_b_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
if [ -z "${FLIPS+set}" ]; then  # not given: call A's gates, when call A ran on this machine
  FLIPS=$(chain_get flips) || { log "no FLIPS given and none chained (call A not on this machine): no flips"; FLIPS=""; }
fi
log "FLIPS=\"$FLIPS\""
chain_put flips "$FLIPS"
if [ -n "$FLIPS" ]; then
  python docs/kernels/tlx_hopper_run47/flip_split.py $FLIPS >> "$OUT/call.log" 2>&1 || { finish; exit; }
  md5sum kernels/*.py > "$OUT/md5_flipped.txt"
fi
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 390 ))  # the suite gets 330 s (run 46: 238 s for 1,004 tests)
gpu_tests kernels tests/kernels && chain_put tested_md5 "$(kernels_md5)"
DEADLINE=$DEADLINE_SAVE
# does HBM stream whole 1 KB rows faster than one head's 256 B slices at equal parallelism (session
# 43's chunk programs; what head pairs and any cross-head load order would gain)?
[ "$(left)" -gt 150 ] && {
  timeout 90 python -m benchmarks.hbm_probe --only "PMA q128 fill0.1" --out "$OUT/hbm_probe_q128_fill01.md" \
    > "$OUT/hbm_probe_q128_fill01.log" 2>&1
  log "hbm_probe rc=$?"; cat "$OUT/hbm_probe_q128_fill01.md" >> "$OUT/call.log" 2>/dev/null
  # slices' time over whole rows' (call C A/Bs prefetch_heads where rows stream >= 8 % faster)
  gain=$(python -m benchmarks.hbm_probe --rows-over-slices "$OUT/hbm_probe_q128_fill01.md" 2>/dev/null | cut -f2)
  log "rows over slices: ${gain:-none}"
  [ -n "$gain" ] && chain_put rows_gain "$gain"
}
export AB_TIMEOUT=70  # six rows of 4 ABBA rounds: ~50 s (run 44)
for spec in "shift_pma:shift_tail=True" "claim_pma:claim_tiles=True" "local_pma:local_order=True"; do
  [ "$(left)" -gt 80 ] || break
  ab_run "${spec%%:*}_1" tlx_fwd_ab_ratio --only "PMA" --ab "${spec#*:}"
done
[ "$(left)" -gt 80 ] && ab_run cached_pma_1 tlx_fwd_abcached_ratio --only "PMA" --ab-schedule-cached
finish
