#!/usr/bin/env bash
# Run 38 call 2: full status tables while time is left
source benchmarks/device_call.sh
for i in 1 2 3 4 5 6 7 8; do
  [ "$(left)" -gt 70 ] || break
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench38_$i.jsonl" > "$OUT/bench38_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench38_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench38_$i.jsonl" varlen_fwd_ms_per_tlx)"
done
finish
