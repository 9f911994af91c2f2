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
    removed = lambda snippet: ORIGINAL.count(snippet) - text.count(snippet)  # noqa: E731
    # the stepping path's reduce-add only (the ONE_STEP helper keeps its own two)
    assert removed('store_reduce="add"') == 1
    barrier = "tlx.named_barrier_wait(DS_READY_BAR, 256)"
    if variant == "nodq":
        assert removed("tlx.async_dot(") == 2 and removed(barrier) == 1
    else:
        assert removed("tlx.async_dot(") == 0 and removed(barrier) == 0
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
