"""Ranking metrics per task: normalized entropy (NE), ROC AUC and calibration.

All three are computed in float64 over the complete prediction set (eval is small and fixed), so
there is no streaming approximation to reason about:

- NE = mean log loss / entropy of the empirical positive rate (He et al., 2014). 1.0 is what a
  model that always predicts the base rate gets; lower is better.
- AUC = probability that a random positive is scored above a random negative (ties count 1/2).
- calibration = sum of predicted probabilities / number of positives (1.0 is perfect).
"""

from __future__ import annotations

import math

import torch

_EPS = 1e-12


def log_loss(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of probabilities `probs` against 0/1 `labels`, in float64."""
    p = probs.double().clamp(_EPS, 1.0 - _EPS)
    y = labels.double()
    return -(y * p.log() + (1.0 - y) * (1.0 - p).log()).mean()


def normalized_entropy(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Log loss divided by the entropy of the empirical positive rate of `labels`.

    NaN when the labels are all one class (the normaliser is 0), or when there are none.
    """
    if labels.numel() == 0:
        return math.nan
    rate = labels.double().mean().item()
    if rate <= 0.0 or rate >= 1.0:
        return math.nan
    base = -(rate * math.log(rate) + (1.0 - rate) * math.log(1.0 - rate))
    return log_loss(probs, labels).item() / base


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney U) statistic with tied scores given their mean rank."""
    s = scores.double().flatten()
    y = labels.double().flatten()
    num_pos = y.sum().item()
    num_neg = y.numel() - num_pos
    if num_pos == 0 or num_neg == 0:
        return math.nan
    order = torch.argsort(s)
    sorted_s = s[order]
    # Mean 1-based rank of each run of equal scores.
    _, inverse, counts = torch.unique_consecutive(sorted_s, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1.0) / 2.0
    ranks = torch.empty_like(s)
    ranks[order] = mean_rank[inverse]
    rank_sum_pos = (ranks * y).sum().item()
    return (rank_sum_pos - num_pos * (num_pos + 1) / 2.0) / (num_pos * num_neg)


def calibration(probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Sum of predictions over number of positives; NaN without positives."""
    num_pos = labels.double().sum().item()
    if num_pos == 0:
        return math.nan
    return probs.double().sum().item() / num_pos


def expected_gap_pct(probs: torch.Tensor, truth: torch.Tensor, tasks: tuple[str, ...]) -> dict[str, float]:
    """Per task, 100 x (expected log loss / the Bayes model's expected log loss - 1), expectations
    over the labels given their true probabilities `truth` ([N, num_tasks]): what the eval NE's gap
    to the Bayes NE estimates, without the noise of one draw of the labels (it is mean KL(truth ||
    probs) / mean entropy(truth), never negative)."""
    return {task: 100.0 * (log_loss(probs[:, i], truth[:, i]).item() / log_loss(truth[:, i], truth[:, i]).item() - 1.0)
            for i, task in enumerate(tasks)}


def task_metrics(probs: torch.Tensor, labels: torch.Tensor, tasks: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """NE, AUC and calibration for each task column of `probs` / `labels` ([N, num_tasks])."""
    return {
        metric: {task: fn(probs[:, i], labels[:, i]) for i, task in enumerate(tasks)}
        for metric, fn in (("ne", normalized_entropy), ("auc", auc), ("calibration", calibration))
    }
