#!/usr/bin/env bash
# Run 40 call 6: the SM clock and power while the forward runs back to back (the bench's regime)
# and with a 1 ms spin before each call (call 5's isolated calls ran 7-14 % faster), PMA q128
# fill 0.1 and self fill 1.0; then two full tables
source benchmarks/device_call.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 50 \
  > "$OUT/clocks.csv" &
SMI=$!
cat > /tmp/regime.py <<'PY'
import math, sys, time, torch
from benchmarks.tlx_hopper_bench import build, selected_shapes, settle
from kernels import tlx_hopper
from kernels.common import JFAParams
for name in ("PMA q128 fill0.1", "self B768 fill1.0"):
    sh = selected_shapes(name)[0]
    x = build(sh)
    bcast = sh["kind"] == "bcast"
    params = JFAParams(max_seq_len_q=sh["q"], max_seq_len_kv=sh["max_kv"],
                       sm_scale=1 / math.sqrt(x["q"].shape[-1]), broadcast_q=bcast)
    q_off = None if bcast else x["q_off"]
    fwd = lambda: tlx_hopper.forward(x["q"], x["k"], x["v"], q_off, x["k_off"], params)
    for regime in ("back-to-back", "spin-before-each"):
        settle(fwd, ms=500)
        print(time.time(), name, regime, "start", flush=True)
        end = time.time() + 3
        n = 0
        while time.time() < end:
            if regime == "spin-before-each":
                torch.cuda._sleep(2_000_000)
            fwd()
            n += 1
            if n % 4 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        print(time.time(), name, regime, "end", n, flush=True)
        time.sleep(1)
PY
timeout 60 python /tmp/regime.py > "$OUT/regime.log" 2>&1
log "regime rc=$?"
kill $SMI
cat "$OUT/regime.log" >> "$OUT/call.log"
tables bench40c 2
finish
