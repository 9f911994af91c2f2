#!/usr/bin/env bash
# Session 27, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=420 bash devrun/call2.sh
# FwdConfig.tree_reduce (the softmax's row max / row sum as a per-thread binary tree in PTX):
# 1. the late-moving-maxima tests (default, each switch on); 2. A/B forward on every row;
# 3. ncu of PMA q128 fill 0.9 with it on; 4. the forward harness with it on.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-420} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 120 python -m pytest tests/kernels/test_tlx_hopper.py -k "row_maxima_moving_late" -n 14 -q -p no:cacheprovider > $OUT/tests_tree.txt 2>&1
log "late-maxima tests rc=$? $(tail -1 $OUT/tests_tree.txt)"
grep -E "FAILED|Error" $OUT/tests_tree.txt | head -10 >> $OUT/call.log
timeout 130 python -m benchmarks.tlx_hopper_bench --ab tree_reduce=True --ab-rounds 4 --out $OUT/ab_tree.jsonl > $OUT/ab_tree.log 2>&1
log "ab tree_reduce rc=$?"
t=q128fill09_tree
timeout 60 ncu --clock-control none --kernel-name regex:jfa_fwd_kernel --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  -o $OUT/fwd_$t python -m benchmarks.tlx_ncu_probe --shape "PMA q128 fill0.9" --fwd-config tree_reduce=True > $OUT/ncu_$t.log 2>&1
r=$?
ncu --import $OUT/fwd_$t.ncu-rep --page details > $OUT/details_$t.txt 2>&1
ncu --import $OUT/fwd_$t.ncu-rep --page source --csv --print-source sass > $OUT/sass_$t.csv 2>/dev/null
python -m benchmarks.ncu_sass_hotspots $OUT/sass_$t.csv --by-role > $OUT/byrole_$t.md 2>&1
gzip $OUT/sass_$t.csv; rm -f $OUT/fwd_$t.ncu-rep
log "ncu $t rc=$r $(grep -E 'Duration|DRAM Throughput' $OUT/details_$t.txt | head -2 | tr -s ' ' | tr '\n' ' ')"
for i in 0 1 2 3; do
  timeout $(( $(left) - 8 )) python tests/kernels/test_tlx_hopper.py --shard $i/4 --passes fwd,grid,ostore --fwd-config tree_reduce=True --out $OUT/harness_tree_$i.jsonl > $OUT/harness_tree_$i.log 2>&1 &
done
wait
log "harness tree_reduce=True: $(cat $OUT/harness_tree_*.jsonl | grep -c '"ok": true') ok, $(cat $OUT/harness_tree_*.jsonl | grep -c '"ok": false') failed"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
