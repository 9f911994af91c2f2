#!/usr/bin/env bash
# Next session's first call (written in session 37): where the PMA q128 fill-0.5 forward's time
# goes between Nsight Compute's single launch (243.7 us, run 39 call 1, 1.54 GHz) and the bench's
# sustained-clock call (0.265-0.29 ms): the call replayed from a CUDA graph beside eager (is it the
# schedule build before it?), per-kernel device times under torch.profiler, and the SM clock
# during a settled run (the 700 W cap). Then GPU tests and full tables if time is left.
# Run: CALL_S=400 bash devrun/next_call.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
timeout 150 python -m benchmarks.tlx_hopper_bench --only "PMA q128" --graph --baseline-rounds 2 \
  --out "$OUT/graph40.jsonl" > "$OUT/graph40.log" 2>&1
log "graph rc=$? $(ratios "$OUT/graph40.jsonl" tlx_fwd_graph_ms) eager $(ratios "$OUT/graph40.jsonl" tlx_fwd_ms)"
(nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 100 > "$OUT/clocks.csv" &
 echo $! > /tmp/smi.pid)
timeout 120 python -m benchmarks.jfa_profile --workloads q128_B768_L1024_H4_fill0.5 q128_B768_L1024_H4_fill0.1 --methods tlx --passes fwd \
  --top-kernels 4 > "$OUT/profile40.md" 2>&1
log "profile rc=$?"
kill "$(cat /tmp/smi.pid)" 2>/dev/null
tables bench40 2
finish
