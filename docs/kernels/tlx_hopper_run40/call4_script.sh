#!/usr/bin/env bash
# Run 40 call 4: the gap between Nsight Compute's forward time and the bench's (q128 fill 0.1:
# 79.9 us in call 3 against 0.088 ms): the TLX forward back to back, after a clean L2 and after a
# dirty one (benchmarks/writeback_probe.py); its timer's test; then a full table
source benchmarks/device_call.sh
gpu_tests writeback tests/benchmarks/test_writeback_probe.py
timeout 200 python -m benchmarks.writeback_probe --only "PMA,self" > "$OUT/writeback.md" 2>&1
log "writeback rc=$?"
cat "$OUT/writeback.md" >> "$OUT/call.log"
tables bench40b 1
finish
