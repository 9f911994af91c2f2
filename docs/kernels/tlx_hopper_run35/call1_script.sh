#!/usr/bin/env bash
# Run 35 call 1 (72d4b22, pma_dk_early on by default): tests/kernels in full, two full status tables,
# then Nsight Compute of the split-role PMA q128 fill 0.9 backward by warp role (with pma_dk_early).
source benchmarks/device_call.sh
gpu_tests kernels tests/kernels
for i in 1 2; do
  timeout $(( $(left) - 100 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench35_$i.jsonl" > "$OUT/bench35_$i.log" 2>&1
  log "bench $i rc=$?"
done
t=bwd_pma_q128_fill09
timeout $(( $(left) - 25 )) ncu --clock-control none --kernel-name regex:jfa_bwd_pma_kernel --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SourceCounters \
  -o "$OUT/$t" python -m benchmarks.tlx_ncu_probe --shape "PMA q128 fill0.9" > "$OUT/ncu_$t.log" 2>&1
r=$?
ncu --import "$OUT/$t.ncu-rep" --page details > "$OUT/details_$t.txt" 2>&1
ncu --import "$OUT/$t.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$t.csv" 2>/dev/null
python -m benchmarks.ncu_sass_hotspots "$OUT/sass_$t.csv" --by-role > "$OUT/byrole_$t.md" 2>&1
gzip "$OUT/sass_$t.csv"; rm -f "$OUT/$t.ncu-rep"
log "ncu $t rc=$r $(grep -E 'Duration|DRAM Throughput' "$OUT/details_$t.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
finish
