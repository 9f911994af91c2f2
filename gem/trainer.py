"""The training loop: build order, `train_step`, periodic eval and logging."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from data import Batch, build_dataset
from gem.config import typed
from gem.distributed import gather_rows, init_distributed, mean_over_ranks
from gem.metrics import log_loss, task_metrics
from gem.models import build_model
from gem.models.heads import task_weight_vector, weighted_bce
from gem.optim import OptimConfig, build_dense_optimizer, dense_parameters
from gem.run_log import RunLog
from gem.sharding import ShardingConfig, init_embeddings, shard_model


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

    def __post_init__(self) -> None:
        for name in ("max_steps", "log_every"):
            if getattr(self, name) <= 0:
                raise ValueError(f"trainer.{name} must be > 0, got {getattr(self, name)}")
        if self.eval_every < 0:
            raise ValueError(f"trainer.eval_every must be >= 0, got {self.eval_every}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"trainer.precision must be auto, fp32 or bf16, got {self.precision!r}")


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

        self.dense_params = list(dense_parameters(self.model).values())
        self.grad_clip = optim_cfg.grad_clip
        self.optimizer, self.scheduler = build_dense_optimizer(self.model, optim_cfg.dense, self.cfg.max_steps)
        self.step = 0
        self.run_dir = run_dir
        self.log = RunLog(run_dir, self.env.is_main, self.cfg.max_steps, self.global_batch_size,
                          tensorboard=self.cfg.tensorboard, progress=self.cfg.progress)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One optimisation step on this rank's batch; returns the (device) loss, no host sync."""
        with self.autocast():
            logits = self.model(batch)
        loss = weighted_bce(logits, batch.labels, self.loss_weights)
        loss.backward()  # also applies the fused row-wise Adagrad to the embedding rows
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.dense_params, self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return loss.detach()

    def train(self) -> dict[str, Any]:
        start = time.perf_counter()
        batches = self.dataset.train_batches(start_step=self.step)
        rates: list[float] = []
        loss_sum, num_steps, interval_start = torch.zeros((), device=self.device), 0, time.perf_counter()
        last_eval: dict[str, Any] = {}
        self.model.train()
        while self.step < self.cfg.max_steps:
            batch = next(batches).to(self.device, non_blocking=True)
            loss_sum += self.train_step(batch)
            num_steps += 1
            self.step += 1
            self.log.advance(self.global_batch_size)
            done = self.step == self.cfg.max_steps
            if self.step % self.cfg.log_every == 0 or done:
                loss = mean_over_ranks(loss_sum / num_steps).item()
                rate = num_steps * self.global_batch_size / (time.perf_counter() - interval_start)
                rates.append(rate)
                lr = self.scheduler.get_last_lr()[0]
                self.log.write({"step": self.step, "split": "train", "loss": loss, "examples_per_sec": rate, "lr": lr})
                self.log.advance(0, loss=loss)
                loss_sum.zero_()
                num_steps = 0
                interval_start = time.perf_counter()
            if (self.cfg.eval_every and self.step % self.cfg.eval_every == 0) or done:
                last_eval = self.evaluate()
                interval_start = time.perf_counter()  # eval time is not training throughput
        summary = {
            "step": self.step,
            "split": "summary",
            "train_examples_per_sec": statistics.median(rates) if rates else None,
            "wall_time_s": time.perf_counter() - start,
            "world_size": self.env.world_size,
            **{k: last_eval[k] for k in ("loss", "ne", "auc", "calibration", "bayes_ne") if k in last_eval},
        }
        self.log.write(summary)
        return summary

    @torch.no_grad()
    def evaluate(self) -> dict[str, Any]:
        """Metrics over the whole fixed eval split (every rank's share, gathered)."""
        start = time.perf_counter()
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
        self.log.write(record)
        return record

    def close(self) -> None:
        self.log.close()
