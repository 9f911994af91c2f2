"""The timing-only dK/dV variants apply to the current kernel text, remove what they say, and stay
valid Python; a bad variant name or kernel text that has moved on fails loudly."""

from __future__ import annotations

import ast

import pytest

from benchmarks import tlx_bwd_bound_variants as variants

ORIGINAL = (variants.REPO / "kernels" / "tlx_hopper_bwd.py").read_text()


@pytest.mark.parametrize("variant", sorted(variants.VARIANTS))
def test_variant_edits_the_fused_dq_step(tmp_path, variant):
    text = variants.make_variant(tmp_path, variant).read_text()
    ast.parse(text)
    assert 'store_reduce="add"' in ORIGINAL and 'store_reduce="add"' not in text
    gemms = ORIGINAL.count("tlx.async_dot(") - text.count("tlx.async_dot(")
    barrier = "tlx.named_barrier_wait(DS_READY_BAR, 256)"
    if variant == "nodq":
        assert gemms == 2 and barrier not in text
    else:
        assert gemms == 0 and barrier in text
    assert (tmp_path / "benchmarks" / "tlx_hopper_bench.py").exists()
    # the repository's own kernel is untouched
    assert (variants.REPO / "kernels" / "tlx_hopper_bwd.py").read_text() == ORIGINAL


def test_unknown_variant_is_refused(tmp_path):
    with pytest.raises(ValueError, match="variant: expected one of"):
        variants.make_variant(tmp_path, "nodkdv")


def test_moved_kernel_text_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(variants.VARIANTS, "stale", [("no such kernel line\n", "")])
    with pytest.raises(RuntimeError, match="occurs 0 times"):
        variants.make_variant(tmp_path, "stale")
