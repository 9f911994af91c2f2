#!/usr/bin/env bash
# Run 34 call 6 (same machine as call 5, warm): pma_dk_early's A/B twice more (call 5: fill 0.9 mean
# 0.990, fill 0.1 1.003 and 1.139); gate on the four processes' means as call 5's; if it passes, the
# default flipped, the broadcast tests and one q128 table.
source benchmarks/device_call.sh
ab_run dk_early_3 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dk_early=True
ab_run dk_early_4 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dk_early=True
flip=$(ab_gate tlx_fwdbwd_abbwd_ratio "PMA q128 fill0.9<=0.99,PMA q128 fill0.5<=1.0,PMA q128 fill0.1<=1.02" \
       devrun/c5/ab_dk_early.jsonl devrun/c5/ab_dk_early_2.jsonl "$OUT"/ab_dk_early_3.jsonl "$OUT"/ab_dk_early_4.jsonl)
log "flip=$flip"
if [ "$flip" = yes ]; then
  cp devrun/flipped/tlx_hopper.py kernels/ && cp devrun/flipped/test_tlx_hopper*.py tests/kernels/ && md5sum kernels/*.py > "$OUT/md5_flipped.txt"
  gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/bench_q128.jsonl" > "$OUT/bench_q128.log" 2>&1
  log "bench rc=$?"
fi
finish
