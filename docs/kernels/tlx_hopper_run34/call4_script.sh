#!/usr/bin/env bash
# Run 34 call 4 (diagnostic, timing only): where call 2's dkdv_cast_dq lost its time. The kernels of
# 70eaba9 with dkdv_cast_dq as a mode (devrun/diag/): 1 count + convert (call 2's), 2 count only
# (dQ not converted: wrong gradients), 3 count only with a relaxed atomic and the read-only bulk
# wait (no completion wait, no proxy fence). Forward+backward A/B against the default each.
source benchmarks/device_call.sh
cp devrun/diag/tlx_hopper.py devrun/diag/tlx_hopper_bwd.py kernels/ && md5sum kernels/*.py > "$OUT/md5_diag.txt"
for m in 2 3 1; do
  ab_run mode$m tlx_fwdbwd_abbwd_ratio --bwd --only "self B768 fill0.5,dense" --ab-bwd dkdv_cast_dq=$m
done
finish
