#!/usr/bin/env bash
# Run 40 call 3: why two CTAs per SM with one consumer group lost (call 2): Nsight Compute of that
# variant and of the default on PMA q128 fill 0.1 (L2 and DRAM throughput, stalls by role); then
# the PMA forward+backward rows' device time by kernel (q192 fill 0.5 / 0.9, q128 fill 0.9)
source benchmarks/device_call.sh
ncu_by_role g1_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1" \
  --fwd-config "num_groups=1,num_buf_kv=2,consumer_regs=216,ctas_per_sm=2,block_n=64,late_p_cast=True"
ncu_by_role g2_q128_fill01 jfa_fwd_kernel "PMA q128 fill0.1"
timeout 150 python -m benchmarks.jfa_profile --workloads pma_q192_B1024_L1000_H3_fill0.5 \
  pma_q192_B1024_L1000_H3_fill0.9 pma_q128_B768_L1024_H4_fill0.9 --methods tlx --passes fwd,fwd+bwd \
  --top-kernels 8 > "$OUT/profile_fb.md" 2>&1
log "profile rc=$?"
finish
