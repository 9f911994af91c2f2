#!/usr/bin/env bash
# Run 33 call 1: tests/kernels in full (run 32's last edit was CPU-only), then two full status tables.
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
for i in 1 2; do
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench33_$i.jsonl" > "$OUT/bench33_$i.log" 2>&1
  log "bench $i rc=$?"
done
finish
