"""The training loop: build order, `train_step`, periodic eval and logging."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from omegaconf import DictConfig
from torchrec.distributed.train_pipeline import TrainPipelineSparseDist

from data import Batch, build_dataset
from gem.checkpoint import Checkpointer, CheckpointError
from gem.config import typed
from gem.distributed import agree_max, gather_rows, init_distributed, mean_over_ranks
from gem.guards import NonFiniteError, NonFiniteWatch, PreemptionFlag
from gem.metrics import expected_gap_pct, log_loss, task_metrics
from gem.models import build_model
from gem.models.heads import task_weight_vector, weighted_bce
from gem.optim import OptimConfig, build_dense_optimizer, dense_parameters, set_sparse_lr, sparse_lr
from gem.run_log import RunLog
from gem.sharding import ShardingConfig, compile_dense_children, init_embeddings, shard_model


@dataclass
class TrainerConfig:
    max_steps: int = 300
    eval_every: int = 100  # eval on the fixed eval split every this many steps (0: only at the end)
    log_every: int = 10
    seed: int = 0  # model init (dense and embedding tables); the data has its own data.seed
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # auto (bf16 autocast on cuda, fp32 on cpu) | fp32 | bf16
    progress: bool = True
    tensorboard: bool = True
    ckpt_every: int = 0  # checkpoint every this many steps (0: only on preemption)
    keep_ckpts: int = 2  # complete checkpoints kept in <run_dir>/checkpoints
    resume: str = "auto"  # auto (newest intact checkpoint in the run dir, if any) | none | <checkpoint dir>
    nonfinite: str = "stop"  # non-finite loss or dense gradient: stop (with the step) | skip (the step)
    max_skipped_steps: int = 10  # under nonfinite=skip, stop once this many steps were skipped
    # none: copy, distribute and train each batch in turn | sparse_dist: TorchRec's
    # TrainPipelineSparseDist, which copies batch i+2 and runs the embeddings' input distribution
    # (with its host sync on the lengths) for batch i+1 on side streams while batch i trains
    pipeline: str = "none"
    # torch.compile every child of the model except the sharded tables (TorchRec's dist stays eager);
    # shapes change every batch (jagged totals), so a child recompiles once and is dynamic after
    compile: bool = False
    # Inductor compile workers. 1 compiles in the trainer's process: under torchrun with the fbtriton
    # bundle, rank 1's worker subprocesses fail with "Could not find an active GPU backend" (H200, 2
    # GPUs). None leaves Inductor's own setting (TORCHINDUCTOR_COMPILE_THREADS) alone.
    compile_threads: int | None = 1

    def __post_init__(self) -> None:
        for name in ("max_steps", "log_every", "keep_ckpts"):
            if getattr(self, name) <= 0:
                raise ValueError(f"trainer.{name} must be > 0, got {getattr(self, name)}")
        if self.compile_threads is not None and self.compile_threads <= 0:
            raise ValueError(f"trainer.compile_threads must be > 0 or null, got {self.compile_threads}")
        for name in ("eval_every", "ckpt_every", "max_skipped_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"trainer.{name} must be >= 0, got {getattr(self, name)}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"trainer.precision must be auto, fp32 or bf16, got {self.precision!r}")
        if self.nonfinite not in ("stop", "skip"):
            raise ValueError(f"trainer.nonfinite must be stop or skip, got {self.nonfinite!r}")
        if self.pipeline not in ("none", "sparse_dist"):
            raise ValueError(f"trainer.pipeline must be none or sparse_dist, got {self.pipeline!r}")
        if self.pipeline == "sparse_dist" and self.nonfinite == "skip":
            raise ValueError("trainer.pipeline=sparse_dist needs trainer.nonfinite=stop: skipping decides before "
                             "backward, which the pipeline runs by itself")


class Trainer:
    """Builds everything from the root config in a fixed order (process group -> data -> model on
    meta -> DMP sharding -> optimizers -> logging) and runs the loop.
    """

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        # Validate every section before any process group, table or data stream exists.
        self.cfg = typed(TrainerConfig, cfg.trainer, "trainer")
        optim_cfg = typed(OptimConfig, cfg.optim, "optim")
        sharding_cfg = typed(ShardingConfig, cfg.sharding, "sharding")

        self.env = init_distributed(self.cfg.device)
        self.device = self.env.device
        use_bf16 = self.cfg.precision == "bf16" or (self.cfg.precision == "auto" and self.device.type == "cuda")
        self.autocast_dtype = torch.bfloat16 if use_bf16 else None

        self.dataset = build_dataset(cfg.data, self.env.rank, self.env.world_size)
        schema = self.dataset.schema
        self.tasks = schema.tasks
        self.global_batch_size = self.dataset.cfg.batch_size

        torch.manual_seed(self.cfg.seed)
        model, model_cfg = build_model(cfg.model, cfg.attention, schema)
        self.loss_weights = task_weight_vector(self.tasks, model_cfg.task_weights).to(self.device)
        local_batch = self.global_batch_size // self.env.world_size
        self.model = shard_model(model, sharding_cfg, optim_cfg.sparse, self.env, local_batch)
        init_embeddings(self.model, self.cfg.seed)
        if self.cfg.compile:
            compile_dense_children(self.model, self.cfg.compile_threads)

        self.dense_params = list(dense_parameters(self.model).values())
        self.grad_clip = optim_cfg.grad_clip
        self.optimizer, self.scheduler = build_dense_optimizer(self.model, optim_cfg.dense, self.cfg.max_steps)
        self.sparse_optim = optim_cfg.sparse
        self.step = 0
        self.skipped_steps = 0
        # Pre-clip dense gradient norm summed over the steps since the last log point (on device:
        # read only when logging, so it adds no sync); a rising norm is the first sign of divergence.
        self.grad_norm_sum = torch.zeros((), device=self.device)
        self.run_dir = run_dir
        self.log = RunLog(run_dir, self.env.is_main, self.cfg.max_steps, self.global_batch_size,
                          tensorboard=self.cfg.tensorboard, progress=self.cfg.progress)
        # Which table went where: the planner decides per table, so a run records its plan.
        self.log.write({"step": 0, "split": "sharding", "world_size": self.env.world_size, "tables": {
            name: {"sharding_type": p.sharding_type, "compute_kernel": p.compute_kernel, "ranks": p.ranks}
            for module_plan in self.model.plan.plan.values() for name, p in module_plan.items()}})
        if hasattr(self.dataset, "bad_row_counts"):  # on-disk data: malformed rows are reported, never hidden
            self.log.write({"step": 0, "split": "data", "bad_rows": self.dataset.bad_row_counts()})
        self.checkpointer = Checkpointer(run_dir / "checkpoints", self.cfg.keep_ckpts)
        self.nonfinite_watch = NonFiniteWatch(self.device)
        self.preemption = PreemptionFlag()
        self.pipeline: TrainPipelineSparseDist | None = None
        self._pipeline_loss: torch.Tensor | None = None
        self._maybe_resume()

    def _position(self) -> dict[str, int]:
        """Where the data stream stands: the stream is indexed by step, so the step is enough."""
        return {"step": self.step, "global_batch_size": self.global_batch_size,
                "examples_seen": self.step * self.global_batch_size}

    def _maybe_resume(self) -> None:
        if self.cfg.resume == "none":
            return
        if self.cfg.resume == "auto":
            path, skipped = self.checkpointer.find_latest()
            for reason in skipped:
                self.log.write({"step": 0, "split": "checkpoint_skipped", "reason": reason})
                if self.env.is_main:
                    print(f"WARNING: skipping checkpoint: {reason}", flush=True)
            if path is None:
                return
        else:
            path = Path(self.cfg.resume)
            if not path.is_dir():
                raise CheckpointError(f"trainer.resume={self.cfg.resume!r} is not a checkpoint directory")
        manifest = self.checkpointer.load(path, self.model, self.optimizer, self.scheduler)
        position = manifest["position"]
        if position["global_batch_size"] != self.global_batch_size:
            raise CheckpointError(
                f"{path} was written with data.batch_size={position['global_batch_size']}, this run has "
                f"{self.global_batch_size}: the data stream position would not line up")
        self.step = position["step"]
        self.log.write({"step": self.step, "split": "resume", "checkpoint": str(path),
                        "world_size": self.env.world_size, "checkpoint_world_size": manifest["world_size"]})

    def save_checkpoint(self) -> Path:
        path = self.checkpointer.save(self.step, self.model, self.optimizer, self.scheduler, self._position())
        self.log.write({"step": self.step, "split": "checkpoint", "path": str(path)})
        return path

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def train_step(self, batch: Batch) -> torch.Tensor | None:
        """One optimisation step on this rank's batch; returns the (device) loss, or None when the
        step was skipped under `trainer.nonfinite=skip`. No host sync under `nonfinite=stop`."""
        with self.autocast():
            logits = self.model(batch)
        loss = weighted_bce(logits, batch.labels, self.loss_weights)
        skip = self.cfg.nonfinite == "skip"
        # Decide before backward, on every rank alike: backward runs collectives and applies the
        # fused sparse optimizer, so a skipped step must not start it anywhere.
        if skip and agree_max(self.env, [int(not torch.isfinite(loss).item())])[0]:
            return self._skip_step()
        loss.backward()  # also applies the fused row-wise Adagrad to the embedding rows
        grad_norm = self._clip_dense_grads()
        if skip and not torch.isfinite(grad_norm).item():
            return self._skip_step()  # the sparse rows were updated in backward: only dense is spared
        self._dense_step(loss, grad_norm)
        return loss.detach()

    def train_stream(self) -> Iterator[Batch]:
        """Host batches from the current step on, for `advance`. Under `trainer.pipeline=sparse_dist`
        also a new pipeline: after an eval (which detaches the pipeline from the model) one starts
        afresh, dropping the batches the old one held in flight (prefetched, never trained on);
        re-attaching a pipeline with batches in flight desynchronised the embeddings' all-to-alls."""
        if self.cfg.pipeline == "sparse_dist":
            if self.pipeline is not None:
                self.pipeline.detach()
            self.pipeline = TrainPipelineSparseDist(self.model, _PipelineOptimizer(self), self.device,
                                                    execute_all_batches=False, custom_model_fwd=self._pipeline_forward)
        return _TimedStream(self.dataset.train_batches(start_step=self.step))

    def advance(self, batches: Iterator[Batch]) -> torch.Tensor | None:
        """One training step on the next of `batches` (host batches) as `trainer.pipeline` says;
        returns what `train_step` returns."""
        if self.sparse_optim.schedule != "constant":  # before the step's backward, which applies it
            set_sparse_lr(self.model, sparse_lr(self.sparse_optim, self.step, self.cfg.max_steps))
        if self.pipeline is None:
            return self.train_step(next(batches).to(self.device, non_blocking=True))
        self.pipeline.progress(batches)
        return self._pipeline_loss.detach()

    def _pipeline_forward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        with self.autocast():
            logits = self.model(batch)
        self._pipeline_loss = weighted_bce(logits, batch.labels, self.loss_weights)
        return self._pipeline_loss, logits

    def _clip_dense_grads(self) -> torch.Tensor:
        """Clip to optim.grad_clip; the pre-clip norm. Dense grads are already all-reduced, so every
        rank sees the same norm."""
        max_norm = self.grad_clip if self.grad_clip > 0 else float("inf")
        return torch.nn.utils.clip_grad_norm_(self.dense_params, max_norm)

    def _dense_step(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        self.grad_norm_sum += grad_norm.detach().float()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        if self.cfg.nonfinite == "stop":
            self.nonfinite_watch.record(self.step + 1, ~(torch.isfinite(loss) & torch.isfinite(grad_norm)))

    def _skip_step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.skipped_steps += 1
        self.log.write({"step": self.step + 1, "split": "skipped", "reason": "non-finite loss or gradient",
                        "skipped_steps": self.skipped_steps})
        if self.skipped_steps > self.cfg.max_skipped_steps:
            raise NonFiniteError(f"{self.skipped_steps} steps skipped for non-finite loss or gradient by step "
                                 f"{self.step + 1} (trainer.max_skipped_steps={self.cfg.max_skipped_steps})")
        return None

    def _should_stop(self) -> bool:
        """Between steps, all ranks agree on preemption and on any non-finite step seen so far."""
        preempt, bad_step = agree_max(self.env, [int(self.preemption.requested), self.nonfinite_watch.first_bad_step()])
        if bad_step:
            raise NonFiniteError(
                f"non-finite loss or gradient at step {bad_step} (trainer.nonfinite=stop); "
                f"resume from the last checkpoint in {self.checkpointer.root} or set trainer.nonfinite=skip")
        return bool(preempt)

    def train(self) -> dict[str, Any]:
        start = time.perf_counter()
        batches = self.train_stream()
        rates: list[float] = []
        loss_sum, num_steps = torch.zeros((), device=self.device), 0
        # Throughput counts only training time: the clock and its step count restart after eval/save.
        timed_steps, interval_start = 0, time.perf_counter()
        last_eval: dict[str, Any] = {}
        self.model.train()
        preempted = False
        while self.step < self.cfg.max_steps:
            loss = self.advance(batches)
            self.step += 1
            timed_steps += 1
            if loss is not None:
                loss_sum += loss
                num_steps += 1
            self.log.advance(self.global_batch_size)
            done = self.step == self.cfg.max_steps
            if (self.step % self.cfg.log_every == 0 or done) and num_steps:
                loss = mean_over_ranks(loss_sum / num_steps).item()
                elapsed = time.perf_counter() - interval_start
                rate = timed_steps * self.global_batch_size / elapsed
                data_wait_pct = 100.0 * batches.wait_s / elapsed
                rates.append(rate)
                lr = self.scheduler.get_last_lr()[0]
                grad_norm = (self.grad_norm_sum / num_steps).item()  # the same on every rank (DDP)
                self.log.write({"step": self.step, "split": "train", "loss": loss, "examples_per_sec": rate, "lr": lr,
                                "sparse_lr": sparse_lr(self.sparse_optim, self.step, self.cfg.max_steps),
                                "grad_norm": grad_norm, "data_wait_pct": data_wait_pct})
                self.log.advance(0, loss=loss)
                loss_sum.zero_()
                self.grad_norm_sum.zero_()
                num_steps = timed_steps = 0
                batches.wait_s, interval_start = 0.0, time.perf_counter()
            if (self.cfg.eval_every and self.step % self.cfg.eval_every == 0) or done:
                last_eval = self.evaluate()
                if self.pipeline is not None and not done:
                    batches = self.train_stream()
                timed_steps, batches.wait_s, interval_start = 0, 0.0, time.perf_counter()
            if self._should_stop():
                preempted = True
                self.save_checkpoint()
                break
            if self.cfg.ckpt_every and (self.step % self.cfg.ckpt_every == 0 or done):
                self.save_checkpoint()
                timed_steps, batches.wait_s, interval_start = 0, 0.0, time.perf_counter()
        if not last_eval:  # resumed at max_steps: nothing left to train, report the final model
            last_eval = self.evaluate()
        summary = {
            "step": self.step,
            "split": "summary",
            "train_examples_per_sec": statistics.median(rates) if rates else None,
            "wall_time_s": time.perf_counter() - start,
            "world_size": self.env.world_size,
            "skipped_steps": self.skipped_steps,
            "preempted": preempted,
            **{k: last_eval[k] for k in ("loss", "ne", "auc", "calibration", "bayes_ne", "bayes_calibration",
                                         "expected_gap_pct")
               if k in last_eval},
        }
        self.log.write(summary)
        return summary

    @torch.no_grad()
    def evaluate(self) -> dict[str, Any]:
        """Metrics over the whole fixed eval split (every rank's share, gathered)."""
        start = time.perf_counter()
        if self.pipeline is not None:
            self.pipeline.detach()  # the tables' own forward back; training continues on a new pipeline
        self.model.eval()
        probs, labels = [], []
        for batch in self.dataset.eval_batches():
            batch = batch.to(self.device, non_blocking=True)
            with self.autocast():
                logits = self.model(batch)
            probs.append(torch.sigmoid(logits.float()))
            labels.append(batch.labels)
        self.model.train()
        all_probs = gather_rows(torch.cat(probs)).cpu()
        all_labels = gather_rows(torch.cat(labels)).cpu()
        weights = self.loss_weights.cpu()
        loss = sum(weights[t].item() * log_loss(all_probs[:, t], all_labels[:, t]).item() for t in range(len(self.tasks)))
        record = {
            "step": self.step,
            "split": "eval",
            "loss": loss,
            "examples_per_sec": all_labels.shape[0] / (time.perf_counter() - start),
            "num_examples": all_labels.shape[0],
            **task_metrics(all_probs, all_labels, self.tasks),
        }
        bayes = self.dataset.bayes_ne()
        if bayes is not None:
            record["bayes_ne"] = bayes
            record["bayes_calibration"] = self.dataset.bayes_calibration()
            truth = gather_rows(self.dataset.eval_true_probabilities().to(self.device)).cpu()
            record["expected_gap_pct"] = expected_gap_pct(all_probs, truth, self.tasks)
        self.log.write(record)
        return record

    def close(self) -> None:
        self.preemption.close()
        self.log.close()


class _TimedStream:
    """Host batches, adding the time spent waiting for each one to `wait_s`: the trainer logs it as
    a share of wall time (`data_wait_pct`), the first thing to look at when examples/s disappoints."""

    def __init__(self, batches: Iterator[Batch]) -> None:
        self.batches, self.wait_s = batches, 0.0

    def __iter__(self) -> "_TimedStream":
        return self

    def __next__(self) -> Batch:
        start = time.perf_counter()
        try:
            return next(self.batches)
        finally:
            self.wait_s += time.perf_counter() - start


class _PipelineOptimizer:
    """The optimizer TorchRec's train pipeline calls around its forward and backward: the trainer's
    clipped dense update (the embeddings' row-wise Adagrad already ran inside backward)."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def zero_grad(self) -> None:
        pass  # the previous dense step cleared the gradients

    def step(self) -> None:
        trainer = self.trainer
        trainer._dense_step(trainer._pipeline_loss, trainer._clip_dense_grads())
