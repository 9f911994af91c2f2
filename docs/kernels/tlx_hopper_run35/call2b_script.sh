#!/usr/bin/env bash
# Run 35 call 2b (the same machine, warm, right after call 2): a second A/B process on the PMA rows
CALL_S=300 bash -c 'source benchmarks/device_call.sh; ab_run own_bwd_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA" --ab-bwd own_fences=True; finish'
