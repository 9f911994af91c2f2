#!/usr/bin/env bash
# Run 34 call 3 (main after call 2's removal: the kernels of call 1): two more full status tables.
source benchmarks/device_call.sh
for i in 3 4; do
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench34_$i.jsonl" > "$OUT/bench34_$i.log" 2>&1
  log "bench $i rc=$?"
done
finish
