#!/usr/bin/env bash
# One device call: correctness shards in parallel, then (if nothing hung) the benchmark.
#   run from the repo root on the H200 host; writes under $OUT. Usage: tlx_device_run.sh [bench args]
set -u
bash .gpu/tools/unpack.sh >/dev/null && export PYTHONPATH=/tmp/gpu-site:$PWD || exit 1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader
python -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
N=${SHARDS:-8}
t0=$(date +%s)
NGPU=${NGPU:-$(nvidia-smi -L | wc -l)}  # NGPU=1: leave the other GPUs to a concurrent job
for i in $(seq 0 $((N-1))); do  # shards spread over the GPUs
  CUDA_VISIBLE_DEVICES=$((i % NGPU)) timeout ${SHARD_TIMEOUT:-150} python tests/kernels/test_tlx_hopper.py --shard $i/$N \
    --out "$OUT/results.jsonl" ${TEST_ARGS:-} > /tmp/shard$i.log 2>&1 &
done
hung=0
for job in $(jobs -p); do wait $job; rc=$?; [ $rc -eq 124 ] && hung=1; done
for i in $(seq 0 $((N-1))); do echo "== shard $i"; cat /tmp/shard$i.log; done > "$OUT/shards.log"
echo "tests done in $(( $(date +%s) - t0 ))s, hung=$hung"
python - "$OUT/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = [r for r in rows if not r.get("ok")]
print(f"{len(rows)} checks, {len(bad)} failed")
for r in bad: print("FAIL", r["pass"], r["case"], r.get("errors"))
errs = [r.get("out_rel", 0) for r in rows if "out_rel" in r]
print("max out rel err", max(errs) if errs else None)
PY
if [ "${SCHED_TESTS:-1}" = 1 ]; then timeout 90 python -m pytest -q -x tests/kernels/test_tlx_schedule.py 2>&1 | tail -2; fi
if [ $hung -eq 0 ] && [ "${BENCH:-1}" = 1 ]; then
  timeout ${BENCH_TIMEOUT:-200} python -m benchmarks.tlx_hopper_bench --out "$OUT/bench.jsonl" ${BENCH_ARGS:-} "$@" 2>&1 | tee "$OUT/bench.log" | tail -16
fi
if [ $hung -eq 0 ] && [ "${NCU:-0}" = 1 ]; then
  m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
  m=$m,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
  timeout ${NCU_TIMEOUT:-60} ncu --clock-control none --kernel-name regex:"jfa_(fwd|bwd_dkdv|bwd_dq)_kernel" \
    --launch-count 3 --metrics $m python -m benchmarks.tlx_ncu_probe > "$OUT/ncu.log" 2>&1
  echo "ncu rc=$?"; grep -E "jfa_|gpu__time|dram__|sm__|ERR|rror" "$OUT/ncu.log" | head -40
fi
echo "total $(( $(date +%s) - t0 ))s"
