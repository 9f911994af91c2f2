#!/usr/bin/env bash
# Run 33 call 4 (branch prep/split-ps): pma_split_ps's GPU tests, A/Bs (PMA q128 fwd+bwd, 2 x 4 ABBA
# rounds); if it wins (mean ratio <= 0.99 at fill 0.9, <= 1.0 at 0.5, <= 1.02 at 0.1) the default
# flipped (devrun/flipped/: bwd_config and the tests), the broadcast tests and one q128 table.
source benchmarks/device_call.sh
flip=no
if gpu_tests split_ps tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "split-ps or split_ps or epilogues"; then
  ab_run split_ps tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_split_ps=True
  ab_run split_ps_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_split_ps=True
  flip=$(python - "$OUT"/ab_split_ps.jsonl "$OUT"/ab_split_ps_2.jsonl <<'PY'
import json, sys
r = {}
for f in sys.argv[1:]:
    for l in open(f):
        x = json.loads(l); r.setdefault(x["name"], []).append(x["tlx_fwdbwd_abbwd_ratio"])
m = {k: sum(v) / len(v) for k, v in r.items()}
ok = len(m) == 3 and m["PMA q128 fill0.9"] <= 0.99 and m["PMA q128 fill0.5"] <= 1.0 and m["PMA q128 fill0.1"] <= 1.02
print("yes" if ok else "no")
PY
)
fi
log "flip=$flip"
if [ "$flip" = yes ]; then
  cp devrun/flipped/tlx_hopper.py kernels/ && cp devrun/flipped/test_tlx_hopper*.py tests/kernels/ && md5sum kernels/*.py > "$OUT/md5_flipped.txt"
  gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/bench_q128.jsonl" > "$OUT/bench_q128.log" 2>&1
  log "bench rc=$?"
fi
finish
