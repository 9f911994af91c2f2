#!/usr/bin/env bash
# Run 39 call 8: fast_epilogue on by default if calls 7's A/Bs gain at q128 fill 0.5 and lose
# nowhere (means of two); then the forward GPU tests and full tables with it
source benchmarks/device_call.sh
gate=$(ab_gate tlx_fwd_ab_ratio "PMA q128 fill0.5<=0.99,PMA q128 fill0.1<=1.01,PMA q128 fill0.9<=1.01,PMA q192 fill0.1<=1.01,PMA q192 fill0.5<=1.01,PMA q192 fill0.9<=1.01,self B768 fill0.5<=1.01,self B768 fill1.0<=1.01" /tmp/ab39/ab_fast2.jsonl /tmp/ab39/ab_fast3.jsonl)
log "gate $gate"
[ "$gate" = yes ] && flip_default devrun/flip || { finish; exit; }
gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "forward or fast_epilogue" || { finish; exit; }
for i in 1 2 3; do
  [ "$(left)" -gt 70 ] || break
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench39_$i.jsonl" > "$OUT/bench39_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench39_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench39_$i.jsonl" varlen_fwd_ms_per_tlx)"
done
finish
