#!/usr/bin/env bash
# Prepared in session 44 (no machine lent) as the first of the next three device calls: (1) the host
# time per call after session 44's host-path cuts (tlx_launch_probe; run 41's host: forward 87.7
# us, backward 130.7 us); (2) the forward's per-CTA timeline (benchmarks/tlx_timeline.py): its GPU
# tests (bit-identity, one record per tile), then PMA q128 fill 0.1 after a dirty and a clean L2,
# q192 fill 0.1 and q128 fill 0.9 (the .pt files are plotted locally: `--load F --plot F.png`);
# (3) the forward without its math (benchmarks/tlx_fwd_bound.py: nomath keeps the K/V loads, the
# ring's protocol and the O/LSE stores; nostore drops the stores too), A/B against the real one in
# the bench's regime; (4) session 43's HBM access-pattern probe (one head's 256 B slices against
# whole rows).
# Run: CALL_S=460 bash docs/kernels/tlx_hopper_run45/next_call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 500; then next_call_script.sh (head pairs).
source benchmarks/device_call.sh
timeout 90 python -m benchmarks.tlx_launch_probe --calls 300 --cprofile > "$OUT/launch_probe_q128.md" 2>&1
log "launch probe rc=$? $(grep -E '^tlx_launch:' "$OUT/launch_probe_q128.md")"
if gpu_tests timeline tests/kernels/test_tlx_hopper.py -k timeline; then
  for spec in "PMA q128 fill0.1:dirty" "PMA q128 fill0.1:clean" "PMA q192 fill0.1:dirty" "PMA q128 fill0.9:dirty"; do
    shape=${spec%:*}; regime=${spec#*:}; tag=$(echo "$shape $regime" | tr ' .' '__')
    timeout 120 python -m benchmarks.tlx_timeline --shape "$shape" --regime "$regime" --samples 5 \
      --save "$OUT/timeline_$tag.pt" --out "$OUT/timeline_$tag.md" > "$OUT/timeline_$tag.log" 2>&1
    log "timeline $tag rc=$? $(head -1 "$OUT/timeline_$tag.md")"
  done
fi
timeout 150 python -m benchmarks.tlx_fwd_bound --only "PMA q128 fill0.1,PMA q192 fill0.1,PMA q128 fill0.9" \
  --variant nomath --out "$OUT/bound_nomath.jsonl" > "$OUT/bound_nomath.log" 2>&1
log "bound nomath rc=$? $(ratios "$OUT/bound_nomath.jsonl" bound_ratio)"
timeout 90 python -m benchmarks.tlx_fwd_bound --only "PMA q128 fill0.1" --variant nostore \
  --out "$OUT/bound_nostore.jsonl" > "$OUT/bound_nostore.log" 2>&1
log "bound nostore rc=$? $(ratios "$OUT/bound_nostore.jsonl" bound_ratio)"
timeout 120 python -m benchmarks.hbm_probe --only "PMA q128" --out "$OUT/hbm_probe.md" > "$OUT/hbm_probe.log" 2>&1
log "hbm_probe rc=$?"; cat "$OUT/hbm_probe.md" >> "$OUT/call.log"
finish
