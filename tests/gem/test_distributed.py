"""gem.distributed: device checks before any process group exists."""

from __future__ import annotations

import pytest
import torch

from gem.distributed import init_distributed


def test_more_ranks_per_node_than_gpus_names_the_rank_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    # torchrun --nproc_per_node=2 on a node that shows one GPU: rank 1 must not reach set_device's
    # "invalid device ordinal"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda _: pytest.fail("set_device reached"))
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(ValueError, match=r"local rank 1 needs its own GPU, but only 1 CUDA device\(s\) are visible"
                       r".*--nproc_per_node.*trainer.device=cpu"):
        init_distributed("cuda")


def test_unknown_device_is_rejected() -> None:
    with pytest.raises(ValueError, match="trainer.device must be auto, cpu or cuda, got 'tpu'"):
        init_distributed("tpu")
