#!/usr/bin/env bash
# Session 24, call 4 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=420 bash devrun/call4.sh
# FwdConfig.pingpong=False (the consumers issue QK^T without taking turns): 1. A/B on every row;
# 2. its bit-identity tests; 3. the forward harness with it in every call.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-420} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 200 python -m benchmarks.tlx_hopper_bench --bwd --ab pingpong=False --ab-rounds 4 --out $OUT/ab_pingpong.jsonl > $OUT/ab_pingpong.log 2>&1
log "ab pingpong rc=$?"
timeout 100 python -m pytest tests/kernels/test_tlx_hopper.py -k "switch_changes_no_value" -n 14 -q -p no:cacheprovider > $OUT/tests_flip.txt 2>&1
log "flip tests rc=$? $(tail -1 $OUT/tests_flip.txt)"
for i in 0 1 2 3; do
  timeout $(( $(left) - 10 )) python tests/kernels/test_tlx_hopper.py --shard $i/4 --passes fwd,grid,ostore --fwd-config pingpong=False --out $OUT/harness_pp_$i.jsonl > $OUT/harness_pp_$i.log 2>&1 &
done
wait
log "harness pingpong=False: $(cat $OUT/harness_pp_*.jsonl | grep -c '"ok": true') ok, $(cat $OUT/harness_pp_*.jsonl | grep -c '"ok": false') failed"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
