"""Kernel tests: on a machine without CUDA the Triton kernels run under the Triton interpreter.

The interpreter is chosen when a kernel is decorated, i.e. when triton is first imported, so the
switch is flipped here, before any test module imports triton or ``kernels.triton_*``.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
