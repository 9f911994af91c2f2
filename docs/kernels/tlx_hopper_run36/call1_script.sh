#!/usr/bin/env bash
# Run 36 call 1 (prep/dv-tma rebased on de28c43: pma_dv_in_dk_stage on by default, pma_dv_tma off):
# tests/kernels in full (its dv-tma switch and epilogue bit-identity cases among them); if they pass,
# two A/Bs of pma_dv_tma on the PMA q128 rows; one full status table; Nsight Compute of the
# split-role PMA q128 fill 0.9 backward by warp role with the new default.
source benchmarks/device_call.sh
if gpu_tests kernels tests/kernels; then
  for i in 1 2; do
    ab_run dv_tma_$i tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_tma=True
  done
fi
timeout $(( $(left) - 60 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out "$OUT/bench36_1.jsonl" > "$OUT/bench36_1.log" 2>&1
log "bench 1 rc=$? fb $(ratios "$OUT/bench36_1.jsonl" varlen_fwdbwd_ms_per_tlx)"
t=bwd_pma_q128_fill09
timeout $(( $(left) - 15 )) ncu --clock-control none --kernel-name regex:jfa_bwd_pma_kernel --launch-count 1 \
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
