#!/usr/bin/env bash
# Run 44 call 3 (session 42): the forward's L2 eviction policies (FwdConfig.evict_first_kv / _o,
# off). Their GPU tests (bit-identity with the default on the flip cases, 24); the write-back
# probe with and without both (does the dirty-L2 column move?); forward A/Bs of both on every PMA
# row x2, of each alone on the fill-0.1 rows; forward+backward A/B of both on PMA q128.
# Run: CALL_S=420 bash devrun/call_a.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 480
source benchmarks/device_call.sh
BOTH="evict_first_kv=True,evict_first_o=True"
if gpu_tests evict tests/kernels/test_tlx_hopper.py -k "switch_changes_no_value and evict"; then
  for cfg in "" "$BOTH"; do
    timeout 60 python -m benchmarks.writeback_probe --only "PMA q128 fill0.1,PMA q192 fill0.1,PMA q128 fill0.9" \
      --fwd-config "$cfg" > "$OUT/writeback_${cfg:+both}.md" 2>&1
    log "writeback '$cfg' rc=$?"; cat "$OUT/writeback_${cfg:+both}.md" >> "$OUT/call.log"
  done
  for i in 1 2; do
    ab_run both_$i tlx_fwd_ab_ratio --only "PMA" --ab "$BOTH"
  done
  ab_run kv_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1,PMA q192 fill0.1" --ab "evict_first_kv=True"
  ab_run o_1 tlx_fwd_ab_ratio --only "PMA q128 fill0.1,PMA q192 fill0.1" --ab "evict_first_o=True"
  [ "$(left)" -gt 60 ] && ab_run both_fb_1 tlx_fwdbwd_ab_ratio --bwd --only "PMA q128" --ab "$BOTH"
fi
finish
