CALL_S=200 bash -c 'source benchmarks/device_call.sh; ab_run pma3_k2v3_2 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma_buf_k=2,pma_buf_v=3"; tables bench43d 2; finish'
