"""Shared by the tests that launch train.py in a subprocess."""

from __future__ import annotations

import torch


def device_overrides(nproc: int, overrides: tuple[str, ...]) -> list[str]:
    """`trainer.device=cpu` for a multi-rank run where this process sees fewer GPUs than ranks (a GPU
    test worker owns one; gloo on CPU then), unless the test names a device itself."""
    named = any(o.startswith("trainer.device=") for o in overrides)
    return ["trainer.device=cpu"] if nproc > torch.cuda.device_count() and not named else []
