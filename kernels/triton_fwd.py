"""Portable Triton JFA forward: flash-attention online softmax over jagged sequences.

One program per (batch element, query head, query block); blocks past a sequence's end exit at
once, so no padding is read or written. The KV loop visits only blocks holding visible keys and
is peeled into masked boundary blocks and an unmasked bulk (``kv_blocks_for_q_tile``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from kernels.common import JFAParams, num_sequences, output_rows
from kernels.triton_common import (
    LOG2E,
    MASKED_SCORE,
    autotune,
    block_configs,
    dot_precision,
    kv_blocks_for_q_tile,
    load_rows,
    seq_len_bucket,
    sequence_bounds,
    store_rows,
    visible,
)

_FWD_CONFIGS = block_configs(
    (128, 64, 8, 3),
    (128, 128, 8, 3),
    (128, 64, 4, 3),  # head_dim <= 64
    (64, 64, 4, 3),
    (64, 32, 4, 4),  # also head_dim 256
)
_FWD_FP32_CONFIGS = block_configs((32, 32, 4, 2), (64, 32, 4, 2))


@triton.jit
def _attend_kv_blocks(acc, l_i, m_i, q, k_base, v_base, stride_k, stride_v, offs_m, n_begin, n_end, kv_len, window,
                      qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                      IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASKED: tl.constexpr,
                      DOT_PRECISION: tl.constexpr):  # fmt: skip
    """Online-softmax update of (acc, l_i, m_i) with the KV blocks starting in [n_begin, n_end)."""
    for n_lo in range(n_begin, n_end, BLOCK_N):
        offs_n = n_lo + tl.arange(0, BLOCK_N)
        k = load_rows(k_base, offs_n, stride_k, kv_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        # Scale the fp32 scores, not K: pre-scaling in bf16 loses precision and can overflow.
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        if MASKED:
            keep = (offs_n[None, :] < kv_len) & visible(offs_m[:, None], offs_n[None, :], window, IS_CAUSAL, HAS_WINDOW)
            s = tl.where(keep, s, MASKED_SCORE)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_rows(v_base, offs_n, stride_v, kv_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@autotune(_FWD_CONFIGS, _FWD_FP32_CONFIGS)
@triton.jit(do_not_specialize=["max_seq_len_q", "broadcast_q_len", "window"])
def _jfa_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, q_offset_ptr, kv_offset_ptr,
    stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh, stride_om, stride_oh, stride_lse_h,
    num_q_heads, max_seq_len_q, broadcast_q_len, window, qk_scale,
    q_len_bucket, kv_len_bucket,  # autotune key only
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP_SIZE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    num_m_blocks = tl.cdiv(max_seq_len_q, BLOCK_M)
    pid = tl.program_id(0)
    batch_head = pid // num_m_blocks
    m_block = num_m_blocks - 1 - pid % num_m_blocks  # last (heaviest causal) blocks first
    b = batch_head // num_q_heads
    h = batch_head % num_q_heads

    if BROADCAST_Q:
        q_start = 0
        q_len = broadcast_q_len
        out_start = b.to(tl.int64) * broadcast_q_len
    else:
        q_start, q_len = sequence_bounds(q_offset_ptr, b)
        out_start = q_start
    m_lo = m_block * BLOCK_M
    if m_lo >= q_len:
        return
    kv_start, kv_len = sequence_bounds(kv_offset_ptr, b)

    offs_m = m_lo + tl.arange(0, BLOCK_M)
    q = load_rows(q_ptr + q_start * stride_qm + h * stride_qh, offs_m, stride_qm, q_len, HEAD_DIM, BLOCK_D,
                  CHECK_ROWS=True)  # fmt: skip
    kv_h = h // GROUP_SIZE
    k_base = k_ptr + kv_start * stride_km + kv_h * stride_kh
    v_base = v_ptr + kv_start * stride_vm + kv_h * stride_vh

    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], MASKED_SCORE, dtype=tl.float32)
    lo, full_lo, full_hi, hi = kv_blocks_for_q_tile(
        m_lo, tl.minimum(m_lo + BLOCK_M, q_len), kv_len, window, IS_CAUSAL, HAS_WINDOW, BLOCK_N
    )
    acc, l_i, m_i = _attend_kv_blocks(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, offs_m, lo, full_lo,
                                      kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL, HAS_WINDOW,
                                      MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
    acc, l_i, m_i = _attend_kv_blocks(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, offs_m, full_lo,
                                      full_hi, kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL,
                                      HAS_WINDOW, MASKED=False, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
    acc, l_i, m_i = _attend_kv_blocks(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, offs_m, full_hi, hi,
                                      kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL, HAS_WINDOW,
                                      MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip

    # Rows that never saw a visible key still hold m_i == MASKED_SCORE: output 0, LSE -inf.
    seen = m_i > MASKED_SCORE
    l_safe = tl.where(seen, l_i, 1.0)
    out = tl.where(seen[:, None], acc / l_safe[:, None], 0.0)
    lse = tl.where(seen, (m_i + tl.math.log2(l_safe)) / LOG2E, float("-inf"))
    store_rows(o_ptr + out_start * stride_om + h * stride_oh, out, offs_m, stride_om, q_len, HEAD_DIM, BLOCK_D)
    tl.store(lse_ptr + h * stride_lse_h + out_start + offs_m, lse, mask=offs_m < q_len)


def forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    params: JFAParams,
) -> tuple[Tensor, Tensor]:
    num_batches = num_sequences(key_offset)
    _, num_q_heads, head_dim = query.shape
    total_out = output_rows(query, key_offset, params.broadcast_q)
    out = torch.empty((total_out, num_q_heads, head_dim), dtype=query.dtype, device=query.device)
    lse = torch.empty((num_q_heads, total_out), dtype=torch.float32, device=query.device)
    if total_out == 0:
        return out, lse

    # With broadcast_q every batch element has exactly q_len query rows.
    max_seq_len_q = query.shape[0] if params.broadcast_q else params.max_seq_len_q

    def grid(meta: dict) -> tuple[int]:
        return (num_batches * num_q_heads * triton.cdiv(max_seq_len_q, meta["BLOCK_M"]),)

    _jfa_fwd_kernel[grid](
        query, key, value, out, lse,
        key_offset if params.broadcast_q else query_offset,  # not read with broadcast_q
        key_offset,
        query.stride(0), query.stride(1), key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        out.stride(0), out.stride(1), lse.stride(0),
        num_q_heads, max_seq_len_q, query.shape[0], params.window_size or 0,
        params.sm_scale * LOG2E.value,
        seq_len_bucket(max_seq_len_q), seq_len_bucket(params.max_seq_len_kv),
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        GROUP_SIZE=num_q_heads // key.shape[1],
        IS_CAUSAL=params.causal,
        HAS_WINDOW=params.window_size is not None,
        BROADCAST_Q=params.broadcast_q,
        DOT_PRECISION=dot_precision(query.dtype == torch.float32),
    )  # fmt: skip
    return out, lse
