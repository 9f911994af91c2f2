#!/usr/bin/env bash
# Prepared in session 53 after call b (H200): four K/V stages cost the split tile 10 % there
# (eight against four 0.898 / 0.899), the branches gained (q192 fill 0.1 old/new 1.078 / 1.080,
# q128 ~2 %); the split tile's refusal test failed (a causal call met tail_branch's rule first:
# the split tile's rule now comes first). Eight stages restored. This call: the split-tile and
# refusal tests, the reverse A/B of the q128 row (old default: no branches), tables.
# Run: CALL_S=300 bash docs/kernels/tlx_hopper_run51/call_c_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 330
source benchmarks/device_call.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 130 ))
gpu_tests split tests/kernels/test_tlx_hopper.py -k "split_tiles or tail_branch"
DEADLINE=$DEADLINE_SAVE
for i in 1 2; do
  AB_TIMEOUT=40 ab_run "old_q128_$i" tlx_fwd_ab_ratio --only "PMA q128 fill0.1" \
    --ab tail_branch=False,first_branch=False
done
tables bench51c 4
finish
