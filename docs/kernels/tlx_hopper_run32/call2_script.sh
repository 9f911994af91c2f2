#!/usr/bin/env bash
# Run 32 call 2: where the PMA rows' forward+backward time goes (main's kernels): wall vs the sum of
# kernel times, every kernel of a call.
source benchmarks/device_call.sh
timeout $(( $(left) - 10 )) python -m benchmarks.jfa_profile --workloads fill0.9 fill0.5 fill0.1 \
  --methods tlx,varlen --passes fwd,fwd+bwd --top-kernels 10 > "$OUT/profile32.md" 2>&1
log "profile rc=$?"
cat "$OUT/profile32.md" | cut -c1-400
finish
