"""benchmarks.hbm_probe: its streaming kernels read every K/V element of the jagged rows exactly
once and write O where the forward would (Triton interpreter on the CPU; the timing needs a GPU)."""

import pytest
import torch
import triton

from benchmarks.hbm_probe import _chunk_kernel, _flat_read_kernel, _jagged_read_kernel
from kernels.triton_common import INTERPRETER

pytestmark = pytest.mark.skipif(not INTERPRETER, reason="runs the kernels in Triton's interpreter")


def _inputs(H: int = 3, D: int = 16, q_len: int = 8):
    lens = torch.tensor([5, 0, 9, 1])  # empty, length-1, and rows past one 4-row block
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32)
    g = torch.Generator().manual_seed(0)
    k = torch.randn(int(lens.sum()), H, D, generator=g).to(torch.bfloat16)
    v = torch.randn(k.shape, generator=g).to(torch.bfloat16)
    # rows a kernel leaves unwritten stay NaN
    out = torch.full((len(lens) * q_len, H, D), float("nan"), dtype=torch.bfloat16)
    return lens, off, k, v, out, q_len


def _abs_sum(x: torch.Tensor) -> torch.Tensor:
    return x.float().abs().sum()


@pytest.mark.parametrize("head_major", (False, True))
def test_one_program_per_element_and_head_reads_its_rows(head_major: bool) -> None:
    lens, off, k, v, out, q_len = _inputs()
    B, H, D = len(lens), k.shape[1], k.shape[2]
    sink = torch.full((B * H,), float("nan"))
    _jagged_read_kernel[(B * H,)](k, v, off, out, sink, B, q_len, H=H, HEADS=1, D=D, BLOCK=4,
                                  HEAD_MAJOR=head_major, WRITE_O=False)
    for pid in range(B * H):
        b, h = (pid % B, pid // B) if head_major else (pid // H, pid % H)
        rows = slice(int(off[b]), int(off[b + 1]))
        want = _abs_sum(k[rows, h]) + _abs_sum(v[rows, h])
        torch.testing.assert_close(sink[pid], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("q_len", (8, 6))  # 6: the last 4-row block of O straddles q_len
def test_all_heads_program_writes_o_rows_of_its_element(q_len: int) -> None:
    lens, off, k, v, out, q_len = _inputs(q_len=q_len)
    B, H, D = len(lens), k.shape[1], k.shape[2]
    _jagged_read_kernel[(B,)](k, v, off, out, torch.empty(B), B, q_len, H=H, HEADS=H, D=D, BLOCK=4,
                              HEAD_MAJOR=False, WRITE_O=True)
    for b in range(B):
        rows = slice(int(off[b]), int(off[b + 1]))
        col = (k[rows].float().abs() + v[rows].float().abs()).sum((0, 1)).to(out.dtype)
        # the kernel sums in another order: equal up to the bf16 rounding of the result
        torch.testing.assert_close(out[b * q_len:(b + 1) * q_len], col.expand(q_len, H, D),
                                   rtol=2**-7, atol=0)


def test_flat_read_covers_every_element() -> None:
    _, _, k, v, _, _ = _inputs()
    n, block = k.numel(), 64
    sink = torch.zeros(triton.cdiv(n, block))
    _flat_read_kernel[(triton.cdiv(n, block),)](k, v, n, sink, BLOCK=block)
    torch.testing.assert_close(sink.sum(), _abs_sum(k) + _abs_sum(v), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("heads, rows_per", ((1, 4), (4, 2)))
def test_chunk_programs_read_their_stretch_and_write_o(heads: int, rows_per: int) -> None:
    lens, off, k, v, out, q_len = _inputs(H=4, q_len=6)  # 6: O's last chunk straddles q_len
    B, H, D = len(lens), k.shape[1], k.shape[2]
    n_chunks = triton.cdiv(max(int(lens.max()), q_len), rows_per)
    groups = H // heads
    sink = torch.full((B * groups * n_chunks,), float("nan"))
    _chunk_kernel[(sink.numel(),)](k, v, off, out, sink, q_len, n_chunks, H=H, HEADS=heads, D=D,
                                   ROWS=rows_per, WRITE_O=False)
    torch.testing.assert_close(sink.sum(), _abs_sum(k) + _abs_sum(v), rtol=1e-5, atol=1e-5)
    for pid in range(sink.numel()):
        c, hg, b = pid % n_chunks, (pid // n_chunks) % groups, pid // (n_chunks * groups)
        lo = int(off[b]) + min(c * rows_per, int(lens[b]))
        hi = int(off[b]) + min((c + 1) * rows_per, int(lens[b]))
        heads_of = slice(hg * heads, (hg + 1) * heads)
        want = _abs_sum(k[lo:hi, heads_of]) + _abs_sum(v[lo:hi, heads_of])
        torch.testing.assert_close(sink[pid], want, rtol=1e-5, atol=1e-5)
    _chunk_kernel[(sink.numel(),)](k, v, off, out, sink, q_len, n_chunks, H=H, HEADS=heads, D=D,
                                   ROWS=rows_per, WRITE_O=True)
    assert not out.isnan().any()  # every O row of every head written, none past q_len (no error)


def test_rows_over_slices_reads_the_chunk_pair_with_o_per_shape() -> None:
    from benchmarks.hbm_probe import rows_over_slices

    table = "\n".join([
        "GPU: x; command: python -m benchmarks.hbm_probe --only 'PMA'", "",
        "| shape | method | ms | GB | TB/s |", "|---|---|--:|--:|--:|",
        "| PMA q128 fill0.1 | flat | 0.0400 | 0.162 | 4.05 |",
        "| PMA q128 fill0.1 | chunks of one head, 64 rows | 0.0600 | 0.162 | 2.70 |",
        "| PMA q128 fill0.1 | chunks of one head, 64 rows +O | 0.0900 | 0.263 | 2.92 |",
        "| PMA q128 fill0.1 | chunks of all heads, 16 rows | 0.0500 | 0.162 | 3.24 |",
        "| PMA q128 fill0.1 | chunks of all heads, 16 rows +O | 0.0800 | 0.263 | 3.29 |",
        "| PMA q192 fill0.1 | elem-major +O | 0.1000 | 0.300 | 3.00 |",  # no chunk rows (H = 3)
    ])
    assert rows_over_slices(table) == {"PMA q128 fill0.1": 0.09 / 0.08}
