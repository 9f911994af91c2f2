#!/usr/bin/env bash
# Run 37 call 2 (a4070a3, the packed schedule build on): PDL on the self/dense forwards (off there
# since run 36's one process); a second A/B of the packed build; three full status tables.
source benchmarks/device_call.sh
ab_run pdl_selfdense tlx_fwd_ab_ratio --only "self,dense" --ab pdl=True
ab_run sched2 tlx_fwd_absched_ratio --only PMA --bwd --ab-schedule-fields 1
log "fb $(ratios "$OUT/ab_sched2.jsonl" tlx_fwdbwd_absched_ratio)"
for i in 2 3 4; do
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench37_$i.jsonl" > "$OUT/bench37_$i.log" 2>&1
  log "bench $i rc=$? fb $(ratios "$OUT/bench37_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench37_$i.jsonl" varlen_fwd_ms_per_tlx)"
done
finish
