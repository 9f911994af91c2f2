#!/usr/bin/env bash
# Run 36 call 4: a second A/B process of FwdConfig.pdl on the PMA forwards; if both processes
# (call 3's and this one) gain on average at fill 0.1 and lose at most 1 % elsewhere, the default
# flipped for broadcast Q at D = 128 (devrun/flipped/: fwd_config and its config test) and the
# broadcast GPU tests with it.
source benchmarks/device_call.sh
ab_run pdl_2 tlx_fwd_ab_ratio --only "PMA" --ab pdl=True
flip=$(ab_gate tlx_fwd_ab_ratio "PMA q192 fill0.1<=0.98,PMA q128 fill0.1<=1.0,PMA q192 fill0.5<=1.01,PMA q192 fill0.9<=1.01,PMA q128 fill0.5<=1.01,PMA q128 fill0.9<=1.01" \
       devrun/ab_pdl_call3.jsonl "$OUT"/ab_pdl_2.jsonl)
log "flip=$flip"
if [ "$flip" = yes ]; then
  flip_default devrun/flipped
  gpu_tests bcast tests/kernels/test_tlx_hopper.py tests/kernels/test_tlx_hopper_config.py -k "pma or bcast"
fi
finish
