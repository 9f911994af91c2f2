"""benchmarks.tlx_launch_probe needs the GPU; without one it says so instead of failing later."""

import pytest
import torch

from benchmarks import tlx_launch_probe


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_without_cuda():
    with pytest.raises(SystemExit, match="tlx_launch_probe needs a CUDA device"):
        tlx_launch_probe.main(["--calls", "1", "--batch", "4"])
