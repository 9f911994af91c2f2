#!/usr/bin/env bash
# Session 25, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=560 bash devrun/call2.sh
# 1. the forward identity switches' tests (q_in_regs, pdl new) and the backward's pdl switch tests;
# 2. A/B on every row of FwdConfig.q_in_regs=True (QK^T reads Q from registers; warp_arrive is now
# on for PMA D=128); 3. A/B on every row of pdl=True, forward (--ab) and backward (--ab-bwd);
# 4. the PMA rows with --graph (device time without the host's launch path).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-560} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 170 python -m pytest tests/kernels/test_tlx_hopper.py -k "switch_changes_no_value or bwd-pdl" -n 14 -q -p no:cacheprovider > $OUT/tests_switches.txt 2>&1
log "switch tests rc=$? $(tail -1 $OUT/tests_switches.txt)"
timeout 200 python -m benchmarks.tlx_hopper_bench --bwd --ab q_in_regs=True --ab-rounds 4 --out $OUT/ab_q_in_regs.jsonl > $OUT/ab_q_in_regs.log 2>&1
log "ab q_in_regs rc=$?"
timeout $(( $(left) - 60 )) python -m benchmarks.tlx_hopper_bench --bwd --ab pdl=True --ab-bwd pdl=True --ab-rounds 4 --out $OUT/ab_pdl.jsonl > $OUT/ab_pdl.log 2>&1
log "ab pdl rc=$?"
if [ $(left) -gt 45 ]; then
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --graph --only PMA --out $OUT/graph.jsonl > $OUT/graph.log 2>&1
  log "graph bench rc=$?"
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
