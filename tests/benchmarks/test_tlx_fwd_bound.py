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
    # the split tile (and its shifted-tail variant), every one without its math
    assert lines[0].startswith("fwd d128 bf16 causal=0 window=0 bcast=1 q128 G2 BN32 short split (")
    assert all("HGMMA=0 " in line and "STL/LDL=0/0" in line for line in lines), lines


def test_the_variant_runs_on_its_side_of_each_round_only(monkeypatch):
    """The A/B's B side launches the variant (the kernel the forward imports at its call), the A
    side and everything after the real one (the device replaced by fakes; fbtriton for the variant's
    module)."""
    pytest.importorskip("triton.language.extra.tlx")
    from benchmarks import tlx_hopper_bench as tb
    from kernels import tlx_hopper, tlx_hopper_fwd

    real, launched, timed = tlx_hopper_fwd.jfa_fwd_kernel, [], []

    def forward(*args, **kwargs):
        launched.append(tlx_hopper_fwd.jfa_fwd_kernel)
        return torch.zeros(4), torch.zeros(4)

    def bench(fn, grads=None):
        fn()
        timed.append(launched[-1])
        return 0.9 if launched[-1] is real else 0.8

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tb, "build", lambda sh: dict(q=None, k=None, v=None, q_off=None, k_off=None))
    monkeypatch.setattr(tb, "shape_params", lambda sh, x: None)
    monkeypatch.setattr(tb, "bench", bench)
    monkeypatch.setattr(tb, "flush_us", lambda: 75.0)
    monkeypatch.setattr(tlx_hopper, "forward", forward)
    assert tlx_fwd_bound.main(["--only", "PMA q128 fill0.1", "--rounds", "2"]) == 0
    variant = launched[0]  # the zeros check runs the variant once before the rounds
    assert variant is not real and variant.fn.__module__ == "tlx_hopper_fwd_nomath"
    assert timed == [real, variant, variant, real]  # A (first), then rounds B | B A
    assert tlx_hopper_fwd.jfa_fwd_kernel is real


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_timing_needs_a_gpu():
    with pytest.raises(SystemExit, match="tlx_fwd_bound needs a CUDA device"):
        tlx_fwd_bound.main(["--rounds", "1"])


def test_kernel_file_is_loaded_as_it_is():
    # --kernel-file: another version of the kernel's source, unedited, in a module of its own
    pytest.importorskip("triton.language.extra.tlx")
    import sys
    from pathlib import Path

    from kernels import tlx_hopper_fwd

    source = tlx_fwd_bound.KERNEL.read_text() + "\n# another version of the kernel\n"
    kernel = tlx_fwd_bound.variant_kernel("file", source)
    module = sys.modules["tlx_hopper_fwd_file"]
    assert Path(module.__file__).read_text() == source
    assert kernel is module.jfa_fwd_kernel and kernel is not tlx_hopper_fwd.jfa_fwd_kernel
    assert kernel.arg_names == tlx_hopper_fwd.jfa_fwd_kernel.arg_names
