# Sourced by a device call's script (run from the repo root on the H200 host, carry
# [".gpu/tools", ".gpu/kernels"]): unpacks the bundle, sets the environment, and gives
#   left      seconds until the call's deadline (CALL_S, default 360, from when this was sourced)
#   log MSG   a timestamped line on stdout and in $OUT/call.log
#   finish    $OUT packed into one r.tgz beside call.log (the device tool returns few files)
#   ratios FILE FIELD   FIELD of each row of a JSONL file, rounded, None where absent (for the log)
#   gpu_tests NAME ARGS...   pytest ARGS into $OUT/tests_NAME.txt, logged with its failures; status
#             0 when something passed and nothing failed (gate the A/Bs on it)
#   ab_run NAME FIELD ARGS...   tlx_hopper_bench ARGS (an --ab / --ab-bwd candidate) in 4 ABBA
#             rounds into $OUT/ab_NAME.jsonl, FIELD (its ratio column) logged; stopped after
#             AB_TIMEOUT seconds when set (else 10 s before the deadline)
#   ab_gate FIELD LIMITS FILE...   "yes" when, for every "ROW<=LIMIT" of the comma-separated LIMITS,
#             the mean of FIELD over ROW's records in the FILEs is at most LIMIT, else "no" (gates an
#             in-call default flip on an A/B)
#   ncu_by_role NAME KERNEL SHAPE [PROBE-ARGS...]   Nsight Compute (`--clock-control none`) of the
#             first launch of the kernel matching regex KERNEL in `benchmarks.tlx_ncu_probe --shape
#             SHAPE PROBE-ARGS`: $OUT/details_NAME.txt, the SASS samples (sass_NAME.csv.gz) and
#             their table by warp role (byrole_NAME.md); logs the duration and DRAM throughput
#   tables PREFIX N   up to N full tables (`tlx_hopper_bench --bwd --baseline-rounds 2`) into
#             $OUT/PREFIX_1.jsonl ... while more than 60 s are left, each logged with its ratios
#             (on varlen pre-expanded, and the forward's on the issue's baseline)
#   chain_put KEY VALUE, chain_get KEY   a value handed from one call to a later one on the same
#             warm machine (a file under CHAIN_DIR, default /tmp/jfa_chain: /tmp outlives a call,
#             not the machine), so calls issued back to back can act on each other's results;
#             chain_get prints the value, or nothing with status 1 when the key was never put
#   kernels_md5   one checksum of kernels/*.py (which code a call ran; chained to tell a later
#             call whether the code it runs is the code an earlier call tested)
#   flip_default DIR   an in-call default flip: DIR mirrors the repo (DIR/kernels/..., DIR/tests/...),
#             its files replace the working tree's (status 1, logged, if one cannot be copied), the
#             kernels' md5 sums go to $OUT/md5_flipped.txt
#   flip_split_tile_field FIELD VALUE   an in-call flip of one `FwdConfig` field into
#             `tlx_hopper.SPLIT_TILE_FIELDS` (appended after its last entry, `first_branch`), logged;
#             status 1 when that line is not found (the default then runs)
#   ab_flip FIELD ROW   `--ab FIELD=True` on ROW in three processes (ab_FIELD_1..3, 45 s each),
#             gated at a mean ratio of 0.99 or less; where it passes, FIELD is chained and flipped
#             into SPLIT_TILE_FIELDS (the tables after it time the winner)
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
ratios() {  # None for a row without the field
  python -c "import json; rows = [json.loads(l) for l in open('$1')]
print([round(r['$2'], 3) if '$2' in r else None for r in rows])" 2>&1
}
gpu_tests() {
  local name=$1; shift
  timeout "$(( $(left) - 60 ))" python -m pytest "$@" -n 14 -q -p no:cacheprovider > "$OUT/tests_$name.txt" 2>&1
  log "$name tests rc=$? $(tail -1 "$OUT/tests_$name.txt")"
  grep -E "FAILED|Error" "$OUT/tests_$name.txt" | head -10 >> "$OUT/call.log"
  # what still runs after pytest (run 41: tables right after the tests came out host-stalled)
  { uptime; ps -eo pcpu,etimes,args --sort=-pcpu | head -8; nvidia-smi --query-compute-apps=pid,used_memory --format=csv; } \
    > "$OUT/after_tests_$name.txt" 2>&1
  grep -q " passed" "$OUT/tests_$name.txt" && ! grep -q " failed" "$OUT/tests_$name.txt"
}
ab_run() {
  local name=$1 field=$2; shift 2
  timeout "${AB_TIMEOUT:-$(( $(left) - 10 ))}" python -m benchmarks.tlx_hopper_bench "$@" --baseline-rounds 1 \
    --ab-rounds 4 --out "$OUT/ab_$name.jsonl" > "$OUT/ab_$name.log" 2>&1
  log "ab $name rc=$? $(ratios "$OUT/ab_$name.jsonl" "$field")"
}
ab_gate() {
  python - "$@" <<'PY'
import json, statistics, sys
field, limits, files = sys.argv[1], sys.argv[2], sys.argv[3:]
seen = {}
for f in files:
    for line in open(f):
        row = json.loads(line)
        seen.setdefault(row["name"], []).append(row[field])
rules = [r.split("<=") for r in limits.split(",")]
ok = all(name in seen and statistics.mean(seen[name]) <= float(lim) for name, lim in rules)
print("yes" if ok else "no")
PY
}
ncu_by_role() {
  local name=$1 kernel=$2 shape=$3 r
  shift 3
  timeout "$(( $(left) - 15 ))" ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SourceCounters \
    -o "$OUT/$name" python -m benchmarks.tlx_ncu_probe --shape "$shape" "$@" > "$OUT/ncu_$name.log" 2>&1
  r=$?
  ncu --import "$OUT/$name.ncu-rep" --page details > "$OUT/details_$name.txt" 2>&1
  ncu --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$name.csv" 2>/dev/null
  python -m benchmarks.ncu_sass_hotspots "$OUT/sass_$name.csv" --by-role > "$OUT/byrole_$name.md" 2>&1
  gzip "$OUT/sass_$name.csv"; rm -f "$OUT/$name.ncu-rep"
  log "ncu $name rc=$r $(grep -E 'Duration|DRAM Throughput' "$OUT/details_$name.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
}
tables() {
  local prefix=$1 n=$2 i
  for i in $(seq 1 "$n"); do
    [ "$(left)" -gt 60 ] || break
    timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --baseline-rounds 2 \
      --out "$OUT/${prefix}_$i.jsonl" > "$OUT/${prefix}_$i.log" 2>&1
    log "table $prefix $i rc=$? fb $(ratios "$OUT/${prefix}_$i.jsonl" varlen_fwdbwd_ms_per_tlx) fwd $(ratios "$OUT/${prefix}_$i.jsonl" varlen_fwd_ms_per_tlx) fwd issue $(ratios "$OUT/${prefix}_$i.jsonl" issue_varlen_fwd_ms_per_tlx)"
  done
}
CHAIN_DIR=${CHAIN_DIR:-/tmp/jfa_chain}
chain_put() { mkdir -p "$CHAIN_DIR" && printf '%s' "$2" > "$CHAIN_DIR/$1"; }
chain_get() { [ -f "$CHAIN_DIR/$1" ] && cat "$CHAIN_DIR/$1"; }
kernels_md5() { cat kernels/*.py | md5sum | cut -d' ' -f1; }
flip_default() {
  local f
  for f in $(cd "$1" && find . -type f); do
    mkdir -p "$(dirname "$f")" && cp "$1/$f" "$f" || { log "flip_default: cannot copy $f"; return 1; }
  done
  md5sum kernels/*.py > "$OUT/md5_flipped.txt"
  log "flipped from $1: $(cd "$1" && find . -type f | tr '\n' ' ')"
}
flip_split_tile_field() {
  sed -i "s/\"first_branch\": True})/\"first_branch\": True, \"$1\": $2})/" kernels/tlx_hopper.py
  if grep -q "\"$1\": $2})" kernels/tlx_hopper.py; then
    md5sum kernels/*.py > "$OUT/md5_flipped.txt"
    log "flipped: $1=$2 in SPLIT_TILE_FIELDS"
  else
    log "flip of $1 failed: SPLIT_TILE_FIELDS not found; the default runs"
    return 1
  fi
}
ab_flip() {
  local field=$1 row=$2 i gate
  for i in 1 2 3; do
    AB_TIMEOUT=45 ab_run "${field}_$i" tlx_fwd_ab_ratio --only "$row" --ab "$field=True"
  done
  gate=$(ab_gate tlx_fwd_ab_ratio "$row<=0.99" "$OUT/ab_${field}_1.jsonl" "$OUT/ab_${field}_2.jsonl" \
    "$OUT/ab_${field}_3.jsonl")
  log "$field gate: $gate"
  [ "$gate" = yes ] && chain_put "$field" 1 && flip_split_tile_field "$field" True
}
md5sum kernels/*.py > "$OUT/md5.txt"
