"""Multi-task output: one MLP tower and logit per task, and the weighted BCE loss."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.modules.mlp import MLP


class TaskHeads(nn.Module):
    """One tower per task, each ending in a single logit.

    Args:
        in_features: width of the shared representation.
        tasks: task names, in label-column order.
        hidden: hidden layer sizes of every tower.
        chain: task -> the task it is conditional on, as in ESMM (e.g. ``{"conversion": "click"}``,
            where a conversion needs a click): that task's tower predicts p(task | parent), and its
            output is the logit of the marginal p(parent) * p(task | parent), so labels, loss and
            metrics stay per impression. A parent may not itself be chained.

    Shapes: `[B, in_features]` -> logits `[B, len(tasks)]` (of the per-impression probabilities).
    """

    def __init__(self, in_features: int, tasks: tuple[str, ...], hidden: list[int],
                 chain: dict[str, str] | None = None) -> None:
        super().__init__()
        self.tasks = tasks
        self.towers = nn.ModuleList(self._tower(in_features, hidden) for _ in tasks)
        chain = dict(chain or {})
        unknown = sorted((set(chain) | set(chain.values())) - set(tasks))
        if unknown:
            raise ValueError(f"model.task_chain names unknown tasks {unknown}; the data's tasks are {list(tasks)}")
        for child, parent in chain.items():
            if child == parent or parent in chain:
                raise ValueError(f"model.task_chain: {child!r} -> {parent!r}: a task's parent must be another, "
                                 f"unchained task (got {chain})")
        self.chain = [(tasks.index(child), tasks.index(parent)) for child, parent in chain.items()]

    @staticmethod
    def _tower(in_features: int, hidden: list[int]) -> nn.Sequential:
        layers: list[nn.Module] = [MLP(in_features, hidden)] if hidden else []
        layers.append(nn.Linear(hidden[-1] if hidden else in_features, 1))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = [tower(x) for tower in self.towers]
        for child, parent in self.chain:
            logits[child] = product_logit(logits[parent], logits[child])
        return torch.cat(logits, dim=1)


def product_logit(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """logit(sigmoid(a) * sigmoid(b)) in float32, stable at both ends: log p = logsigmoid(a) +
    logsigmoid(b), log(1 - p) = log1mexp(log p). log p is kept below -1e-7, where both branches
    of log1mexp are finite (torch.where passes gradients through the branch it does not pick)."""
    log_p = (F.logsigmoid(a.float()) + F.logsigmoid(b.float())).clamp(max=-1e-7)
    log_1mp = torch.where(log_p > -math.log(2), torch.log(-torch.expm1(log_p)), torch.log1p(-torch.exp(log_p)))
    return log_p - log_1mp


def task_weight_vector(tasks: tuple[str, ...], weights: dict[str, float]) -> torch.Tensor:
    """Per-task loss weights in label-column order; tasks not named weigh 1.0."""
    unknown = sorted(set(weights) - set(tasks))
    if unknown:
        raise ValueError(f"model.task_weights names unknown tasks {unknown}; the data's tasks are {list(tasks)}")
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"model.task_weights must be >= 0, got {weights}")
    return torch.tensor([float(weights.get(t, 1.0)) for t in tasks])


def weighted_bce(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Sum over tasks of weight * mean binary cross-entropy, computed in float32."""
    per_task = F.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="none").mean(dim=0)
    return (per_task * weights.to(per_task.device)).sum()
