"""Multi-task output: one MLP tower and logit per task, and the weighted BCE loss."""

from __future__ import annotations

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

    Shapes: `[B, in_features]` -> logits `[B, len(tasks)]`.
    """

    def __init__(self, in_features: int, tasks: tuple[str, ...], hidden: list[int]) -> None:
        super().__init__()
        self.tasks = tasks
        self.towers = nn.ModuleList(self._tower(in_features, hidden) for _ in tasks)

    @staticmethod
    def _tower(in_features: int, hidden: list[int]) -> nn.Sequential:
        layers: list[nn.Module] = [MLP(in_features, hidden)] if hidden else []
        layers.append(nn.Linear(hidden[-1] if hidden else in_features, 1))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([tower(x) for tower in self.towers], dim=1)


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
