#!/usr/bin/env bash
# Session 28, call 3 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=420 bash devrun/call3.sh
# FwdConfig.half_tail (a tile's last 128-key block with <= 64 keys as a 64-key block):
# 1. its tests; 2. A/B forward (+ forward+backward) PMA q128 with 128-key blocks and half tails
# against the default 64-key blocks; 3. the same for self/dense (128-key blocks already).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-420} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "half_tail" -n 14 -q -p no:cacheprovider > $OUT/tests_half_tail.txt 2>&1
log "half_tail tests rc=$? $(tail -1 $OUT/tests_half_tail.txt)"
grep -E "FAILED|Error" $OUT/tests_half_tail.txt | head -10 >> $OUT/call.log
if grep -q " passed" $OUT/tests_half_tail.txt && ! grep -q "failed" $OUT/tests_half_tail.txt; then
  timeout 130 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 1 --ab block_n=128,num_buf_kv=2,late_p_cast=False,half_tail=True --ab-rounds 4 --out $OUT/ab_half_tail_pma.jsonl > $OUT/ab_half_tail_pma.log 2>&1
  log "ab half_tail PMA q128 rc=$?"
  timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --bwd --only "self,dense" --baseline-rounds 1 --ab half_tail=True --ab-rounds 3 --out $OUT/ab_half_tail_self.jsonl > $OUT/ab_half_tail_self.log 2>&1
  log "ab half_tail self/dense rc=$?"
fi
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
