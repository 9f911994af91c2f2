#!/usr/bin/env bash
# Issue 8 long runs on GPUs: GEM with PMA on the small planted world (docs/quality_small.md), batch
# 1024, lr 2e-3, cosine decay; the runs at once. Run from the repo root on the H200 host after the
# bundles are staged (../shared/gpu/README.md); eval records under $OUT.
#   RUNS="gpu:seed ..."   which seeds run, on which GPUs (default "0:0"); gem_tiny is launch-bound, so
#                         two runs may share a GPU at no cost (e.g. "0:0 0:1 1:2")
#   STEPS                 training steps (give it to repeat a configuration, e.g. for more seeds);
#                         unset: a 600-step probe, then as many steps as fit in BUDGET seconds, rounded to 1000
#   QARGS                 extra Hydra overrides (e.g. "data.batch_size=2048 optim.dense.lr=2.8e-3 optim.sparse.lr=0.4")
#   RUN_TIMEOUT           seconds before a run is stopped (SIGTERM: it writes a checkpoint first)
#   RESUME=1              continue the runs of an earlier call on this machine from their newest
#                         checkpoint (every STEPS/10 steps, and at SIGTERM) instead of starting afresh
set -u
bash .gpu/tools/unpack.sh >/dev/null && export PYTHONPATH=/tmp/gpu-site:$PWD || exit 1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache OMP_NUM_THREADS=2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUDGET=${BUDGET:-420}
common="+experiment=quality_synthetic_small +experiment/arm=gem_pma data.batch_size=1024 optim.dense.lr=2e-3
  optim.dense.schedule=cosine data.num_workers=4 trainer.progress=false ${QARGS:-}"
set -- ${RUNS:-0:0}
if [ -z "${STEPS:-}" ]; then
  rm -rf /tmp/qprobe
  CUDA_VISIBLE_DEVICES=${1%%:*} timeout 150 python train.py $common trainer.resume=none trainer.max_steps=600 trainer.eval_every=0 \
    trainer.log_every=50 hydra.run.dir=/tmp/qprobe > "$OUT/probe.log" 2>&1
  STEPS=$(python - "$BUDGET" <<'PY'
import json, statistics, sys
from omegaconf import OmegaConf
rows = [json.loads(line) for line in open("/tmp/qprobe/metrics.jsonl")]
rate = statistics.median(r["examples_per_sec"] for r in rows if r.get("split") == "train" and r["step"] >= 200)
steps_per_s = rate / OmegaConf.load("/tmp/qprobe/.hydra/config.yaml").data.batch_size
print(f"probe: {rate:.0f} examples/s", file=sys.stderr)
print(max(1000, int(steps_per_s * float(sys.argv[1]) / 1000) * 1000))
PY
) || { tail -30 "$OUT/probe.log"; exit 1; }
  cp /tmp/qprobe/metrics.jsonl "$OUT/probe.jsonl"
fi
echo "steps=$STEPS runs=$*"
for run in "$@"; do
  gpu=${run%%:*}; seed=${run#*:}; dir=/tmp/quality_s$seed
  [ "${RESUME:-0}" = 1 ] || rm -rf $dir $dir.log  # metrics.jsonl appends; a resumed run keeps its records
  CUDA_VISIBLE_DEVICES=$gpu timeout ${RUN_TIMEOUT:-$(( BUDGET + 100 ))} python train.py $common trainer.seed=$seed \
    trainer.resume=$([ "${RESUME:-0}" = 1 ] && echo auto || echo none) trainer.ckpt_every=$(( STEPS / 10 )) \
    trainer.max_steps=$STEPS trainer.eval_every=$(( STEPS / 8 )) trainer.log_every=1000 \
    hydra.run.dir=$dir >> $dir.log 2>&1 &
done
wait
for run in "$@"; do
  seed=${run#*:}; dir=/tmp/quality_s$seed
  cp $dir/metrics.jsonl "$OUT/quality_s$seed.jsonl" 2>/dev/null; tail -40 $dir.log > "$OUT/quality_s$seed.log"
  echo "seed $seed: $(grep -h '"split": "eval"' $dir/metrics.jsonl | tail -1)"
done
