#!/usr/bin/env bash
# Run 38 call 3: FwdConfig.overlap_tiles (a broadcast tile's last PV and stores after the next
# tile's first QK^T). The forward GPU tests (check_forward now honours a case's grid), then the PMA
# forward A/B; if q128 fill 0.1 and 0.5 gain >= 1 %, overlap on for the 64-key PMA q<=128 tile and
# full tables with it.
source benchmarks/device_call.sh
gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "forward or overlap" || { finish; exit; }
ab_run overlap tlx_fwd_ab_ratio --only PMA --ab overlap_tiles=True
gate=$(ab_gate tlx_fwd_ab_ratio "PMA q128 fill0.1<=0.99,PMA q128 fill0.5<=0.99" "$OUT/ab_overlap.jsonl")
log "gate $gate"
if [ "$gate" = yes ] && flip_default devrun/flip; then
  for i in 1 2 3 4; do
    [ "$(left)" -gt 70 ] || break
    timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench38_$i.jsonl" > "$OUT/bench38_$i.log" 2>&1
    log "bench $i rc=$? fb $(ratios "$OUT/bench38_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench38_$i.jsonl" varlen_fwd_ms_per_tlx)"
  done
fi
finish
