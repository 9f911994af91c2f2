#!/usr/bin/env bash
# Run 41 call 6: more A/B samples of FwdConfig.split_tiles on PMA q128 fill 0.1 (call 5: 0.975 and
# a host-stalled 0.931; its Nsight Compute time 83.5 us against call 4's 80.3 us for the default).
# Run: CALL_S=200 bash devrun/call6.sh, carry [".gpu/tools", ".gpu/kernels"]
source benchmarks/device_call.sh
for i in 1 2 3 4; do
  ab_run split_q128_$i tlx_fwd_ab_ratio --only "PMA q128 fill0.1" --ab "split_tiles=True,late_p_cast=False"
done
python - "$OUT" <<'PY' | tee -a "$OUT/call.log"
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/ab_*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        print(f.rsplit("/", 1)[1], round(r["tlx_fwd_ab_base_ms"], 4), round(r["tlx_fwd_ab_ms"], 4), round(r["tlx_fwd_ab_ratio"], 3))
PY
finish
