#!/usr/bin/env bash
# Run 34 call 2: dkdv_cast_dq (self/cross dQ cast by each sequence's last KV tile inside the dK/dV
# pass): its GPU tests; A/B forward+backward on the self and dense rows (2 x 4 ABBA rounds); if it
# wins (mean ratio <= 0.99 at self fill 0.5, <= 1.0 at fill 1.0, <= 1.01 dense B4 H32) the default
# flipped (devrun/flipped/: bwd_config and the tests) and tests/kernels in full.
source benchmarks/device_call.sh
flip=no
if gpu_tests cast_dq tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_bwd_helpers.py -k "cast-dq or preprocess"; then
  ab_run cast_dq tlx_fwdbwd_abbwd_ratio --bwd --only "self,dense" --ab-bwd dkdv_cast_dq=True
  ab_run cast_dq_2 tlx_fwdbwd_abbwd_ratio --bwd --only "self,dense" --ab-bwd dkdv_cast_dq=True
  flip=$(ab_gate tlx_fwdbwd_abbwd_ratio "self B768 fill0.5<=0.99,self B768 fill1.0<=1.0,dense B4 H32 N4096<=1.01" \
         "$OUT"/ab_cast_dq.jsonl "$OUT"/ab_cast_dq_2.jsonl)
fi
log "flip=$flip"
if [ "$flip" = yes ]; then
  cp devrun/flipped/tlx_hopper.py kernels/ && cp devrun/flipped/test_tlx_hopper*.py tests/kernels/ && md5sum kernels/*.py > "$OUT/md5_flipped.txt"
  gpu_tests kernels tests/kernels
fi
finish
