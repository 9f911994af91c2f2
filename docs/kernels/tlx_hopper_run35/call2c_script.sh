#!/usr/bin/env bash
# Run 35 call 2c (warm, right after 2b): a third A/B process on the rows of the dK/dV pass
CALL_S=300 bash -c 'source benchmarks/device_call.sh; ab_run own_bwd_3 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192,self B768 fill0.5" --ab-bwd own_fences=True; finish'
