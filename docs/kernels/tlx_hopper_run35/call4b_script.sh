#!/usr/bin/env bash
# Run 35 call 4b (warm, right after call 4): two more A/B processes on the PMA q128 rows
CALL_S=200 bash -c 'source benchmarks/device_call.sh; ab_run dv_in_dk_3 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_in_dk_stage=True; ab_run dv_in_dk_4 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q128" --ab-bwd pma_dv_in_dk_stage=True; finish'
