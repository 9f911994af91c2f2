#!/usr/bin/env bash
# Session 24, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=300 bash devrun/call3.sh
# 1. PMA q128 forward with 128-key blocks (two stages): A/B; 2. its forward tests (harness);
# 3. Nsight Compute by role of the self fill-0.5 forward.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-300} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
CAND=block_n=128,num_buf_kv=2,late_p_cast=False
timeout 120 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --ab $CAND --ab-rounds 4 --out $OUT/ab_bn128.jsonl > $OUT/ab_bn128.log 2>&1
log "ab bn128 rc=$?"
for i in 0 1 2 3; do
  timeout 100 python tests/kernels/test_tlx_hopper.py --shard $i/4 --passes fwd,grid,ostore --filter "-q128-,-q100-,-q64-" --fwd-config $CAND --out $OUT/harness_bn128.jsonl > $OUT/harness_bn128_$i.log 2>&1 &
done
wait
log "harness bn128: $(grep -c '"ok": true' $OUT/harness_bn128.jsonl) ok, $(grep -c '"ok": false' $OUT/harness_bn128.jsonl) failed"
timeout $(( $(left) - 15 )) ncu --clock-control none --kernel-name regex:jfa_fwd_kernel --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    -o $OUT/fwd_self05 python -m benchmarks.tlx_ncu_probe --shape "self B768 fill0.5" > $OUT/ncu_self05.log 2>&1
ncu --import $OUT/fwd_self05.ncu-rep --page details > $OUT/details_self05.txt 2>&1
ncu --import $OUT/fwd_self05.ncu-rep --page source --csv --print-source sass > $OUT/sass_self05.csv 2>/dev/null
python -m benchmarks.ncu_sass_hotspots $OUT/sass_self05.csv --by-role > $OUT/byrole_self05.md 2>&1
python -m benchmarks.ncu_sass_hotspots $OUT/sass_self05.csv --top 30 > $OUT/hotspots_self05.md 2>&1
gzip $OUT/sass_self05.csv; rm -f $OUT/fwd_self05.ncu-rep
log "ncu self05 $(grep -E 'Duration' $OUT/details_self05.txt | head -1 | tr -s ' ')"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
