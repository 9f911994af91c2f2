#!/usr/bin/env bash
# Run 34 call 7 (pma_dk_early on by default): the broadcast GPU tests with it, then one table of the
# PMA q128 rows.
source benchmarks/device_call.sh
gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/bench_q128.jsonl" > "$OUT/bench_q128.log" 2>&1
log "bench rc=$?"
finish
