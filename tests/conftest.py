"""Shared test set-up.

- `data` first: it silences fbgemm's per-import version-table warning before torchrec loads fbgemm.
- Without CUDA the Triton kernels run under the Triton interpreter, which is chosen when a kernel is
  decorated (when triton is first imported), so the switch is flipped here, before any test module
  imports triton or `kernels.triton_*`.
"""

import os

import torch

import data  # noqa: F401

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
