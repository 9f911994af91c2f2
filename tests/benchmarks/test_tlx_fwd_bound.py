"""benchmarks.tlx_fwd_bound: the timing-only forward variants are the kernel's source with exact
edits (CPU), compile for sm_90 without their math (fbtriton), and the timing itself needs a GPU."""

import pytest
import torch

from benchmarks import tlx_fwd_bound


@pytest.mark.parametrize("variant", sorted(tlx_fwd_bound.VARIANTS))
def test_variants_edit_the_kernel_once_each(variant):
    real = tlx_fwd_bound.KERNEL.read_text()
    text = tlx_fwd_bound.edited_source(variant)
    assert tlx_fwd_bound.IDLE_ALWAYS in text and tlx_fwd_bound.IDLE_CHOICE not in text
    assert tlx_fwd_bound.IDLE_PINGPONG_IF_ANY in text
    # nostore drops the epilogue's one store call; nomath keeps it
    assert text.count("_store_o_lse(desc_o,") == real.count("_store_o_lse(desc_o,") - (variant == "nostore")
    assert "def _store_o_lse(" in text


def test_an_edit_whose_text_moved_fails_loudly():
    text = tlx_fwd_bound.KERNEL.read_text().replace(tlx_fwd_bound.IDLE_CHOICE, "")
    with pytest.raises(RuntimeError, match=r"nomath: the text to replace occurs 0 times in tlx_hopper_fwd\.py"):
        tlx_fwd_bound.edited_source("nomath", text)
    with pytest.raises(ValueError, match="variant: expected one of"):
        tlx_fwd_bound.edited_source("nothing")


def test_variant_compiles_without_wgmma():
    # the edited kernel, imported as a module of its own, for sm_90 (compiled, not interpreted)
    pytest.importorskip("triton.language.extra.tlx")
    from tests.kernels.compiled_subprocess import run_without_interpreter

    done = run_without_interpreter(["-m", "benchmarks.tlx_compile_check", "--bound", "nomath", "--only",
                                    "d128 bf16 causal=0 window=0 bcast=1 q128 G2 BN32 short split"], timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("fwd ")]
    assert len(lines) == 2 and all("HGMMA=0 " in line and "STL/LDL=0/0" in line for line in lines), lines


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_timing_needs_a_gpu():
    with pytest.raises(SystemExit, match="tlx_fwd_bound needs a CUDA device"):
        tlx_fwd_bound.main(["--rounds", "1"])
