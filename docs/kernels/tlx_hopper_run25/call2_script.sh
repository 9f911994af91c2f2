#!/usr/bin/env bash
# Session 23, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=480 bash devrun/call2.sh
# 1. BwdConfig.pma_fold_delta: its tests, and every backward case of the harness with it on;
# 2. its A/B on the PMA q128 rows (forward+backward, 6 ABBA rounds); 3. PMA status samples.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-480} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "pma" -n 12 -q -p no:cacheprovider > $OUT/tests_pma.txt 2>&1
log "pma tests rc=$? $(tail -1 $OUT/tests_pma.txt)"
timeout 100 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --ab-bwd pma_fold_delta=True --ab-rounds 6 --out $OUT/ab_fold.jsonl > $OUT/ab_fold.log 2>&1
log "ab fold rc=$?"
for i in 0 1 2 3 4 5 6 7; do
  timeout 120 python -m tests.kernels.test_tlx_hopper --passes bwd,bwd-det --bwd-config pma_fold_delta=True --shard $i/8 --out $OUT/harness_fold.jsonl > /dev/null 2>&1 &
done
wait
log "harness fold: $(grep -c '"ok": true' $OUT/harness_fold.jsonl) ok, $(grep -c '"ok": false' $OUT/harness_fold.jsonl) failed"
i=0
while [ $(left) -gt 45 ] && [ $i -lt 4 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only PMA --baseline-rounds 2 --ab-bwd pma_fold_delta=True --ab-rounds 2 --out $OUT/pma25_$i.jsonl > $OUT/pma25_$i.log 2>&1
  log "pma sample $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
