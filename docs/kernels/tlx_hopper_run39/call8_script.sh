#!/usr/bin/env bash
# Run 39 call 7: FwdConfig.fast_epilogue, two more forward A/Bs on the PMA and self rows (call 6's
# q128 fill-0.1 samples ran at twice their usual time); copies kept in /tmp/ab39 for call 8's gate
source benchmarks/device_call.sh
mkdir -p /tmp/ab39
for i in 2 3; do
  ab_run fast$i tlx_fwd_ab_ratio --only "PMA,self" --ab fast_epilogue=True
  cp "$OUT/ab_fast$i.jsonl" /tmp/ab39/
done
finish
