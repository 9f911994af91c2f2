"""Dense optimizer: fan-in learning-rate scaling of wide matrices, warm-up."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torchrec.modules.crossnet import LowRankCrossNet

from gem.optim import DenseOptimConfig, OptimConfig, build_dense_optimizer, fan_in_lr_scales, sparse_lr
from gem.sharding import SparseOptimConfig


class Wide(nn.Module):
    def __init__(self, fan_in: int) -> None:
        super().__init__()
        self.narrow = nn.Linear(8, fan_in)
        self.cross = LowRankCrossNet(fan_in, num_layers=1, low_rank=64)
        self.wide = nn.Linear(fan_in, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wide(self.cross(self.narrow(x)))


def test_only_matrices_wider_than_the_base_are_scaled() -> None:
    model = Wide(10_000)
    scales = fan_in_lr_scales(model, fan_in_base=4096)
    assert scales == {
        model.wide.weight: pytest.approx(0.4096),
        model.cross.V_kernels[0]: pytest.approx(0.4096),  # [64, 10000]: contracts 10000 inputs
    }  # not narrow (fan-in 8), the cross net's W (fan-in 64), biases
    assert fan_in_lr_scales(model, fan_in_base=0) == {}


def test_warm_up_scales_every_group_alike() -> None:
    model = Wide(10_000)
    cfg = DenseOptimConfig(lr=1e-3, warmup_steps=10, fan_in_base=4096)
    optimizer, scheduler = build_dense_optimizer(model, cfg, max_steps=100)
    lrs = sorted(group["lr"] for group in optimizer.param_groups)
    assert lrs == pytest.approx([1e-4 * 0.4096, 1e-4])  # step 0 of a 10-step warm-up
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)  # the logged lr is the unscaled one
    for _ in range(10):
        optimizer.step()
        scheduler.step()
    assert sorted(group["lr"] for group in optimizer.param_groups) == pytest.approx([1e-3 * 0.4096, 1e-3])


@pytest.mark.parametrize("fan_in_base, expected_shift", [(0, 1e-3 * 100_000), (4096, 1e-3 * 4096)])
def test_one_adam_step_moves_a_wide_output_by_lr_times_its_effective_fan_in(fan_in_base: int,
                                                                            expected_shift: float) -> None:
    """The failure the scaling prevents: Adam moves each of the n weights by ~lr in the direction
    its input's sign gives, so the output moves by lr * sum|x| = lr * n (here 100, diverging)."""
    layer = nn.Linear(100_000, 1, bias=False)
    optimizer, _ = build_dense_optimizer(layer, DenseOptimConfig(lr=1e-3, warmup_steps=0, weight_decay=0.0,
                                                                 fan_in_base=fan_in_base), max_steps=1)
    x = torch.randn(1, 100_000).sign()
    before = layer(x).item()
    layer(x).sum().backward()
    optimizer.step()
    assert before - layer(x).item() == pytest.approx(expected_shift, rel=1e-3)


def test_negative_base_is_rejected() -> None:
    with pytest.raises(ValueError, match="optim.dense.fan_in_base must be >= 0"):
        OptimConfig(dense=DenseOptimConfig(fan_in_base=-1))


def test_sparse_cosine_runs_from_lr_to_its_floor_and_constant_stays() -> None:
    cosine = SparseOptimConfig(lr=0.4, schedule="cosine", min_lr_ratio=0.25)
    assert sparse_lr(cosine, 0, 100) == pytest.approx(0.4)
    assert sparse_lr(cosine, 50, 100) == pytest.approx(0.4 * (0.25 + 0.75 * 0.5))
    assert sparse_lr(cosine, 100, 100) == pytest.approx(0.1)
    rates = [sparse_lr(cosine, step, 100) for step in range(101)]
    assert all(a > b for a, b in zip(rates, rates[1:]))
    assert {sparse_lr(SparseOptimConfig(lr=0.4), step, 100) for step in range(101)} == {0.4}


@pytest.mark.parametrize("part", ["dense", "sparse"])
def test_schedule_and_floor_are_checked(part: str) -> None:
    with pytest.raises(ValueError, match=rf"optim.{part}.schedule must be constant or cosine, got 'linear'"):
        OptimConfig(**{part: (DenseOptimConfig if part == "dense" else SparseOptimConfig)(schedule="linear")})
    with pytest.raises(ValueError, match=rf"optim.{part}.min_lr_ratio must be in \[0, 1\], got 1.5"):
        OptimConfig(**{part: (DenseOptimConfig if part == "dense" else SparseOptimConfig)(min_lr_ratio=1.5)})
