"""Dense optimizer (AdamW with linear warm-up and optional cosine decay), gradient clipping, and the
embeddings' learning-rate schedule.

The embedding tables' row-wise Adagrad is fused into the backward pass by `gem.sharding.shard_model`;
only its learning rate is set here, per step (`sparse_lr`, `set_sparse_lr`).

Wide layers learn at a smaller rate. Adam moves every weight by about lr per step whatever the
gradient's scale (so gradient clipping does not bound it), and the moves of one output's n
weights are correlated (each weight's gradient carries its input's sign): the output shifts by up
to lr * sum|x_j|, which grows with the fan-in n. GEM flattens all its tokens into the interaction
(gem_base: 155 tokens x 512 = 79k inputs to the cross net and the over-arch), where lr = 1e-3
diverged within 30 steps of warm-up (loss 30, grad norm 500; on the H200 and on CPU in float32).
So, as in muP, a matrix with fan-in n > `fan_in_base` learns at lr * fan_in_base / n. The base,
1024, is the widest fan-in of the CPU configs lr = 1e-3 was tuned on (the quality presets' models
stay below it): at 4096 gem_base trained at batch >= 1024 on the H200 but still spiked at batch 64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torchrec.modules.crossnet import LowRankCrossNet
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
    # Linear / cross-net matrices with fan-in n above this learn at lr * fan_in_base / n; 0: off.
    fan_in_base: int = 1024


@dataclass
class OptimConfig:
    dense: DenseOptimConfig = field(default_factory=DenseOptimConfig)
    sparse: SparseOptimConfig = field(default_factory=SparseOptimConfig)
    grad_clip: float = 1.0  # max global L2 norm of the dense gradients; 0 disables

    def __post_init__(self) -> None:
        for name, part in (("dense", self.dense), ("sparse", self.sparse)):
            if part.schedule not in ("constant", "cosine"):
                raise ValueError(f"optim.{name}.schedule must be constant or cosine, got {part.schedule!r}")
            if not 0.0 <= part.min_lr_ratio <= 1.0:
                raise ValueError(f"optim.{name}.min_lr_ratio must be in [0, 1], got {part.min_lr_ratio}")
        if self.dense.lr <= 0 or self.sparse.lr <= 0:
            raise ValueError("optim.dense.lr and optim.sparse.lr must be > 0")
        if self.dense.fan_in_base < 0:
            raise ValueError(f"optim.dense.fan_in_base must be >= 0 (0: off), got {self.dense.fan_in_base}")
        if self.grad_clip < 0:
            raise ValueError(f"optim.grad_clip must be >= 0, got {self.grad_clip}")


def dense_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """Parameters not already updated by a fused (in-backward) optimizer."""
    return dict(in_backward_optimizer_filter(model.named_parameters()))


def fan_in_lr_scales(model: nn.Module, fan_in_base: int) -> dict[nn.Parameter, float]:
    """lr multiplier fan_in_base / n of every nn.Linear or LowRankCrossNet matrix whose fan-in n
    (shape[1]: both apply their matrices as F.linear) exceeds fan_in_base; the rest learn at lr."""
    if fan_in_base == 0:
        return {}
    matrices = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            matrices.append(module.weight)
        elif isinstance(module, LowRankCrossNet):
            matrices += [*module.V_kernels, *module.W_kernels]
    return {w: fan_in_base / w.shape[1] for w in matrices if w.shape[1] > fan_in_base}


def build_dense_optimizer(
    model: nn.Module, cfg: DenseOptimConfig, max_steps: int
) -> tuple[KeyedOptimizerWrapper, torch.optim.lr_scheduler.LambdaLR]:
    params = dense_parameters(model)
    scales = fan_in_lr_scales(model, cfg.fan_in_base)

    def adamw(tensors: list[torch.Tensor]) -> torch.optim.AdamW:
        groups: dict[float, list[torch.Tensor]] = {}
        for p in tensors:
            groups.setdefault(scales.get(p, 1.0), []).append(p)
        # Unscaled group first: the train log reports group 0's lr.
        ordered = sorted(groups.items(), key=lambda item: -item[0])
        param_groups = [{"params": group, "lr": cfg.lr * scale} for scale, group in ordered]
        return torch.optim.AdamW(param_groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                                 weight_decay=cfg.weight_decay)

    optimizer = KeyedOptimizerWrapper(params, adamw)

    def lr_factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "constant" or max_steps <= cfg.warmup_steps:
            return 1.0
        return _cosine(min(1.0, (step - cfg.warmup_steps) / (max_steps - cfg.warmup_steps)), cfg.min_lr_ratio)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)


def _cosine(progress: float, min_lr_ratio: float) -> float:
    """lr factor at `progress` in [0, 1] of a cosine decay from 1 to min_lr_ratio."""
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def sparse_lr(cfg: SparseOptimConfig, step: int, max_steps: int) -> float:
    """The embeddings' learning rate for training step `step` (0-based) of a run of max_steps. A
    function of the step alone, so a resumed run continues the schedule without saved state."""
    if cfg.schedule == "constant":
        return cfg.lr
    return cfg.lr * _cosine(min(1.0, step / max(max_steps, 1)), cfg.min_lr_ratio)


def set_sparse_lr(model: nn.Module, lr: float) -> None:
    """Set the learning rate of the optimizers fused into the embeddings' backward: their step()
    only hands param_groups' lr to the kernels (FBGEMM's set_learning_rate); the updates happen in
    backward."""
    fused = model.fused_optimizer
    for group in fused.param_groups:
        group["lr"] = lr
    fused.step()
