#!/usr/bin/env bash
# Next device round for issue 5 (prepared in session 21): one call, carry [".gpu/tools", ".gpu/kernels"],
#   CALL_S=540 bash devrun/next_s22.sh; then read $OUT (one r.tgz: the tool returns at most 8 files)
# 1. the final code's selection of broadcast O by TMA store on the GPU, and the prepared L2-prefetch
#    switches (FwdConfig.prefetch_kv, BwdConfig.pma_prefetch_kv: off), by their tests;
# 2. the fill-0.1 A/B of the O store again, both sides passing config= (4b2d154);
# 3. A/Bs of the two prefetch switches on the PMA rows;
# 4. full-table status samples with the O store (run 23's status predates it); the launch probe
#    for the host-path cuts (descriptors without checks, cached capability and configs).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-540} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_launch.py -k "forward or o_store or bcast or launch or prefetch" -n 15 -q -p no:cacheprovider > $OUT/tests.txt 2>&1
log "tests rc=$? $(tail -1 $OUT/tests.txt)"
timeout 60 python -m benchmarks.tlx_launch_probe > $OUT/launch_probe_q128.md 2>&1
log "launch probe rc=$?"
timeout 60 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128 fill0.1" --ab tma_store_o=True,num_buf_kv=4 --ab-rounds 6 --out $OUT/ab_q128_fill01_tma.jsonl > $OUT/ab_q128_fill01_tma.log 2>&1
log "ab q128 fill0.1 rc=$?"
timeout 60 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q192 fill0.1" --ab tma_store_o=True --ab-rounds 6 --out $OUT/ab_q192_fill01_tma.jsonl > $OUT/ab_q192_fill01_tma.log 2>&1
log "ab q192 fill0.1 rc=$?"
timeout 90 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128 fill0.5,PMA q128 fill0.9,PMA q192 fill0.5,PMA q192 fill0.9" --ab prefetch_kv=4 --ab-rounds 4 --out $OUT/ab_fwd_prefetch4.jsonl > $OUT/ab_fwd_prefetch4.log 2>&1
log "ab fwd prefetch rc=$?"
timeout 90 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --ab-bwd pma_prefetch_kv=3 --ab-rounds 4 --out $OUT/ab_bwd_prefetch3.jsonl > $OUT/ab_bwd_prefetch3.log 2>&1
log "ab bwd prefetch rc=$?"
i=0
while [ $(left) -gt 80 ] && [ $i -lt 4 ]; do
  i=$(( i + 1 ))
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 --out $OUT/bench24_$i.jsonl > $OUT/bench24_$i.log 2>&1
  log "bench $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
