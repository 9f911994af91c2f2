"""Kernel tests set-up (the interpreter switch for CPU is in tests/conftest.py).

On GPU each Triton kernel runs its default config (JFA_TRITON_AUTOTUNE=0): a search would compile
every config for every option combination. ``test_every_autotune_config`` covers the others.
"""

from __future__ import annotations

import os

import torch

if torch.cuda.is_available():
    os.environ.setdefault("JFA_TRITON_AUTOTUNE", "0")
