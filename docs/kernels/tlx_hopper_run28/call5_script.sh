#!/usr/bin/env bash
# Session 26, call 5 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=230 bash devrun/call5.sh
# BwdConfig.dkdv_war_fences=False (the dK/dV pass without its write-after-read proxy fences): 1. its
# switch tests against the reference; 2. A/B forward+backward on the rows that run that pass.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-230} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 100 python -m pytest tests/kernels/test_tlx_hopper.py -k "bwd-dkdv-no-war-fences" -n 14 -q -p no:cacheprovider > $OUT/tests_war_fences.txt 2>&1
log "no-war-fences tests rc=$? $(tail -1 $OUT/tests_war_fences.txt)"
timeout $(( $(left) - 3 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q192,self,dense" --ab-bwd dkdv_war_fences=False --ab-rounds 4 --out $OUT/ab_war_fences.jsonl > $OUT/ab_war_fences.log 2>&1
log "ab dkdv_war_fences=False rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
