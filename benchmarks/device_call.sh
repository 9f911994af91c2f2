# Sourced by a device call's script (run from the repo root on the H200 host, carry
# [".gpu/tools", ".gpu/kernels"]): unpacks the bundle, sets the environment, and gives
#   left      seconds until the call's deadline (CALL_S, default 360, from when this was sourced)
#   log MSG   a timestamped line on stdout and in $OUT/call.log
#   finish    $OUT packed into one r.tgz beside call.log (the device tool returns few files)
# and records the kernels' md5 sums (which code the call ran) in $OUT/md5.txt.
set -u
T0=$(date +%s); DEADLINE=$(( T0 + ${CALL_S:-360} ))
bash .gpu/tools/unpack.sh >/dev/null || exit 1
export PYTHONPATH=/tmp/gpu-site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
left() { echo $(( DEADLINE - $(date +%s) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/call.log"; }
finish() {
  log "end"
  cp "$OUT/call.log" /tmp/call.log
  (cd "$OUT" && tar czf /tmp/r.tgz . && find . -mindepth 1 -delete && mv /tmp/r.tgz . && cp /tmp/call.log .)
}
md5sum kernels/*.py > "$OUT/md5.txt"
