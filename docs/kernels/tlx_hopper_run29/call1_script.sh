#!/usr/bin/env bash
# Session 27, call 1 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=500 bash devrun/call1.sh
# Branch prep/dkdv-fold-delta rebased on main (d7e9a77 + the fold): 1. A/B fwd+bwd of
# dkdv_fold_delta on the PMA q192 rows; 2. tests/kernels in full (main's kernels plus the fold's
# switch tests); 3. one full status table.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-500} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
git log --oneline -1 > $OUT/head.txt 2>/dev/null
timeout 150 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q192" --ab-bwd dkdv_fold_delta=True --ab-rounds 4 --out $OUT/ab_fold.jsonl > $OUT/ab_fold.log 2>&1
log "ab dkdv_fold_delta rc=$?"
timeout 270 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_full.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_full.txt)"
grep -E "FAILED|ERROR" $OUT/tests_full.txt | head -20 >> $OUT/call.log
timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench.jsonl > $OUT/bench.log 2>&1
log "bench rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
