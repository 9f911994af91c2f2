#!/usr/bin/env bash
# Run 40 call 7: 32-key blocks for the PMA forwards (half the masked tail, twice the blocks), the
# same K/V bytes in flight: q128 eight stages (against four of 64 keys), q192 six (against three)
source benchmarks/device_call.sh
ab_run bn32_q128 tlx_fwd_ab_ratio --only "PMA q128" --ab "block_n=32,num_buf_kv=8"
ab_run bn32_q192 tlx_fwd_ab_ratio --only "PMA q192" --ab "block_n=32,num_buf_kv=6"
python -c "
import json
for f in ('$OUT/ab_bn32_q128.jsonl', '$OUT/ab_bn32_q192.jsonl'):
    for l in open(f):
        r = json.loads(l); print(r['name'], round(r['tlx_fwd_ab_ratio'], 3), r['ab_fwd_identical'], '%.2e' % r['ab_vs_varlen_rel'], '%.2e' % r['tlx_vs_varlen_rel'])
" >> "$OUT/call.log" 2>&1
finish
