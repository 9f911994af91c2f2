#!/usr/bin/env bash
# Prepared in session 44 (no machine lent; run 45's next_call_c_script.sh), the last of the next
# device calls (after next_call_a/b/c_script.sh; if a candidate became the default in between,
# this times the new default): up to three full tables whose rows now record each timing's host
# µs per call (`timed_host_us`), so a host-stalled fill-0.1 sample shows as such; the host's load
# before each (uptime) beside them. Session 45 changed the forward's and the schedule build's
# launchers (kernels' SASS unchanged): unless TESTED=1 (call A ran `tests/kernels` in full on the
# same code) the suite runs after the tables, which stop 330 s early for it (tables right after
# pytest came out host-stalled in run 41), and judges the code the tables ran. FLIP_BALANCED=1
# times the balanced split as the default (flip_balanced.py), when call A's gate took it and it has
# not been merged yet.
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run46/next_call_d_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
if [ "${FLIP_BALANCED:-0}" = 1 ]; then
  python docs/kernels/tlx_hopper_run46/flip_balanced.py >> "$OUT/call.log" 2>&1 || { finish; exit; }
  md5sum kernels/*.py > "$OUT/md5_flipped.txt"
fi
uptime >> "$OUT/call.log"
if [ "${TESTED:-0}" = 1 ]; then tables bench46 3; else
  DEADLINE=$(( DEADLINE - 330 ))  # the tables stop 330 s early: tests/kernels after them
  tables bench46 2
  DEADLINE=$(( DEADLINE + 330 ))
fi
for f in "$OUT"/bench46_*.jsonl; do
  python - "$f" <<'PY' >> "$OUT/call.log" 2>&1
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    if "fill0.1" in row["name"]:
        print(sys.argv[1].rsplit("/", 1)[-1], row["name"], "tlx fwd ms", round(row["tlx_fwd_ms"], 4),
              "host us per timing [p10, median]", row.get("timed_host_us"))
PY
done
[ "${TESTED:-0}" = 1 ] || gpu_tests kernels tests/kernels
finish
