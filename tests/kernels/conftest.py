"""Kernel tests set-up.

- Without CUDA the Triton kernels run under the Triton interpreter, chosen when a kernel is
  decorated (when triton is first imported), so the switch is flipped here, before any test module
  imports triton or ``kernels.triton_*``.
- On GPU each Triton kernel runs its default config (JFA_TRITON_AUTOTUNE=0): a search would compile
  every config for every option combination. ``test_every_autotune_config`` covers the others.
"""

from __future__ import annotations

import os

import torch

if torch.cuda.is_available():
    os.environ.setdefault("JFA_TRITON_AUTOTUNE", "0")
else:
    os.environ.setdefault("TRITON_INTERPRET", "1")
