#!/usr/bin/env bash
# Session 26, call 4 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=250 bash devrun/call4.sh
# BwdConfig.pma_warp_arrive (per-thread ring releases in the split-role PMA pass): 1. its switch tests
# against the reference; 2. A/B forward+backward on the PMA q128 rows (the rows that run that pass).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-250} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 100 python -m pytest tests/kernels/test_tlx_hopper.py -k "bwd-pma-warp-arrive" -n 14 -q -p no:cacheprovider > $OUT/tests_pma_wa.txt 2>&1
log "pma warp-arrive tests rc=$? $(tail -1 $OUT/tests_pma_wa.txt)"
timeout $(( $(left) - 3 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --ab-bwd pma_warp_arrive=True --ab-rounds 6 --out $OUT/ab_pma_wa.jsonl > $OUT/ab_pma_wa.log 2>&1
log "ab pma_warp_arrive rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
