#!/usr/bin/env bash
# Session 29, call 5 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=330 bash devrun/call5.sh
# Status: full tables of the final code (split K/V rings in the PMA q128 backward) until the deadline.
source benchmarks/device_call.sh
ratios() { python -c "import json,sys; print([round(json.loads(l)['$2'],3) for l in open('$1')])" 2>&1; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> $OUT/call.log
i=2
while [ $(left) -gt 100 ] && [ $i -lt 5 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench31_$i.jsonl > $OUT/bench31_$i.log 2>&1
  log "bench $i rc=$? fb $(ratios $OUT/bench31_$i.jsonl varlen_fwdbwd_ms_per_tlx)"
done
finish
