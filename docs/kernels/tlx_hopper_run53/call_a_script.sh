#!/usr/bin/env bash
# Prepared in session 54 as the next device call (an H200: H100 numbers do not carry over). The PMA
# q128 fill-0.1 forward is the goal left short: 0.0825-0.0839 ms in run 52's host-clean samples
# (0.917-0.933 of 0.077 ms), 0.0814-0.0817 in run 51's. Whether its consumers' math still costs it
# anything or only the way its bytes move does was never measured on an H200:
# 1. Tests: the mended `test_shift_tail_reads_no_row_of_the_next_sequence` with the shift tail's
#    and the split tile's others (run 52's suite failed that one: tail_branch left on).
# 2. `tlx_fwd_bound` (session 44, never GPU-run): the forward without its math (`nomath`: every
#    consumer passes its K/V blocks and stores zeros; loads, ring, stores and schedule real) and
#    without its stores too (`nostore`), A/B'd against the real one in the bench's regime on the
#    three broadcast rows whose forward the consumers could bound (q128 fill 0.1 / 0.9, q192 fill
#    0.1); nomath in two processes. Read: nomath / real near 1 -> the data movement is the limit
#    (only a different way of moving the bytes helps); well under 1 -> the consumers' chain is.
# 3. The HBM probe on the row (plain streaming of its bytes on this lease: run 26's 0.077 ms is
#    the goal's size), and its slices-over-rows ratio (run 47 measured it on an H100 only).
# 4. Status tables with what time is left; each records per timing whether the host bound it
#    (`timed_host_margin_us` below zero, run 52).
# Run: CALL_S=560 bash docs/kernels/tlx_hopper_run53/call_a_script.sh,
#      carry [".gpu/tools", ".gpu/kernels"], timeout_s 600
source benchmarks/device_call.sh
ROWS="PMA q128 fill0.1,PMA q128 fill0.9,PMA q192 fill0.1"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> "$OUT/call.log" 2>&1
DEADLINE_SAVE=$DEADLINE; DEADLINE=$(( $(date +%s) + 150 ))  # the tests get 90 s
gpu_tests shift tests/kernels/test_tlx_hopper.py -k "shift_tail or split_tiles"
DEADLINE=$DEADLINE_SAVE
bound() {  # NAME VARIANT: tlx_fwd_bound on ROWS, 4 ABBA rounds, its ratios logged
  timeout 120 python -m benchmarks.tlx_fwd_bound --only "$ROWS" --variant "$2" --rounds 4 \
    --out "$OUT/bound_$1.jsonl" > "$OUT/bound_$1.log" 2>&1
  log "bound $1 rc=$? $(ratios "$OUT/bound_$1.jsonl" bound_ratio)"
}
bound nomath_1 nomath
bound nostore nostore
bound nomath_2 nomath
timeout 90 python -m benchmarks.hbm_probe --only "PMA q128 fill0.1" --out "$OUT/hbm_probe.md" \
  > "$OUT/hbm_probe.log" 2>&1
log "hbm probe rc=$? $(grep -m1 'q128 fill0.1' "$OUT/hbm_probe.md" | tr -s ' ')"
# one head's 256 B slices' time over whole 1 KB rows' at equal parallelism, O written (run 47's
# H100: 0.983; never on an H200): well above 1 would bring head pairs / row-wise loads back
log "slices over rows: $(python -m benchmarks.hbm_probe --rows-over-slices "$OUT/hbm_probe.md" | tr '\t' ' ')"
tables bench53 6
finish
