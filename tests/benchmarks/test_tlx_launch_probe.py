"""benchmarks.tlx_launch_probe needs the GPU; without one it says so instead of failing later."""

import pytest
import torch

from benchmarks import tlx_launch_probe


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_without_cuda():
    with pytest.raises(SystemExit, match="tlx_launch_probe needs a CUDA device"):
        tlx_launch_probe.main(["--calls", "1", "--batch", "4"])



def test_cpu_proxy_times_forward_and_backward_host_paths():
    # the launchers' host path on the CPU: fbtriton for the kernels' signatures, compiled (not
    # interpreted) kernels, no GPU
    pytest.importorskip("triton.language.extra.tlx")
    from tests.kernels.compiled_subprocess import run_without_interpreter

    done = run_without_interpreter(["-m", "benchmarks.tlx_launch_probe", "--cpu-proxy", "--calls", "3",
                                    "--batch", "4"], timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("CPU proxy, PMA q128 B4 H4 fill 0.1")
    assert [line.split(":")[0] for line in lines[1:]] == ["tlx_hopper.forward", "tlx_hopper.backward"]
    assert all(float(line.split()[-2]) > 0 for line in lines[1:])
