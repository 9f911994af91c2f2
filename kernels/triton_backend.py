"""Portable Triton JFA backend: sm_80+ GPUs, or CPU under TRITON_INTERPRET=1.

Forward in ``triton_fwd``, backward in ``triton_bwd``. Every reduction runs in a fixed order (no
atomics), so results are bitwise reproducible whatever ``params.deterministic`` says.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.common import JFAParams
from kernels.triton_bwd import backward
from kernels.triton_common import INTERPRETER
from kernels.triton_fwd import forward

__all__ = ["backward", "forward", "supports"]


def supports(query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str | None:
    device = query.device
    if device.type == "cuda":
        if torch.cuda.get_device_capability(device) < (8, 0):
            return f"needs sm_80 or newer, {device} is sm_{''.join(map(str, torch.cuda.get_device_capability(device)))}"
        return None
    if not INTERPRETER:
        return f"needs a CUDA device, or TRITON_INTERPRET=1 set before triton is imported (tensors are on {device})"
    if query.dtype != torch.float32:
        return f"the Triton interpreter runs float32 only, got {query.dtype}"
    return None
