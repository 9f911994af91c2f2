"""GPU training smoke tests (issue 6): the real trainer (NCCL, DMP with fused FBGEMM embeddings on
the GPU, bf16 autocast) runs a few steps with every attention backend. Skipped without CUDA; run on
the H200 through `device` (benchmarks/gpu_e2e.sh).

Every backend starts from the same weights (seeded dense init, hash-initialised tables) and sees the
same batches, so the first step's loss must agree across backends up to bf16 rounding: a backend
that computed a different function would show here before any throughput number is trusted.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from hydra import compose, initialize_config_dir  # noqa: E402

from gem.config import register_resolvers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Head dim 64 so that every JFA backend (tlx included) serves the call; sequences long enough to
# span several kernel tiles, with empty and full ones (data.seq.empty_share, fill).
SMALL = ["model=gem_tiny", "model.d_model=128", "model.sequence.num_heads=2", "model.summary.pma_heads=2",
         "model.summary.pma_queries=4", "model.summary.target_heads=2", "data.batch_size=128",
         "data.seq.max_len=200", "data.eval_examples=256", "trainer.progress=false",
         "trainer.tensorboard=false", "trainer.resume=none", "trainer.device=cuda"]
BACKENDS = ["reference", "triton", "tlx", "varlen", "sdpa_padded"]


def _tlx_skip_reason() -> str | None:
    if torch.cuda.get_device_capability() != (9, 0):
        return "tlx needs an sm_90 GPU"
    from kernels import tlx_hopper

    return tlx_hopper._tlx_import_error()


def make_trainer(run_dir: Path, backend: str, *overrides: str):
    from gem.trainer import Trainer

    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[*SMALL, f"attention.backend={backend}", *overrides])
    return Trainer(cfg, run_dir)


def _first_losses(trainer, steps: int) -> list[float]:
    batches = trainer.dataset.train_batches()
    losses = [trainer.train_step(next(batches).to(trainer.device, non_blocking=True)) for _ in range(steps)]
    return [loss.item() for loss in losses]


_FIRST_LOSS: dict[str, float] = {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_few_steps_train_with_every_backend(tmp_path: Path, backend: str) -> None:
    if backend == "tlx" and (reason := _tlx_skip_reason()):
        pytest.skip(reason)
    trainer = make_trainer(tmp_path, backend)
    try:
        assert trainer.autocast_dtype == torch.bfloat16
        dense_before = [p.detach().clone() for p in trainer.dense_params]
        tables_before = {k: v.local_shards()[0].tensor.clone() for k, v in trainer.model.state_dict().items()
                         if hasattr(v, "local_shards") and v.local_shards()}
        losses = _first_losses(trainer, 4)
        assert all(math.isfinite(x) for x in losses), losses
        assert any(not torch.equal(a, p) for a, p in zip(dense_before, trainer.dense_params))
        state = trainer.model.state_dict()
        changed = [k for k, before in tables_before.items() if not torch.equal(before, state[k].local_shards()[0].tensor)]
        assert any(k.startswith("sequence_arch") or "seq_" in k for k in changed), changed  # fused TBE backward ran
        _FIRST_LOSS[backend] = losses[0]
        if backend != "reference" and "reference" in _FIRST_LOSS:
            assert losses[0] == pytest.approx(_FIRST_LOSS["reference"], rel=2e-2)
        record = trainer.evaluate()
        assert all(math.isfinite(ne) for ne in record["ne"].values()), record
    finally:
        trainer.close()


# TorchRec's sparse input distribution reads the all-to-all'd lengths splits on the host
# (torchrec/distributed/dist_data.py): inherent to DMP, even on one GPU. With trainer.pipeline=
# sparse_dist the pipeline's input-dist forward (train_pipeline/runtime_forwards.py) also copies
# the splits from host lists to the device, on its side stream, for the next batch.
ALLOWED_SYNC_SITES = {"dist_data.py", "runtime_forwards.py"}


@pytest.mark.parametrize("pipeline", ["none", "sparse_dist"])
@pytest.mark.parametrize("backend", ["triton", "tlx"])
def test_no_host_sync_in_a_step_beyond_torchrec_input_dist(tmp_path: Path, backend: str, pipeline: str) -> None:
    """`cuda.set_sync_debug_mode('warn')` flags every synchronising call (.item(), a blocking copy to
    the host, nonzero, ...) with the Python file that made it: none may come from the model, the
    data pipeline, the trainer or the JFA front door (offsets validation included)."""
    if backend == "tlx" and (reason := _tlx_skip_reason()):
        pytest.skip(reason)
    trainer = make_trainer(tmp_path, backend, f"trainer.pipeline={pipeline}")
    try:
        batches = trainer.train_stream()
        for _ in range(5):  # compile, autotune and DDP bucket rebuilding first: those sync
            trainer.advance(batches)
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                losses = [trainer.advance(batches) for _ in range(3)]
            finally:
                torch.cuda.set_sync_debug_mode("default")
        # (not the "debug mode is a prototype" notice that switching the mode prints)
        sites = [f"{w.filename}:{w.lineno}" for w in caught if "called a synchronizing" in str(w.message)]
        print(f"{backend}/{pipeline}: {len(sites)} syncs in 3 steps at {sorted(set(sites))}")
        assert all("torchrec/distributed" in site and Path(site.split(":")[0]).name in ALLOWED_SYNC_SITES
                   for site in sites), sites
        assert all(math.isfinite(loss.item()) for loss in losses)
    finally:
        trainer.close()
