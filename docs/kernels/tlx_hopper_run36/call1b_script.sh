#!/usr/bin/env bash
# Run 36 call 1b (warm, right after call 1): two more A/B processes of pma_dv_tma on the PMA q128 rows
CALL_S=150 bash -c 'source benchmarks/device_call.sh; ab_run dv_tma_3 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_tma=True; ab_run dv_tma_4 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_tma=True; finish'
