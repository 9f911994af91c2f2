#!/usr/bin/env bash
# Run 37 call 5: the schedule build's warp count. schedule_bench with 2/4/8/16 warps; then, if a
# count other than 4 builds the PMA forwards' schedules (768-1,024 entries) faster, an A/B of the
# PMA forwards with it.
source benchmarks/device_call.sh
timeout 120 python -m benchmarks.schedule_bench --warps 2,4,8,16 --out "$OUT/schedule_warps.jsonl" > "$OUT/schedule_warps.log" 2>&1
log "schedule_bench rc=$?"; tail -n 9 "$OUT/schedule_warps.log" >> "$OUT/call.log"
best=$(python - "$OUT/schedule_warps.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pma = [r for r in rows if r["shape"].startswith("PMA") and r["entries"] <= 1024]
print(min((2, 4, 8, 16), key=lambda w: sum(r[f"w{w}_device_ms"] for r in pma)))
PY
)
log "best warps for the PMA forward builds: $best"
if [ "$best" != 4 ]; then
  ab_run warps tlx_fwd_absched_ratio --only PMA --ab-schedule-warps "$best"
fi
finish
