#!/usr/bin/env bash
# Run 40 call 5: call 4's write-back probe again (its clean-L2 flush failed on a torch.sum signature)
source benchmarks/device_call.sh
gpu_tests writeback tests/benchmarks/test_writeback_probe.py
timeout 200 python -m benchmarks.writeback_probe --only "PMA,self" > "$OUT/writeback.md" 2>&1
log "writeback rc=$?"
cat "$OUT/writeback.md" >> "$OUT/call.log"
finish
