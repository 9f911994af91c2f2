#!/usr/bin/env bash
# Run 36 call 2 (de28c43, main: pma_dv_in_dk_stage on by default): three more full status tables.
source benchmarks/device_call.sh
for i in 2 3 4; do
  timeout $(( $(left) - 20 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench36_$i.jsonl" > "$OUT/bench36_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench36_$i.jsonl" varlen_fwdbwd_ms_per_tlx)"
done
finish
