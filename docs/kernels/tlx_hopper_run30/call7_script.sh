#!/usr/bin/env bash
# Session 28, call 7 (carry [".gpu/tools", ".gpu/kernels"]): CALL_S=270 bash devrun/call7.sh
# The final code: tests/kernels in full.
set -u
T0=$(date +%s)
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/call.log; }
md5sum kernels/*.py > $OUT/md5.txt
timeout 255 python -m pytest tests/kernels -n 14 -q -p no:cacheprovider > $OUT/tests_kernels.txt 2>&1
log "tests/kernels rc=$? $(tail -1 $OUT/tests_kernels.txt)"
grep -E "FAILED|Error" $OUT/tests_kernels.txt | head -10 >> $OUT/call.log
log "end"
cp $OUT/call.log /tmp/call.log
(cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
