#!/usr/bin/env bash
# Run 32 call 3: the public API's forward+backward host time on PMA q128 (jfa_profile measured
# 0.99-1.46 ms host against ~0.4 ms for the bench's direct calls): which runtime calls and Python
# functions take it.
source benchmarks/device_call.sh
gpu_tests profile tests/benchmarks/test_jfa_benchmark.py -k "profile or runtime"
timeout $(( $(left) - 60 )) python -m benchmarks.jfa_profile --workloads pma_q128_B768_L1024_H4_fill0.9 \
  pma_q128_B768_L1024_H4_fill0.1 --methods tlx,varlen --passes fwd+bwd --top-kernels 6 \
  --runtime-calls --host-profile > "$OUT/profile32_host.md" 2>&1
log "profile rc=$?"
timeout $(( $(left) - 10 )) python -m benchmarks.tlx_launch_probe --fill 0.9 --calls 100 > "$OUT/launch_probe_q128_fill09.md" 2>&1
log "launch probe rc=$?"
grep -v Warning "$OUT/profile32_host.md" | cut -c1-220
tail -30 "$OUT/launch_probe_q128_fill09.md" | cut -c1-200
finish
