#!/usr/bin/env bash
# Run 33 call 3 (main after call 2's removal = call 1's kernels): Nsight Compute of the split-role PMA
# q128 backward and the forward at fill 0.9, and of self fill 0.5's dK/dV pass: speed of light,
# pipes, memory, warp states, per-instruction stall samples by warp role.
source benchmarks/device_call.sh
prof() {  # NAME KERNEL-REGEX SHAPE
  local t=$1
  timeout $(( $(left) - 25 )) ncu --clock-control none --kernel-name regex:"$2" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SourceCounters \
    -o "$OUT/$t" python -m benchmarks.tlx_ncu_probe --shape "$3" > "$OUT/ncu_$t.log" 2>&1
  local r=$?
  ncu --import "$OUT/$t.ncu-rep" --page details > "$OUT/details_$t.txt" 2>&1
  ncu --import "$OUT/$t.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$t.csv" 2>/dev/null
  python -m benchmarks.ncu_sass_hotspots "$OUT/sass_$t.csv" --by-role > "$OUT/byrole_$t.md" 2>&1
  gzip "$OUT/sass_$t.csv"; rm -f "$OUT/$t.ncu-rep"
  log "ncu $t rc=$r $(grep -E 'Duration|DRAM Throughput' "$OUT/details_$t.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
}
prof bwd_pma_q128_fill09 jfa_bwd_pma_kernel "PMA q128 fill0.9"
prof fwd_pma_q128_fill09 jfa_fwd_kernel "PMA q128 fill0.9"
[ "$(left)" -gt 90 ] && prof bwd_self_fill05 jfa_bwd_dkdv_kernel "self B768 fill0.5"
finish
