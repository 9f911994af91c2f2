"""Dense optimizer (AdamW with linear warm-up and optional cosine decay) and gradient clipping.

Embedding tables are not here: their row-wise Adagrad is fused into the backward pass by
`gem.sharding.shard_model`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torchrec.optim.keyed import KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter

from gem.sharding import SparseOptimConfig


@dataclass
class DenseOptimConfig:
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    warmup_steps: int = 50
    schedule: str = "constant"  # after warm-up: "constant" or "cosine" (down to min_lr_ratio * lr at max_steps)
    min_lr_ratio: float = 0.1


@dataclass
class OptimConfig:
    dense: DenseOptimConfig = field(default_factory=DenseOptimConfig)
    sparse: SparseOptimConfig = field(default_factory=SparseOptimConfig)
    grad_clip: float = 1.0  # max global L2 norm of the dense gradients; 0 disables

    def __post_init__(self) -> None:
        if self.dense.schedule not in ("constant", "cosine"):
            raise ValueError(f"optim.dense.schedule must be constant or cosine, got {self.dense.schedule!r}")
        if self.dense.lr <= 0 or self.sparse.lr <= 0:
            raise ValueError("optim.dense.lr and optim.sparse.lr must be > 0")
        if self.grad_clip < 0:
            raise ValueError(f"optim.grad_clip must be >= 0, got {self.grad_clip}")


def dense_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """Parameters not already updated by a fused (in-backward) optimizer."""
    return dict(in_backward_optimizer_filter(model.named_parameters()))


def build_dense_optimizer(
    model: nn.Module, cfg: DenseOptimConfig, max_steps: int
) -> tuple[KeyedOptimizerWrapper, torch.optim.lr_scheduler.LambdaLR]:
    params = dense_parameters(model)
    optimizer = KeyedOptimizerWrapper(
        params,
        lambda p: torch.optim.AdamW(p, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay),
    )

    def lr_factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "constant" or max_steps <= cfg.warmup_steps:
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / (max_steps - cfg.warmup_steps))
        return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
