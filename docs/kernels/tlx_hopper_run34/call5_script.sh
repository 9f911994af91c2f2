#!/usr/bin/env bash
# Run 34 call 5: pma_dk_early (the split-role pass's gradient warpgroup issues dK's wgmmas before
# dV's epilogue): its GPU tests; A/B forward+backward on the PMA q128 rows (2 x 4 ABBA rounds); if it
# wins (mean ratio <= 0.99 at fill 0.9, <= 1.0 at 0.5, <= 1.02 at 0.1) the default flipped
# (devrun/flipped/: bwd_config and the tests), the broadcast tests and one q128 table.
source benchmarks/device_call.sh
flip=no
if gpu_tests dk_early tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "dk-early or dk_early or epilogues"; then
  ab_run dk_early tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dk_early=True
  ab_run dk_early_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dk_early=True
  flip=$(ab_gate tlx_fwdbwd_abbwd_ratio "PMA q128 fill0.9<=0.99,PMA q128 fill0.5<=1.0,PMA q128 fill0.1<=1.02" \
         "$OUT"/ab_dk_early.jsonl "$OUT"/ab_dk_early_2.jsonl)
fi
log "flip=$flip"
if [ "$flip" = yes ]; then
  cp devrun/flipped/tlx_hopper.py kernels/ && cp devrun/flipped/test_tlx_hopper*.py tests/kernels/ && md5sum kernels/*.py > "$OUT/md5_flipped.txt"
  gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
  timeout $(( $(left) - 5 )) python -m benchmarks.tlx_hopper_bench --bwd --only "PMA q128" --baseline-rounds 2 --out "$OUT/bench_q128.jsonl" > "$OUT/bench_q128.log" 2>&1
  log "bench rc=$?"
fi
finish
