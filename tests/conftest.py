"""Shared test set-up.

- Without CUDA the Triton kernels run under the Triton interpreter, which is chosen when a kernel is
  decorated (when triton is first imported, torchrec's fbgemm import included), so the switch is
  flipped first, before anything imports triton.
- Then `data`, where torchrec is installed: it silences fbgemm's per-import version-table warning
  before any test module loads fbgemm. (A kernels-only GPU host has no torchrec.)
"""

import importlib.util
import os

# On a multi-GPU host, TEST_GPUS="0,1,2,3" spreads pytest-xdist workers over the GPUs, one each
# (round robin), before torch initialises CUDA. Tests that need two GPUs then skip: run them
# without xdist.
if os.environ.get("TEST_GPUS") and os.environ.get("PYTEST_XDIST_WORKER"):
    _gpus = os.environ["TEST_GPUS"].split(",")
    os.environ["CUDA_VISIBLE_DEVICES"] = _gpus[int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")) % len(_gpus)]

# Inductor compiles in-process, as the trainer does by default (trainer.compile_threads=1): its
# worker subprocesses do not find the GPU under the fbtriton bundle of the H200 host.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

if importlib.util.find_spec("torchrec") is not None:
    import data  # noqa: F401
