#!/usr/bin/env bash
# Session 24, call 1 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=480 bash devrun/call1.sh
# 1. the HBM ceiling by access order (benchmarks.hbm_probe); 2. Nsight Compute by warp role of the
# PMA forwards (q128 fill 0.1 / 0.9, q192 fill 0.1); 3. full-table status samples until the deadline.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-480} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> $OUT/call.log
timeout 150 python -m benchmarks.hbm_probe --only PMA --out $OUT/hbm_probe.md > $OUT/hbm_probe.log 2>&1
log "hbm_probe rc=$?"
for s in "q128 fill0.1" "q128 fill0.9" "q192 fill0.1"; do
  t=$(echo $s | tr -d ' .')
  timeout 90 ncu --clock-control none --kernel-name regex:jfa_fwd_kernel --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters \
    -o $OUT/fwd_$t python -m benchmarks.tlx_ncu_probe --shape "PMA $s" > $OUT/ncu_$t.log 2>&1
  r=$?
  ncu --import $OUT/fwd_$t.ncu-rep --page details > $OUT/details_$t.txt 2>&1
  ncu --import $OUT/fwd_$t.ncu-rep --page source --csv --print-source sass > $OUT/sass_$t.csv 2>/dev/null
  python -m benchmarks.ncu_sass_hotspots $OUT/sass_$t.csv --by-role > $OUT/byrole_$t.md 2>&1
  python -m benchmarks.ncu_sass_hotspots $OUT/sass_$t.csv --top 30 > $OUT/hotspots_$t.md 2>&1
  gzip $OUT/sass_$t.csv; rm -f $OUT/fwd_$t.ncu-rep
  log "ncu $t rc=$r $(grep -E 'Duration|DRAM Throughput' $OUT/details_$t.txt | head -2 | tr -s ' ' | tr '\n' ' ')"
done
i=0
while [ $(left) -gt 60 ] && [ $i -lt 3 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench26_$i.jsonl > $OUT/bench26_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
