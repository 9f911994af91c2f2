"""The TLX forward's plain-Triton helpers walked over one tile's K/V blocks as the consumer walks
them (prologue block 0, unmasked bulk, masked tail; `kv_unmasked_range`), with the producer's
block starts (`_kv_block_start`) and the online softmax (`_softmax_block`): the shifted tail
(`FwdConfig.shift_tail`) must weigh every key of the sequence exactly once and read no row past
it, the default must weigh the same keys while reading the padded block's rows.

Runs where fbtriton (TLX) imports: on an sm_90 GPU, or on the CPU under TRITON_INTERPRET=1 (the
fbtriton interpreter); skipped otherwise (the module imports TLX).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton.language.extra.tlx")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels.tlx_hopper_fwd import _kv_block_start, _softmax_block  # noqa: E402
from kernels.tlx_schedule import kv_unmasked_range  # noqa: E402
from tests.kernels.plain_triton import DEVICE, needs_gpu_or_interpreter  # noqa: E402

pytestmark = needs_gpu_or_interpreter

ROWS = 16  # query rows of the walk (broadcast Q, no mask: the rows only index the scores)
Q_LEN = 128


@triton.jit
def _walk_tile(scores, values, out, read_end, klen, STRIDE: tl.constexpr,
               BLOCK_N: tl.constexpr, SHIFT_TAIL: tl.constexpr, ROWS: tl.constexpr,
               Q_LEN: tl.constexpr):
    """out[r] = sum over the tile's keys of softmax(scores[r]) * values, walked block by block as
    the forward's consumer does; read_end = one past the last key row any block loaded."""
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    nblk = tl.cdiv(klen, BLOCK_N)
    first_full, a, c = kv_unmasked_range(0, Q_LEN, klen, 0, 0, nblk, False, False, Q_LEN, BLOCK_N)
    m_i = tl.zeros([ROWS], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS], dtype=tl.float32)
    end = 0
    for j in range(0, nblk):
        start = _kv_block_start(0, j, klen, BLOCK_N, SHIFT_TAIL)  # the producer's load
        qk = tl.load(scores + rows[:, None] * STRIDE + (start + cols)[None, :])
        v = tl.load(values + start + cols)
        end = tl.maximum(end, start + BLOCK_N)
        if j == 0:  # the prologue: the consumer's block 0 starts at lo, unshifted
            if first_full:
                p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 1.0, rows, 0, klen, 0, False,
                                                    False, False, BLOCK_N, False)
            else:
                p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 1.0, rows, 0, klen, 0, False,
                                                    False, True, BLOCK_N, False)
        elif j < c:  # the unmasked bulk (no masked head without causal/window: a == 1)
            p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 1.0, rows, start, klen, 0, False,
                                                False, False, BLOCK_N, False)
        else:  # the masked tail, its start and first visible column as the consumer takes them
            p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 1.0, rows, start, klen, 0, False,
                                                False, True, BLOCK_N, False, j * BLOCK_N - start,
                                                SHIFT_TAIL)
        acc = acc * alpha + tl.sum(p * v[None, :], 1)
    tl.store(out + rows, acc / l_i)
    tl.store(read_end, end)


@pytest.mark.parametrize("block_n", [32, 64])
@pytest.mark.parametrize("shift", [False, True])
def test_tile_walk_weighs_each_key_once_and_the_shifted_tail_reads_none_past_the_sequence(
        block_n, shift):
    gen = torch.Generator().manual_seed(48 + block_n)
    lengths = [1, block_n - 1, block_n, block_n + 1, 2 * block_n - 1, 2 * block_n + 5, 3 * block_n]
    lengths += torch.randint(2, 4 * block_n, (4,), generator=gen).tolist()
    stride = 5 * block_n
    for klen in lengths:
        # base-2 scores as the kernel sees them (scale folded in); past klen rows the next
        # sequence would hold, poisoned so that any weight on them shows
        scores = torch.randn(ROWS, stride, generator=gen, dtype=torch.float64)
        values = torch.randn(stride, generator=gen, dtype=torch.float64)
        scores[:, klen:] = 40.0
        values[klen:] = 1e6
        out = torch.empty(ROWS, device=DEVICE)
        read_end = torch.zeros(1, dtype=torch.int32, device=DEVICE)
        _walk_tile[(1,)](scores.float().to(DEVICE), values.float().to(DEVICE), out, read_end, klen,
                         STRIDE=stride, BLOCK_N=block_n, SHIFT_TAIL=shift, ROWS=ROWS, Q_LEN=Q_LEN)
        w = torch.softmax(scores[:, :klen] * torch.log(torch.tensor(2.0, dtype=torch.float64)), 1)
        want = w @ values[:klen]
        torch.testing.assert_close(out.cpu().double(), want, rtol=1e-4, atol=1e-4,
                                   msg=lambda m: f"klen={klen}: {m}")
        padded_end = -(-klen // block_n) * block_n
        if shift and klen >= block_n:
            assert read_end.item() == klen, f"klen={klen}: the shifted tail read to {read_end.item()}"
        else:  # a sequence shorter than a block keeps its one padded block; the default reads past
            assert read_end.item() == padded_end, f"klen={klen}"
