#!/usr/bin/env bash
# Run 36 call 4b (warm, after call 4, with the flipped files in the tree): one table of the PMA rows
CALL_S=120 bash -c 'source benchmarks/device_call.sh; timeout 100 python -m benchmarks.tlx_hopper_bench --bwd --only PMA --baseline-rounds 2 --out "$OUT/pma36_pdl.jsonl" > "$OUT/pma36_pdl.log" 2>&1; log "pma table rc=$? fwd $(ratios "$OUT/pma36_pdl.jsonl" varlen_fwd_ms_per_tlx) fb $(ratios "$OUT/pma36_pdl.jsonl" varlen_fwdbwd_ms_per_tlx)"; finish'
