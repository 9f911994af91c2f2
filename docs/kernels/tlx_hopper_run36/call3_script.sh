#!/usr/bin/env bash
# Run 36 call 3: FwdConfig.pdl / BwdConfig.pdl (off by default): the main kernels launched with
# programmatic dependent launch at their schedule build's start. Its GPU tests (the forward's
# bit-identity flip over flip_cases, the backward switch against the reference); if they pass,
# A/Bs of the forward (--ab pdl=True: forward, and forward+backward with the forward's PDL) and of
# the backward (--ab-bwd pdl=True) on every row.
source benchmarks/device_call.sh
if gpu_tests pdl tests/kernels/test_tlx_hopper.py -k "pdl"; then
  ab_run pdl tlx_fwd_ab_ratio --bwd --ab pdl=True --ab-bwd pdl=True
  log "fb (fwd pdl) $(ratios "$OUT/ab_pdl.jsonl" tlx_fwdbwd_ab_ratio) fb (bwd pdl) $(ratios "$OUT/ab_pdl.jsonl" tlx_fwdbwd_abbwd_ratio)"
fi
finish
