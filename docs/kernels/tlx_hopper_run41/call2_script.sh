#!/usr/bin/env bash
# Run 41 call 2: where the fill-0.1 forwards' host time goes today (call 1's A/B and tables were
# host-stalled: q192 fill 0.1 timed 0.150 in its A/B against 0.113 in the table), and the device
# time of those rows from CUDA graphs beside the eager calls.
# Run: CALL_S=240 bash devrun/call2.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
nproc > "$OUT/host.txt"; uptime >> "$OUT/host.txt"; top -bn1 | head -20 >> "$OUT/host.txt"
timeout 90 python -m benchmarks.tlx_launch_probe --cprofile --calls 300 > "$OUT/launch_q128.md" 2>&1
log "probe q128 rc=$? $(grep -E '^tlx_launch|^JIT' "$OUT/launch_q128.md" | tr '\n' ' ')"
timeout 60 python -m benchmarks.tlx_launch_probe --calls 300 --q-len 192 --batch 1024 --heads 3 --max-kv 1000 > "$OUT/launch_q192.md" 2>&1
log "probe q192 rc=$? $(grep -E '^tlx_launch|^JIT' "$OUT/launch_q192.md" | tr '\n' ' ')"
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_hopper_bench --graph --only "PMA q128 fill0.1,PMA q192 fill0.1" \
  --baseline-rounds 2 --out "$OUT/graph41.jsonl" > "$OUT/graph41.log" 2>&1
log "graph rc=$? $(python -c "
import json
for l in open('$OUT/graph41.jsonl'):
    d = json.loads(l); print(d['name'], {k: round(v, 4) for k, v in d.items() if k.endswith('_ms')})")"
finish
