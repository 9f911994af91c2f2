"""gem.metrics against independent brute-force computations."""

import math
import random

import pytest
import torch

from gem.metrics import auc, calibration, expected_gap_pct, log_loss, normalized_entropy, task_metrics


def brute_force_auc(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def brute_force_ne(probs: list[float], labels: list[int]) -> float:
    loss = -sum(y * math.log(p) + (1 - y) * math.log(1 - p) for p, y in zip(probs, labels)) / len(labels)
    r = sum(labels) / len(labels)
    return loss / -(r * math.log(r) + (1 - r) * math.log(1 - r))


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_pairwise_count_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(20, 200)
    scores = [round(rng.random(), 1) for _ in range(n)]  # coarse: many ties
    labels = [int(rng.random() < 0.3) for _ in range(n)]
    labels[0], labels[1] = 0, 1
    got = auc(torch.tensor(scores), torch.tensor(labels))
    assert got == pytest.approx(brute_force_auc(scores, labels), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_ne_and_calibration_match_formula(seed: int) -> None:
    rng = random.Random(seed)
    probs = [rng.uniform(0.01, 0.99) for _ in range(100)]
    labels = [int(rng.random() < p) for p in probs]
    labels[0], labels[1] = 0, 1
    assert normalized_entropy(torch.tensor(probs, dtype=torch.float64), torch.tensor(labels)) == pytest.approx(
        brute_force_ne(probs, labels), rel=1e-12)
    assert calibration(torch.tensor(probs, dtype=torch.float64), torch.tensor(labels)) == pytest.approx(sum(probs) / sum(labels), rel=1e-12)


def test_base_rate_predictor_has_ne_one_and_perfect_ranker_auc_one() -> None:
    labels = torch.tensor([0, 0, 1, 0, 1, 0, 0, 0.0])
    rate = labels.mean()
    assert normalized_entropy(torch.full_like(labels, rate.item()), labels) == pytest.approx(1.0)
    assert auc(labels * 2 - 1, labels) == 1.0
    assert auc(1 - labels, labels) == 0.0


def test_degenerate_labels_give_nan() -> None:
    ones = torch.ones(4)
    assert math.isnan(normalized_entropy(torch.full((4,), 0.5), ones))
    assert math.isnan(auc(torch.rand(4), ones))
    assert math.isnan(calibration(torch.rand(4), torch.zeros(4)))


def test_task_metrics_layout() -> None:
    probs = torch.tensor([[0.2, 0.1], [0.7, 0.3], [0.4, 0.05], [0.9, 0.6]])
    labels = torch.tensor([[0, 0], [1, 0], [0, 0], [1, 1.0]])
    out = task_metrics(probs, labels, ("click", "conversion"))
    assert set(out) == {"ne", "auc", "calibration"}
    assert out["auc"] == {"click": 1.0, "conversion": 1.0}


def test_expected_gap_is_the_ne_gap_averaged_over_label_draws() -> None:
    """The NE gap to the Bayes model, pooled over many draws of the labels from the truth, converges
    to expected_gap_pct; the truth scores 0 and any other prediction more."""
    g = torch.Generator().manual_seed(3)
    truth = torch.rand(4000, 2, generator=g, dtype=torch.float64) * 0.3
    model = (truth * torch.exp(0.3 * torch.randn(truth.shape, generator=g, dtype=torch.float64))).clamp(max=0.99)
    gaps = expected_gap_pct(model, truth, ("click", "conversion"))
    assert expected_gap_pct(truth, truth, ("click", "conversion")) == pytest.approx({"click": 0.0, "conversion": 0.0}, abs=1e-9)
    loss_model = loss_bayes = torch.zeros(2, dtype=torch.float64)
    for _ in range(300):
        labels = (torch.rand(truth.shape, generator=g, dtype=torch.float64) < truth).double()
        loss_model = loss_model + torch.stack([log_loss(model[:, t], labels[:, t]) for t in range(2)])
        loss_bayes = loss_bayes + torch.stack([log_loss(truth[:, t], labels[:, t]) for t in range(2)])
    pooled = 100.0 * (loss_model / loss_bayes - 1.0)
    for t, task in enumerate(("click", "conversion")):
        assert gaps[task] > 1.0
        assert pooled[t].item() == pytest.approx(gaps[task], rel=0.05), task
