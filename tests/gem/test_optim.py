"""Dense optimizer: fan-in learning-rate scaling of wide matrices, warm-up."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torchrec.modules.crossnet import LowRankCrossNet

from gem.optim import DenseOptimConfig, OptimConfig, build_dense_optimizer, fan_in_lr_scales


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
