#!/usr/bin/env bash
# Run 37 call 1 (main + the packed schedule build, FwdConfig.pdl on since run 36): tests/kernels in
# full (first full run with PDL and with the packed build); schedule_bench (default / one class per
# pass / torch builder); an A/B of the tlx calls against one class per pass on the PMA rows; one full
# status table.
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
timeout 90 python -m benchmarks.schedule_bench --out "$OUT/schedule_bench.jsonl" > "$OUT/schedule_bench.log" 2>&1
log "schedule_bench rc=$?"; tail -n 12 "$OUT/schedule_bench.log" >> "$OUT/call.log"
ab_run sched1 tlx_fwd_absched_ratio --only PMA --bwd --ab-schedule-fields 1
log "fb $(ratios "$OUT/ab_sched1.jsonl" tlx_fwdbwd_absched_ratio)"
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench37_1.jsonl" > "$OUT/bench37_1.log" 2>&1
log "bench 1 rc=$? fb $(ratios "$OUT/bench37_1.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/bench37_1.jsonl" varlen_fwd_ms_per_tlx)"
finish
