#!/usr/bin/env bash
# pma_dk_stage as broadcast_q's default (3 K + 2 V): the broadcast tests, then a q128 table.
source benchmarks/device_call.sh
gpu_tests bcast tests/kernels/test_tlx_hopper.py -k "pma or bcast"
timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/bench_q128.jsonl" > "$OUT/bench_q128.log" 2>&1
log "bench rc=$?"; tail -5 "$OUT/bench_q128.log"
finish
