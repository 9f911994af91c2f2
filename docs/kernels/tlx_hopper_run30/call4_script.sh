#!/usr/bin/env bash
# Session 28, call 4 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=360 bash devrun/call4.sh
# BwdConfig.dq_replicas (the fused pass's broadcast dQ reduce-added into replicas of its rows):
# 1. its switch tests; 2. A/B forward+backward on PMA q192 with 4, 8 and 16 replicas.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-360} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 120 python -m pytest tests/kernels/test_tlx_hopper.py -k "test_backward_switch and replicas" -n 14 -q -p no:cacheprovider > $OUT/tests_dq_replicas.txt 2>&1
log "dq_replicas tests rc=$? $(tail -1 $OUT/tests_dq_replicas.txt)"
grep -E "FAILED|Error" $OUT/tests_dq_replicas.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_dq_replicas.txt && ! grep -q "failed" $OUT/tests_dq_replicas.txt; then
  for r in 8 4 16; do
    [ $(left) -lt 60 ] && break
    timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q192" --baseline-rounds 1 --ab-bwd dq_replicas=$r --ab-rounds 4 --out $OUT/ab_dq_replicas$r.jsonl > $OUT/ab_dq_replicas$r.log 2>&1
    log "ab dq_replicas=$r rc=$? $(python -c "import json,sys; print([round(json.loads(l)['tlx_fwdbwd_abbwd_ratio'],3) for l in open('$OUT/ab_dq_replicas$r.jsonl')])" 2>&1)"
  done
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
