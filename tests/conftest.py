"""Shared test set-up.

- Without CUDA the Triton kernels run under the Triton interpreter, which is chosen when a kernel is
  decorated (when triton is first imported, torchrec's fbgemm import included), so the switch is
  flipped first, before anything imports triton.
- Then `data`, where torchrec is installed: it silences fbgemm's per-import version-table warning
  before any test module loads fbgemm. (A kernels-only GPU host has no torchrec.)
"""

import importlib.util
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

if importlib.util.find_spec("torchrec") is not None:
    import data  # noqa: F401
