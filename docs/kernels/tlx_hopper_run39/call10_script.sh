#!/usr/bin/env bash
# Run 39 call 9: fast_epilogue on by default (calls 6-7: fill-0.1 and self fill-0.5 forwards
# -1.5 to -7 %, the rest within +-1 %); the forward GPU tests and full tables with it
source benchmarks/device_call.sh
flip_default devrun/flip || { finish; exit; }
gpu_tests fwd tests/kernels/test_tlx_hopper.py -k "forward or fast_epilogue" || { finish; exit; }
for i in 1 2 3 4; do
  [ "$(left)" -gt 70 ] || break
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench39_$i.jsonl" > "$OUT/bench39_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench39_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench39_$i.jsonl" varlen_fwd_ms_per_tlx)"
done
finish
