#!/usr/bin/env bash
# Run 24, call 3 (session 22): tests of the final forward; old (9c446e8, devrun/old) against new
# (HEAD) PMA rows in alternating processes (the O_TMA_ONLY epilogue + TMA at short keys).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-450} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/tlx_hopper.py kernels/tlx_hopper_fwd.py devrun/old/kernels/tlx_hopper_fwd.py > $OUT/md5.txt
PYTHONPATH=/tmp/gpu-site:$PWD timeout 150 python -m pytest tests/kernels/test_tlx_hopper.py -k "forward or o_store or bcast" -n 15 -q -p no:cacheprovider > $OUT/tests.txt 2>&1
log "tests rc=$? $(tail -1 $OUT/tests.txt)"
i=0
while [ $(left) -gt 140 ] && [ $i -lt 3 ]; do
  i=$(( i + 1 ))
  (cd devrun/old && PYTHONPATH=/tmp/gpu-site:$PWD timeout 100 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA" --baseline-rounds 1 --out $OUT/old_$i.jsonl > $OUT/old_$i.log 2>&1)
  log "old $i rc=$?"
  PYTHONPATH=/tmp/gpu-site:$PWD timeout 100 python -m benchmarks.tlx_hopper_bench --bwd --only "PMA" --baseline-rounds 1 --out $OUT/new_$i.jsonl > $OUT/new_$i.log 2>&1
  log "new $i rc=$?"
done
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
