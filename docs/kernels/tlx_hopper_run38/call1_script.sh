#!/usr/bin/env bash
# Run 38 call 1: tests/kernels in full (build_warps, the CUDA-graph test), schedule_bench, fill-0.1 rows with --graph
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
timeout 90 python -m benchmarks.schedule_bench --out "$OUT/schedule_bench.jsonl" > "$OUT/schedule_bench.log" 2>&1
log "schedule_bench rc=$?"; tail -n 9 "$OUT/schedule_bench.log" >> "$OUT/call.log"
timeout 120 python -m benchmarks.tlx_hopper_bench --only "fill0.1" --graph --baseline-rounds 2 --out "$OUT/graph38.jsonl" > "$OUT/graph38.log" 2>&1
log "graph rc=$? $(ratios "$OUT/graph38.jsonl" tlx_fwd_graph_ms) eager $(ratios "$OUT/graph38.jsonl" tlx_fwd_ms)"
finish
