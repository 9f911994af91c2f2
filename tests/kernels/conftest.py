"""Kernel tests set-up (the interpreter switch for CPU is in tests/conftest.py).

On GPU each Triton kernel runs its default config (JFA_TRITON_AUTOTUNE=0): a search would compile
every config for every option combination. ``test_every_autotune_config`` covers the others.
Every tlx launch of the kernel tests is checked against the kernel Triton's own launch would pick
(`kernels.tlx_launch.VERIFY`), so a launch key that missed a specialisation fails a test.
"""

from __future__ import annotations

import os

import pytest
import torch

if torch.cuda.is_available():
    os.environ.setdefault("JFA_TRITON_AUTOTUNE", "0")


@pytest.fixture(autouse=True)
def _verified_tlx_launches(monkeypatch):
    from kernels import tlx_launch

    monkeypatch.setattr(tlx_launch, "VERIFY", True)
