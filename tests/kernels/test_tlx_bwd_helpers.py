"""The TLX backward's plain-Triton helpers (`_jfa_bwd_preprocess_kernel`: delta, the fused dQ's
zeroing, the TMA-loaded row statistics; `_jfa_dq_reduce_kernel`) against torch.

Runs where fbtriton (TLX) imports: on an sm_90 GPU, or on the CPU under TRITON_INTERPRET=1 (the
fbtriton interpreter); skipped otherwise (the module imports TLX).
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("triton.language.extra.tlx")
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() or INTERPRET),
                                reason="needs a GPU or TRITON_INTERPRET=1")


def _reduce(part, q_len, H, G, cpp, rows_per_cta, n_pairs, d):
    import triton

    from kernels.tlx_hopper_bwd import _jfa_dq_reduce_kernel

    dq = torch.full((q_len, H, d), float("nan"), device=DEVICE)
    _jfa_dq_reduce_kernel[(triton.cdiv(rows_per_cta, 64), n_pairs)](
        part, dq, q_len, H, G, cpp, rows_per_cta, HEAD_DIM=d, BLOCK_R=64)
    return dq.cpu()


def test_dq_pass_partials_per_q_head_and_block():
    # resident dq pass: CTAs pair*cpp + c own (q head h, q-block mb), pair = mb*H + h; BLOCK_M rows
    H, num_mb, cpp, bm, q_len, d = 3, 2, 2, 128, 200, 64
    part = torch.randn(H * num_mb * cpp * bm, 1, d, device=DEVICE)
    dq = _reduce(part, q_len, H, 1, cpp, bm, H * num_mb, d)
    p = part.cpu().double().view(num_mb, H, cpp, bm, d)           # [mb, h, c, r, d]
    want = p.sum(2).permute(0, 2, 1, 3).reshape(num_mb * bm, H, d)[:q_len]
    torch.testing.assert_close(dq.double(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("q_len", [192, 100, 300])
def test_head_resident_partials_per_kv_head(q_len):
    # fused dK/dV pass, broadcast Q: CTAs hk*cpp + c own KV head hk; G q heads per CTA, q_len rows
    hq, hkv, cpp, d = 4, 2, 3, 128
    G = hq // hkv
    part = torch.randn(hkv * cpp * q_len, G, d, device=DEVICE)
    dq = _reduce(part, q_len, hq, G, cpp, q_len, hq, d)
    p = part.cpu().double().view(hkv, cpp, q_len, G, d)           # [hk, c, i, g, d]
    want = p.sum(1).permute(1, 0, 2, 3).reshape(q_len, hq, d)     # head h = hk*G + g
    torch.testing.assert_close(dq.double(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("zero_dq,write_stats", [(False, False), (True, False), (False, True)])
def test_preprocess_delta_zeroing_and_row_stats(zero_dq, write_stats):
    import math

    import triton

    from kernels.tlx_hopper_bwd import _jfa_bwd_preprocess_kernel

    rows, H, d = 150, 3, 64                      # rows not a multiple of the 64-row block
    o = torch.randn(rows, H, d, device=DEVICE, dtype=torch.bfloat16)
    do = torch.randn(rows, H, d, device=DEVICE, dtype=torch.bfloat16)
    lse = torch.randn(H, rows, device=DEVICE)
    lse[1, 7] = lse[2, 149] = float("-inf")      # rows that see no key
    delta = torch.full((H, rows), float("nan"), device=DEVICE)
    dq_acc = torch.full((rows, H, d), float("nan"), device=DEVICE)
    stride = triton.cdiv(rows, 4) * 4 + 4        # padded rows, one extra group to see untouched
    stats = torch.full((2 * H, stride), float("nan"), device=DEVICE)
    _jfa_bwd_preprocess_kernel[(triton.cdiv(rows, 64), H)](
        o, do, delta, dq_acc, lse, stats, rows, stride, H, HEAD_DIM=d, BLOCK_R=64, ZERO_DQ=zero_dq,
        WRITE_STATS=write_stats)
    want = (o.double() * do.double()).sum(-1).t().cpu()
    torch.testing.assert_close(delta.cpu().double(), want, rtol=1e-5, atol=1e-4)
    if zero_dq:
        assert torch.equal(dq_acc.cpu(), torch.zeros(rows, H, d))
    else:
        assert dq_acc.isnan().all()                # untouched without ZERO_DQ
    stats = stats.cpu()
    if write_stats:
        lse2 = torch.where(lse.cpu() == float("-inf"), float("inf"), lse.cpu() * (1 / math.log(2)))
        torch.testing.assert_close(stats[:H, :rows], lse2, rtol=1e-6, atol=1e-6)
        assert stats[1, 7] == float("inf") and stats[2, 149] == float("inf")
        torch.testing.assert_close(stats[H:, :rows].double(), want, rtol=1e-5, atol=1e-4)
        assert stats[:, rows:].isnan().all()       # padding not written
    else:
        assert stats.isnan().all()
