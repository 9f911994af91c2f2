#!/usr/bin/env bash
# Session 26, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=370 bash devrun/call3.sh
# BwdConfig.dkdv_warp_arrive (per-thread releases of the dK/dV pass's slots): 1. its switch tests
# against the reference; 2. A/B forward+backward on every row; 3. the new forward defaults against the
# old (lazy_rescale and rcp_normalise off as the candidate: the inverse ratio).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-370} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 120 python -m pytest tests/kernels/test_tlx_hopper.py -k "bwd-dkdv-warp-arrive" -n 14 -q -p no:cacheprovider > $OUT/tests_dkdv_wa.txt 2>&1
log "dkdv warp-arrive tests rc=$? $(tail -1 $OUT/tests_dkdv_wa.txt)"
timeout 200 python -m benchmarks.tlx_hopper_bench --bwd --ab-bwd dkdv_warp_arrive=True --ab-rounds 4 --out $OUT/ab_dkdv_wa.jsonl > $OUT/ab_dkdv_wa.log 2>&1
log "ab dkdv_warp_arrive rc=$?"
timeout $(( $(left) - 3 )) python -m benchmarks.tlx_hopper_bench --ab lazy_rescale=False,rcp_normalise=False --ab-rounds 4 --out $OUT/ab_old_fwd.jsonl > $OUT/ab_old_fwd.log 2>&1
log "ab old forward defaults rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
