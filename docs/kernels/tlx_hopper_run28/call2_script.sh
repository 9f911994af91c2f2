#!/usr/bin/env bash
# Session 26, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=500 bash devrun/call2.sh
# The new defaults (lazy_rescale + rcp_normalise for PMA D=128): tests/kernels in full; Nsight Compute by
# warp role of the PMA q192 fill 0.5 dK/dV pass (the backward the q192 goal waits on); status tables.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-500} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 250 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
t=q192fill05_dkdv
timeout 70 ncu --clock-control none --kernel-name regex:jfa_bwd_dkdv_kernel --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters \
  -o $OUT/bwd_$t python -m benchmarks.tlx_ncu_probe --shape "PMA q192 fill0.5" > $OUT/ncu_$t.log 2>&1
r=$?
ncu --import $OUT/bwd_$t.ncu-rep --page details > $OUT/details_$t.txt 2>&1
ncu --import $OUT/bwd_$t.ncu-rep --page source --csv --print-source sass > $OUT/sass_$t.csv 2>/dev/null
python -m benchmarks.ncu_sass_hotspots $OUT/sass_$t.csv --by-role > $OUT/byrole_$t.md 2>&1
python -m benchmarks.ncu_sass_hotspots $OUT/sass_$t.csv --top 40 > $OUT/hotspots_$t.md 2>&1
gzip $OUT/sass_$t.csv; rm -f $OUT/bwd_$t.ncu-rep
log "ncu $t rc=$r $(grep -E 'Duration|DRAM Throughput' $OUT/details_$t.txt | head -2 | tr -s ' ' | tr '\n' ' ')"
i=0
while [ $(left) -gt 85 ] && [ $i -lt 3 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 3 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench28_$i.jsonl > $OUT/bench28_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
