#!/usr/bin/env bash
# Run 35 call 5 (pma_dv_in_dk_stage on by default for broadcast_q): the broadcast GPU tests, then
# one table of the PMA q128 rows.
source benchmarks/device_call.sh
gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/q128_dv_in_dk.jsonl" > "$OUT/q128_dv_in_dk.log" 2>&1
log "bench rc=$?"
finish
