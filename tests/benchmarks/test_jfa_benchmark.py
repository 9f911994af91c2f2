"""The CPU-checkable parts of the JFA benchmark: workloads, cost model, baselines, reports."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from benchmarks import jfa as bench
from benchmarks.jfa_baselines import BASELINES, FLEX_BLOCK, document_block_mask
from benchmarks.jfa_workloads import (
    ISSUE_WORKLOADS,
    PEAK_BYTES_PER_S,
    PEAK_FLOPS,
    Lengths,
    Workload,
    cost,
    make_inputs,
    sample_lengths,
)
from kernels import jagged_flash_attention


def test_issue_workloads() -> None:
    names = [w.name for w in ISSUE_WORKLOADS]
    assert len(names) == len(set(names)) == 8
    pma = [(w.batch, w.max_len, w.heads, w.q_len, w.fill) for w in ISSUE_WORKLOADS if w.kind == "pma"]
    assert pma == [(1024, 1000, 3, 192, f) for f in (0.1, 0.5, 0.9)] + [(768, 1024, 4, 128, f) for f in (0.1, 0.5, 0.9)]
    selfs = [(w.batch, w.max_len, w.heads, w.fill, w.causal) for w in ISSUE_WORKLOADS if w.kind == "self"]
    assert selfs == [(768, 1024, 4, 0.5, False), (768, 1024, 4, 1.0, False)]
    assert all(w.head_dim == 128 and w.dtype == torch.bfloat16 for w in ISSUE_WORKLOADS)


@pytest.mark.parametrize("fill,low,high", [(0.1, 1, 200), (0.5, 1, 1000), (0.9, 800, 1000), (1.0, 1000, 1000)])
def test_sample_lengths_follow_the_fill_semantics(fill: float, low: int, high: int) -> None:
    lengths = sample_lengths(20000, 1000, fill, torch.Generator().manual_seed(0))
    assert lengths.dtype == torch.int64 and int(lengths.min()) == low and int(lengths.max()) == high
    assert lengths.float().mean().item() / 1000 == pytest.approx(fill, abs=0.01)


def test_cost_counts_flops_and_minimal_bytes() -> None:
    workload = Workload("pma", batch=2, max_len=10, heads=3, fill=0.5, q_len=4, head_dim=16)
    lengths = Lengths(q=torch.tensor([4, 4]), kv=torch.tensor([5, 10]))
    c = cost(workload, lengths)
    assert c.fwd_flops == 4 * 3 * 16 * (4 * 5 + 4 * 10)
    assert c.fwd_bwd_flops == 3.5 * c.fwd_flops
    row = 3 * 16 * 2  # bf16 [H, D]
    q, kv, out, lse = 4 * row, 2 * 15 * row, 8 * row, 8 * 3 * 4
    assert c.fwd_bytes == q + kv + out + lse
    assert c.fwd_bwd_bytes == c.fwd_bytes + (q + kv + 2 * out + lse) + (q + kv)
    assert c.floor_ms("fwd") == pytest.approx(max(c.fwd_flops / PEAK_FLOPS, c.fwd_bytes / PEAK_BYTES_PER_S) * 1e3)


def test_issue_floor_matches_the_issue_for_pma() -> None:
    """Issue 5 quotes forward floors of 0.072 / 0.219 / 0.365 ms for PMA q=192."""
    for workload, expected in zip(ISSUE_WORKLOADS[:3], (0.072, 0.219, 0.365)):
        floor = cost(workload, Lengths.sample(workload)).floor_ms("fwd")
        assert floor == pytest.approx(expected, rel=0.05)


# -----------------------------------------------------------------------------------------------
# Baselines compute the JFA function (CPU, float32; varlen needs CUDA)
# -----------------------------------------------------------------------------------------------

SMALL_WORKLOADS = [
    Workload("pma", 5, 300, 2, 0.5, q_len=130, head_dim=16, dtype=torch.float32),
    Workload("self", 4, 300, 2, 0.9, head_dim=16, dtype=torch.float32),
    Workload("self", 4, 300, 2, 0.3, head_dim=16, causal=True, dtype=torch.float32),
]


@pytest.mark.parametrize("baseline", ["flex", "sdpa_padded", "varlen"])
@pytest.mark.parametrize("workload", SMALL_WORKLOADS, ids=lambda w: w.name)
def test_baseline_matches_reference(baseline: str, workload: Workload) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if baseline == "varlen":
        if device == "cpu":
            pytest.skip("varlen_attn needs CUDA")
        workload = Workload(**{**workload.__dict__, "dtype": torch.bfloat16})
    inputs = make_inputs(workload, Lengths.sample(workload, seed=1), device)
    with_grads = not (baseline == "flex" and device == "cpu")  # FlexAttention has no CPU backward
    for x in inputs.leaves():
        x.requires_grad_(with_grads)
    expected = jagged_flash_attention(
        inputs.query, inputs.key, inputs.value, inputs.query_offset, inputs.key_offset, inputs.max_seq_len_q,
        inputs.max_seq_len_kv, causal=inputs.causal, broadcast_q=inputs.broadcast_q, backend="reference",
    )  # fmt: skip
    actual = BASELINES[baseline](inputs)()
    tolerance = 2e-2 if workload.dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(actual.float(), expected.float(), rtol=tolerance, atol=tolerance)
    if not with_grads:
        return
    grad = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, inputs.leaves(), grad)
    for a, e in zip(torch.autograd.grad(actual, inputs.leaves(), grad), expected_grads):
        torch.testing.assert_close(a.float(), e.float(), rtol=2 * tolerance, atol=2 * tolerance)


@pytest.mark.parametrize("workload", SMALL_WORKLOADS, ids=lambda w: w.name)
def test_flex_block_mask_lists_exactly_the_blocks_with_visible_pairs(workload: Workload) -> None:
    inputs = make_inputs(workload, Lengths.sample(workload, seed=2), "cpu")
    block_mask = document_block_mask(inputs)
    q_lengths, kv_lengths = inputs.lengths.q, inputs.lengths.kv
    q_doc = torch.repeat_interleave(torch.arange(len(q_lengths)), q_lengths)
    kv_doc = torch.repeat_interleave(torch.arange(len(kv_lengths)), kv_lengths)
    q_pos = torch.arange(len(q_doc)) - (torch.cumsum(q_lengths, 0) - q_lengths)[q_doc]
    kv_pos = torch.arange(len(kv_doc)) - (torch.cumsum(kv_lengths, 0) - kv_lengths)[kv_doc]
    visible = q_doc[:, None] == kv_doc[None, :]
    if workload.causal:
        visible &= kv_pos[None, :] <= q_pos[:, None]
    q_blocks, kv_blocks = -(-len(q_doc) // FLEX_BLOCK), -(-len(kv_doc) // FLEX_BLOCK)

    def per_block(padding: bool) -> torch.Tensor:  # rows/columns past the sequences hold `padding`
        padded = torch.full((q_blocks * FLEX_BLOCK, kv_blocks * FLEX_BLOCK), padding)
        padded[: len(q_doc), : len(kv_doc)] = visible
        return padded.unflatten(0, (q_blocks, FLEX_BLOCK)).unflatten(2, (kv_blocks, FLEX_BLOCK))

    any_visible, all_visible = per_block(False).any(dim=(1, 3)), per_block(True).all(dim=(1, 3))

    def listed(num: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        dense = torch.zeros(q_blocks, kv_blocks, dtype=torch.bool)
        for i in range(q_blocks):
            dense[i, indices[0, 0, i, : num[0, 0, i]].long()] = True
        return dense

    partial = listed(block_mask.kv_num_blocks, block_mask.kv_indices)
    full = listed(block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
    assert torch.equal(partial | full, any_visible), "every block with a visible pair, and only those"
    assert not (partial & full).any()
    assert bool(all_visible[full].all()), "a full block needs no mask"


# -----------------------------------------------------------------------------------------------
# Reports
# -----------------------------------------------------------------------------------------------


def _results() -> list[bench.Result]:
    ok = bench.Result("pma_q128_fill0.5", "fwd", "triton", ms=0.5, tflops=100.0, gbps=2000.0, floor_ms=0.2,
                      x_floor=2.5, speedup_vs_best_baseline=1.5, peak_mib=10.0, max_abs_diff=0.0)  # fmt: skip
    baseline = bench.Result("pma_q128_fill0.5", "fwd", "varlen", ms=0.75, floor_ms=0.2, x_floor=3.75)
    failed = bench.Result("pma_q128_fill0.5", "fwd+bwd", "flex", status="out of memory", floor_ms=0.8)
    return [ok, baseline, failed]


def test_speedups_are_relative_to_the_best_baseline() -> None:
    results = _results()
    bench._add_speedups(results)
    assert results[0].speedup_vs_best_baseline == pytest.approx(1.5)
    assert results[1].speedup_vs_best_baseline == pytest.approx(1.0)
    assert math.isnan(results[2].speedup_vs_best_baseline)


def test_failure_status_names_why() -> None:
    unsupported = ValueError("backend: 'tlx' cannot serve this call: tlx needs CUDA tensors")
    assert bench._failure_status(unsupported) == "unsupported: tlx needs CUDA tensors"
    assert bench._failure_status(RuntimeError("boom\nmore")) == "error: RuntimeError: boom"


def test_reports_round_trip(tmp_path: Path) -> None:
    results = _results()
    bench.write_csv(results, tmp_path / "r.csv")
    again = bench.read_csv(tmp_path / "r.csv")
    assert [(r.workload, r.passes, r.method, r.status) for r in again] == [
        (r.workload, r.passes, r.method, r.status) for r in results
    ]
    assert again[0].ms == 0.5 and math.isnan(again[2].ms)
    table = bench.markdown(results, "# header")
    assert "## Forward\n" in table and "## Forward + backward" in table and "| out of memory |" in table
    bench.plot(results, tmp_path / "r.png", "title")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_quick_selection_takes_one_workload_per_family() -> None:
    chosen = bench._select_workloads(None, quick=True)
    assert {(w.kind, w.q_len) for w in chosen} == {("pma", 192), ("pma", 128), ("self", 0)}
    assert bench._select_workloads(["self"], quick=False) == [w for w in ISSUE_WORKLOADS if w.kind == "self"]


def test_gem_base_patterns_select_the_models_own_attention_shapes() -> None:
    from benchmarks.jfa_workloads import MODEL_WORKLOADS

    chosen = bench._select_workloads(["gem_base_self"], quick=False)
    assert [w.name for w in chosen] == ["gem_base_self_B1024_L1000_H4_fill0.1", "gem_base_self_B1024_L1000_H4_fill0.5"]
    assert all(w in MODEL_WORKLOADS for w in chosen)
    # the issue's patterns never pull in the model's shapes, and vice versa
    assert all(not w.family for w in bench._select_workloads(["fill0.1"], quick=False))
    assert bench._select_workloads(["gem_base", "pma_q192"], quick=False) == [
        *[w for w in ISSUE_WORKLOADS if w.q_len == 192], *MODEL_WORKLOADS]
    with pytest.raises(SystemExit, match="no workload matches"):
        bench._select_workloads(["gem_base_q999"], quick=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_profile_row_accounts_for_the_call() -> None:
    """benchmarks.jfa_profile: one row per (method, pass) with positive wall, host and device times."""
    from benchmarks.jfa_profile import profile

    workload = Workload("pma", 8, 300, 2, 0.5, q_len=64, head_dim=64)
    inputs = make_inputs(workload, Lengths.sample(workload), "cuda")
    row = profile("triton", inputs, "fwd+bwd", calls=3)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["triton", "fwd+bwd"]
    wall, host, device, kernels = float(cells[2]), float(cells[3]), float(cells[4]), int(cells[5])
    assert wall > 0 and host > 0 and device > 0 and kernels >= 3  # forward, delta, dK/dV, dQ at least


def test_host_profile_names_the_functions_that_take_the_host_time() -> None:
    from benchmarks.jfa_profile import host_profile

    def slow_part() -> int:
        total = 0
        for i in range(50_000):  # own time, no builtins under it
            total += i * i
        return total

    lines = host_profile(lambda: slow_part(), calls=3, top=5).splitlines()
    split = lines.index("    -- by cumulative time")
    assert lines[0] == "    -- by own time" and 2 <= split <= 6
    by_own, by_cum = lines[1:split], lines[split + 1:]
    assert "slow_part" in by_own[0]  # the most own time comes first
    own = [float(line.split()[0]) for line in by_own]
    assert own == sorted(own, reverse=True) and own[0] > 0
    cum = [float(line.split()[3]) for line in by_cum]
    assert 1 <= len(by_cum) <= 5 and cum == sorted(cum, reverse=True)
    assert any("slow_part" in line and "1.0 calls" in line for line in by_cum)


@pytest.mark.parametrize("workload", SMALL_WORKLOADS, ids=lambda w: w.name)
def test_self_attention_inputs_share_one_offsets_tensor_as_the_model_passes_them(workload: Workload) -> None:
    inputs = make_inputs(workload, Lengths.sample(workload, seed=3), "cpu")
    if workload.kind == "pma":
        assert inputs.query_offset is None
    else:
        assert inputs.query_offset is inputs.key_offset


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runtime_calls_show_a_step_that_waits_for_the_gpu() -> None:
    """benchmarks.jfa_profile.runtime_calls: a copy to the host inside the step shows as its runtime calls."""
    from benchmarks.jfa_profile import runtime_calls

    x = torch.randn(1 << 20, device="cuda")
    listing = runtime_calls(lambda: (x * 2).sum().item(), calls=3)
    assert "cudaMemcpyAsync" in listing or "cudaStreamSynchronize" in listing, listing
    assert "cudaMemcpyAsync" not in runtime_calls(lambda: x.mul_(1.0), calls=3)
