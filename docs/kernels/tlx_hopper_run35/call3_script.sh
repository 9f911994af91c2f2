#!/usr/bin/env bash
# Run 35 call 3 (72d4b22's kernels again, own_fences removed): two more full status tables.
source benchmarks/device_call.sh
for i in 3 4; do
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench35_$i.jsonl" > "$OUT/bench35_$i.log" 2>&1
  log "bench $i rc=$?"
done
finish
