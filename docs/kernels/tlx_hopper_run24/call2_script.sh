#!/usr/bin/env bash
# Run 24, call 2 (session 22): O_TMA_ONLY + one more K/V stage as the broadcast default.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-540} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
git log --oneline | head -1 > $OUT/commit.txt
timeout 170 python -m pytest tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_launch.py -k "forward or o_store or bcast or launch" -n 15 -q -p no:cacheprovider > $OUT/tests.txt 2>&1
log "tests rc=$? $(tail -1 $OUT/tests.txt)"
ab() {  # name rows override
  timeout 80 python -m benchmarks.tlx_hopper_bench --bwd --only "$2" --ab "$3" --ab-rounds 6 --out $OUT/ab_$1.jsonl > $OUT/ab_$1.log 2>&1
  log "ab $1 ($3) rc=$?"
}
ab q128_4stages "PMA q128" num_buf_kv=4
ab q192_3stages "PMA q192" num_buf_kv=3
ab q128_tlstore "PMA q128" tma_store_o=False
ab q192_tlstore3 "PMA q192" tma_store_o=False,num_buf_kv=3
timeout 60 python -m benchmarks.tlx_launch_probe --cprofile > $OUT/launch_probe_q128.md 2>&1
log "launch probe rc=$?"
i=0
while [ $(left) -gt 80 ] && [ $i -lt 4 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench24_$(( i + 4 )).jsonl > $OUT/bench24_$(( i + 4 )).log 2>&1
  log "bench $(( i + 4 )) rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
