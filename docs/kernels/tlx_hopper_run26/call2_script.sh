#!/usr/bin/env bash
# Session 24, call 2 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=420 bash devrun/call2.sh
# 1. BwdConfig.dkdv_skip_idle_half: its tests; 2. its A/B (forward+backward) on the rows whose
# backward takes the dK/dV pass (self, PMA q192, dense); 3. the HBM ceiling (hbm_probe).
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-420} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 160 python -m pytest tests/kernels/test_tlx_hopper.py -k "idle_half" -n 14 -q -p no:cacheprovider > $OUT/tests_idle_half.txt 2>&1
log "idle-half tests rc=$? $(tail -1 $OUT/tests_idle_half.txt)"
timeout 150 python -m benchmarks.tlx_hopper_bench --bwd --only "self,q192 fill0.5,q192 fill0.9,dense" --ab-bwd dkdv_skip_idle_half=True --ab-rounds 4 --out $OUT/ab_idle_half.jsonl > $OUT/ab_idle_half.log 2>&1
log "ab idle half rc=$?"
timeout $(( $(left) - 10 )) python -m benchmarks.hbm_probe --only PMA --out $OUT/hbm_probe.md > $OUT/hbm_probe.log 2>&1
log "hbm_probe rc=$?"
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
