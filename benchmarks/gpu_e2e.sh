#!/usr/bin/env bash
# End-to-end GPU work in one device call (issues 3, 6 and 9), run from the repo root on the H200 host
# after the kernels and stack bundles are staged (../shared/gpu/README.md). Writes logs and tables
# under $OUT. Pick the stages with STAGES (space separated, in this order):
#   smoke   tests/gem/test_gpu_training.py: a few steps per attention backend, and no host sync in a step
#   suite   the whole test suite on the GPU (pytest-xdist: Triton compilation runs in parallel)
#   tput    benchmarks.train_throughput (TPUT_ARGS: its arguments); with TPUT_FILLS="0.1,0.5 0.9" one
#           process per GPU, each on its own fills (tables train_throughput_gpuN.*, merged afterwards)
#   variants benchmarks.train_throughput for tlx under trainer variants, one process per GPU at once:
#           TPUT_VARIANTS="name:override,override name2:..." (what the pipeline and compile buy)
#   nosync  the no-host-sync smoke tests alone (prints where each remaining sync comes from)
#   profile benchmarks.jfa_profile: host vs device ms per attention call (PROFILE_ARGS)
#   flex    benchmarks.jfa on the host's own triton (no TLX bundle): FlexAttention, varlen, triton
#   agree   train.py per attention backend and seed (AGREE_BACKENDS, AGREE_SEEDS, AGREE_STEPS): eval
#           NE across backends against the seed-to-seed spread
#   scale   train.py under torchrun on 1..N GPUs: same global batch (metrics must agree) and
#           same per-GPU batch (scaling efficiency); SCALE_RUNS="nproc:batch ..."; SCALE_ARGS: extra
#           Hydra overrides
# The suite spreads its xdist workers over every GPU (TEST_GPUS, tests/conftest.py), then runs the
# two-GPU tests without xdist.
set -u
bash .gpu/tools/unpack.sh >/dev/null && export PYTHONPATH=/tmp/gpu-site:$PWD || exit 1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache OMP_NUM_THREADS=2
# the H200 device host shares its GPUs with others: NVLink multicast must stay off there
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STAGES=${STAGES:-smoke tput scale}
t0=$(date +%s)
NGPU=${NGPU:-$(nvidia-smi -L | wc -l)}  # NGPU=1: leave the other GPUs to a concurrent job
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=index,name,clocks.sm,memory.used,utilization.gpu --format=csv,noheader
python -c "import torch, triton, torchrec, fbgemm_gpu; print('torch', torch.__version__, 'triton', triton.__version__, 'torchrec', torchrec.__version__)"

for stage in $STAGES; do
  case $stage in
  smoke)
    stamp smoke
    timeout ${SMOKE_TIMEOUT:-300} python -m pytest -q -x -p no:cacheprovider tests/gem/test_gpu_training.py \
      2>&1 | tee "$OUT/smoke.log" | tail -30 ;;
  suite)
    stamp suite
    TEST_GPUS=$(seq -s, 0 $((NGPU - 1))) timeout ${SUITE_TIMEOUT:-420} python -m pytest -q -p no:cacheprovider \
      -n ${SUITE_WORKERS:-12} ${SUITE_PATHS:-tests} 2>&1 | tee "$OUT/suite.log" | tail -40
    if [ $NGPU -ge 2 ]; then
      timeout 200 python -m pytest -q -p no:cacheprovider tests/kernels/test_jfa_numerics.py -k tensors_gpu \
        2>&1 | tee "$OUT/suite_two_gpus.log" | tail -5
    fi ;;
  tput)
    stamp tput
    if [ -z "${TPUT_FILLS:-}" ]; then
      timeout ${TPUT_TIMEOUT:-420} python -m benchmarks.train_throughput --out-dir "$OUT" ${TPUT_ARGS:-} \
        2>&1 | tee "$OUT/tput.log" | grep -v "^W1\|Warning" | tail -30
    else
      gpu=0
      for fills in $TPUT_FILLS; do
        CUDA_VISIBLE_DEVICES=$gpu timeout ${TPUT_TIMEOUT:-420} python -m benchmarks.train_throughput \
          --out-dir "$OUT" --name gpu$gpu --fills $fills ${TPUT_ARGS:-} > /tmp/tput_gpu$gpu.log 2>&1 &
        gpu=$((gpu + 1))
      done
      wait
      cat /tmp/tput_gpu*.log > "$OUT/tput.log"; grep -h "built in\|^| \|error" /tmp/tput_gpu*.log
    fi ;;
  variants)
    stamp variants
    gpu=0
    for variant in ${TPUT_VARIANTS:-base:}; do
      name=${variant%%:*}; overrides=${variant#*:}
      # one compile thread: Inductor then raises its real error instead of "SubprocException"
      CUDA_VISIBLE_DEVICES=$gpu TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${TPUT_TIMEOUT:-420} \
        python -m benchmarks.train_throughput --out-dir "$OUT" --name variant_$name --backends tlx ${TPUT_ARGS:-} ${overrides//,/ } > /tmp/variant_$name.log 2>&1 &
      gpu=$(( (gpu + 1) % NGPU ))
    done
    wait
    cat /tmp/variant_*.log > "$OUT/variants.log"; grep -h "built in\|^| \|rror" /tmp/variant_*.log ;;
  profile)
    stamp profile
    timeout ${PROFILE_TIMEOUT:-200} python -m benchmarks.jfa_profile ${PROFILE_ARGS:-} 2>&1 | tee "$OUT/profile.log" \
      | grep -v "Warning\|warn" | tail -40 ;;
  flex)
    stamp flex
    PYTHONPATH=$PWD timeout ${FLEX_TIMEOUT:-240} python -m benchmarks.jfa --out-dir "$OUT" --name jfa_h200_host_triton \
      ${FLEX_ARGS:---workloads pma_q128 --methods flex,varlen,triton} 2>&1 | tee "$OUT/flex.log" | tail -30 ;;
  nosync)
    stamp nosync
    timeout ${SMOKE_TIMEOUT:-300} python -m pytest -q -x -p no:cacheprovider tests/gem/test_gpu_training.py \
      -s -k no_host_sync 2>&1 | tee "$OUT/nosync.log" | grep "syncs in\|passed\|failed\|Error" | tail -20 ;;
  agree)
    stamp agree
    # same data, AGREE_STEPS steps per (attention backend, seed), NGPU runs at a time, one per GPU
    common="+experiment=gpu_base data.seq.fill=0.5 data.num_workers=6 data.eval_examples=16384
      trainer.max_steps=${AGREE_STEPS:-200} trainer.eval_every=0 trainer.log_every=50 trainer.progress=false
      trainer.tensorboard=false trainer.resume=none ${AGREE_ARGS:-}"
    runs=""
    for backend in ${AGREE_BACKENDS:-tlx varlen triton sdpa_padded}; do
      for seed in ${AGREE_SEEDS:-0}; do runs="$runs $backend:$seed"; done
    done
    set -- $runs
    while [ $# -gt 0 ]; do
      for gpu in $(seq 0 $((NGPU - 1))); do
        [ $# -gt 0 ] || break
        backend=${1%:*}; seed=${1#*:}; shift
        rm -rf /tmp/agree_${backend}_s$seed  # metrics.jsonl appends: a rerun must not read an older run
        CUDA_VISIBLE_DEVICES=$gpu timeout ${AGREE_TIMEOUT:-240} python train.py $common attention.backend=$backend \
          trainer.seed=$seed hydra.run.dir=/tmp/agree_${backend}_s$seed > /tmp/agree_${backend}_s$seed.log 2>&1 &
      done
      wait
    done
    for run in $runs; do
      backend=${run%:*}; seed=${run#*:}; dir=/tmp/agree_${backend}_s$seed
      cp $dir/metrics.jsonl "$OUT/agree_${backend}_s$seed.jsonl" 2>/dev/null || tail -20 $dir.log
      echo "$backend seed=$seed $(grep -h '"split": "summary"' $dir/metrics.jsonl 2>/dev/null)"
    done | tee "$OUT/agree.log" ;;
  scale)
    stamp scale
    # conf/experiment/gpu_base.yaml, the throughput benchmark's preset; per-GPU batch 1024
    common="+experiment=gpu_base data.num_workers=6 data.eval_examples=16384 trainer.progress=false
      trainer.tensorboard=false trainer.resume=none trainer.eval_every=0 trainer.log_every=20 ${SCALE_ARGS:-}"
    for run in ${SCALE_RUNS:-1:2048 2:2048 1:1024}; do  # nproc:global batch
      set -- ${run/:/ }
      dir=/tmp/scale_n$1_b$2; rm -rf $dir  # metrics.jsonl appends: a rerun must not read an older run
      timeout ${SCALE_TIMEOUT:-200} torchrun --standalone --nproc_per_node=$1 train.py $common \
        data.batch_size=$2 hydra.run.dir=$dir > "$dir.log" 2>&1
      rc=$?
      echo "nproc=$1 batch=$2 rc=$rc $(grep -h '"split": "summary"' $dir/metrics.jsonl 2>/dev/null)"
      cp $dir/metrics.jsonl "$OUT/scale_n$1_b$2.jsonl" 2>/dev/null; tail -300 $dir.log > "$OUT/${dir##*/}.log"
      [ $rc -ne 0 ] && grep -v "Warning\|warn" "$dir.log" | tail -25 ;
    done 2>&1 | tee -a "$OUT/scale.log" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
stamp done
# The device tool brings back at most 8 files: past that, pack everything into one archive.
if [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
  (cd "$OUT" && tar czf /tmp/gpu_e2e_results.tgz --exclude=gpu_e2e_results.tgz . && find . -type f -delete &&
   mv /tmp/gpu_e2e_results.tgz .) && echo "packed \$OUT into gpu_e2e_results.tgz"
fi
