"""benchmarks.c_dispatch_probe needs the GPU; without one it says so instead of failing later."""

import pytest
import torch

from benchmarks import c_dispatch_probe


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_without_cuda():
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        c_dispatch_probe.main(["--calls", "1"])
