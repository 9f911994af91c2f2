#!/usr/bin/env bash
# Run 39 call 11: tests/kernels in full with fast_epilogue on (the backward tests take the new
# forward's LSE), then full tables while the call's time lasts
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
for i in 5 6 7; do
  [ "$(left)" -gt 55 ] || break
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench39_$i.jsonl" > "$OUT/bench39_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench39_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench39_$i.jsonl" varlen_fwd_ms_per_tlx)"
done
finish
