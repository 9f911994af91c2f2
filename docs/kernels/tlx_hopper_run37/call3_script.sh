#!/usr/bin/env bash
# Run 37 call 3 (packed schedule up to 8,192 entries): the schedule tests; schedule_bench; A/B of
# the tlx calls against one class per pass on the self and dense rows (their builds now packed),
# then on the PMA rows again; one full status table.
source benchmarks/device_call.sh
gpu_tests schedule tests/kernels/test_tlx_schedule.py tests/kernels/test_tlx_schedule_cache.py
timeout 90 python -m benchmarks.schedule_bench --out "$OUT/schedule_bench3.jsonl" > "$OUT/schedule_bench3.log" 2>&1
log "schedule_bench rc=$?"; tail -n 9 "$OUT/schedule_bench3.log" >> "$OUT/call.log"
ab_run sched3 tlx_fwd_absched_ratio --only "self,dense" --bwd --ab-schedule-fields 1
log "fb $(ratios "$OUT/ab_sched3.jsonl" tlx_fwdbwd_absched_ratio)"
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench37_5.jsonl" > "$OUT/bench37_5.log" 2>&1
log "bench 5 rc=$? fb $(ratios "$OUT/bench37_5.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench37_5.jsonl" varlen_fwd_ms_per_tlx)"
finish
