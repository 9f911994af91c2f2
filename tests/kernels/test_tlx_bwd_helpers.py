"""The TLX backward's plain-Triton helpers (`_jfa_bwd_preprocess_kernel`: delta, the fused dQ's
zeroing; `_jfa_dq_reduce_kernel`) against torch.

Runs where fbtriton (TLX) imports: on an sm_90 GPU, or on the CPU under TRITON_INTERPRET=1 (the
fbtriton interpreter); skipped otherwise (the module imports TLX).
"""

from __future__ import annotations

import pytest
import torch

from tests.kernels.plain_triton import DEVICE, needs_gpu_or_interpreter

pytest.importorskip("triton.language.extra.tlx")
pytestmark = needs_gpu_or_interpreter


@pytest.mark.parametrize("cpp", [1, 5, 8, 11])   # CTAs per pair: below, at and past the stages
def test_dq_pass_partials_per_q_head_and_block(cpp):
    # resident passes: CTAs pair*cpp + c own (q head h, q-block mb), pair = mb*H + h; BLOCK_M rows,
    # summed in CTA order whatever the pipelining (bit-identical to a sequential fp32 sum)
    from kernels.tlx_hopper import _reduce_dq_partials

    H, num_mb, bm, q_len, d = 3, 2, 128, 200, 64
    part = torch.randn(H * num_mb * cpp * bm, 1, d, device=DEVICE)
    dq = torch.full((q_len, H, d), float("nan"), device=DEVICE)
    _reduce_dq_partials(part, dq, q_len, H, cpp, bm, H * num_mb)
    p = part.cpu().view(num_mb, H, cpp, bm, d)                    # [mb, h, c, r, d]
    want = p[:, :, 0].clone()
    for c in range(1, cpp):
        want += p[:, :, c]
    want = want.permute(0, 2, 1, 3).reshape(num_mb * bm, H, d)[:q_len]
    assert torch.equal(dq.cpu(), want)


@pytest.mark.parametrize("zero_dq", [False, True])
def test_preprocess_delta_and_zeroing(zero_dq):
    import triton

    from kernels.tlx_hopper_bwd import _jfa_bwd_preprocess_kernel

    rows, H, d = 150, 3, 64                      # rows not a multiple of the 64-row block
    o = torch.randn(rows, H, d, device=DEVICE, dtype=torch.bfloat16)
    do = torch.randn(rows, H, d, device=DEVICE, dtype=torch.bfloat16)
    delta = torch.full((H, rows), float("nan"), device=DEVICE)
    dq_acc = torch.full((rows, H, d), float("nan"), device=DEVICE)
    _jfa_bwd_preprocess_kernel[(triton.cdiv(rows, 64), H)](
        o, do, delta, dq_acc, rows, H, HEAD_DIM=d, BLOCK_R=64, ZERO_DQ=zero_dq)
    want = (o.double() * do.double()).sum(-1).t().cpu()
    torch.testing.assert_close(delta.cpu().double(), want, rtol=1e-5, atol=1e-4)
    if zero_dq:
        assert torch.equal(dq_acc.cpu(), torch.zeros(rows, H, d))
    else:
        assert dq_acc.isnan().all()                # untouched without ZERO_DQ
