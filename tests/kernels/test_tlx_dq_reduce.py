"""`_jfa_dq_reduce_kernel` (plain Triton inside the TLX backward module) against torch sums.

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
