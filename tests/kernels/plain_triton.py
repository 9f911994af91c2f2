"""Where the tests of plain Triton kernels (the schedule, the TLX modules' plain helpers) run: on
a GPU, or on the CPU under TRITON_INTERPRET=1 (tests/conftest.py sets it where no GPU is found)."""

from __future__ import annotations

import os

import pytest
import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_gpu_or_interpreter = pytest.mark.skipif(not (torch.cuda.is_available() or INTERPRET),
                                              reason="needs a GPU or TRITON_INTERPRET=1")
