#!/usr/bin/env bash
# Session 42's first call (prepared in session 41): two full tables with run 43's final code
# first; then the shared-role pass's two load-order switches (CPU only so far): their GPU tests
# (`-k load_order`: against the reference and bit-identical with the default, 18 cases) and, if
# they pass, A/B processes of forward+backward on the PMA q192 rows: kv_first x2, prefetch_do x2,
# both x1. Then devrun/next_call2.sh (`tests/kernels` in full: the first GPU run of the launcher
# refactor 875b22b and the new tests) in the same message.
# Run: CALL_S=570 bash devrun/next_call.sh, carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
tables bench44 2
if gpu_tests load_order tests/kernels/test_tlx_hopper.py -k "load_order"; then
  for i in 1 2; do
    ab_run kv_first_$i tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma_shared_kv_first=True"
    ab_run prefetch_do_$i tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" --ab-bwd "pma_shared_prefetch_do=True"
  done
  ab_run both_1 tlx_fwdbwd_abbwd_ratio --bwd --only "PMA q192" \
    --ab-bwd "pma_shared_kv_first=True,pma_shared_prefetch_do=True"
fi
finish
