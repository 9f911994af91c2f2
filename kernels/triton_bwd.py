"""Portable Triton JFA backward: delta preprocess, KV-stationary dK/dV kernel, Q-stationary dQ kernel.

With ``P = exp(S - lse)`` recomputed from the forward's LSE and ``delta = rowsum(dO * O)``:
``dV = P^T dO``, ``dS = P * (dO V^T - delta)``, ``dK = scale * dS^T Q``, ``dQ = scale * dS K``.

* dK/dV: one program per (batch element, KV head, KV block) keeps dK/dV in float32 registers
  across the whole query loop (all query heads of its GQA group) and writes them once.
* dQ: one program per (query head, query block, batch chunk). Without broadcast_q a chunk is one
  batch element and dQ is written directly. With broadcast_q a program sums the contributions of
  its chunk of batch elements in float32 and writes one partial; the partials are then summed in
  a fixed order. No atomics anywhere: results are bitwise reproducible.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from kernels.common import JFAParams, num_sequences, output_rows
from kernels.triton_common import (
    INTERPRETER,
    LOG2E,
    autotune,
    block_configs,
    dot_precision,
    kv_blocks_for_q_tile,
    load_rows,
    q_blocks_for_kv_tile,
    seq_len_bucket,
    sequence_bounds,
    store_rows,
    visible,
)

_DKDV_CONFIGS = block_configs(
    (64, 128, 8, 3),
    (32, 128, 8, 3),
    (64, 64, 8, 3),
    (32, 64, 4, 3),
    (32, 32, 8, 2),  # head_dim 256
)
_DKDV_FP32_CONFIGS = block_configs((32, 32, 4, 2), (32, 64, 4, 2))
_DQ_CONFIGS = block_configs(
    (128, 64, 8, 2),
    (128, 32, 8, 3),
    (64, 64, 8, 3),
    (64, 32, 4, 3),
    (64, 32, 8, 2),  # head_dim 256
)
_DQ_FP32_CONFIGS = block_configs((32, 32, 4, 2), (64, 32, 4, 2))
_DELTA_BLOCK_ROWS = 16 if INTERPRETER else 64
# Broadcast-Q dQ: aim for this many programs per SM; more batch chunks fill the GPU but add
# float32 partials to reduce.
_DQ_PROGRAMS_PER_SM = 4
_INTERPRETER_DQ_PROGRAMS = 16


@triton.jit
def _jfa_bwd_delta_kernel(o_ptr, do_ptr, delta_ptr, stride_om, stride_oh, stride_dom, stride_doh, stride_delta_h,
                          total_rows, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                          BLOCK_ROWS: tl.constexpr):  # fmt: skip
    """delta[h, row] = sum_d dO * O, in float32."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    h = tl.program_id(1)
    o = load_rows(o_ptr + h * stride_oh, rows, stride_om, total_rows, HEAD_DIM, BLOCK_D, CHECK_ROWS=True)
    do = load_rows(do_ptr + h * stride_doh, rows, stride_dom, total_rows, HEAD_DIM, BLOCK_D, CHECK_ROWS=True)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(delta_ptr + h * stride_delta_h + rows, delta, mask=rows < total_rows)


# ---------------------------------------------------------------------------------------------
# dK / dV
# ---------------------------------------------------------------------------------------------


@triton.jit
def _dkdv_q_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom, offs_n, m_begin,
                   m_end, q_len, kv_len, window, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_M: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASKED: tl.constexpr,
                   DOT_PRECISION: tl.constexpr):  # fmt: skip
    """Accumulates into dk, dv [BLOCK_N, BLOCK_D] the query blocks starting in [m_begin, m_end)."""
    for m_lo in range(m_begin, m_end, BLOCK_M):
        offs_m = m_lo + tl.arange(0, BLOCK_M)
        q = load_rows(q_base, offs_m, stride_qm, q_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        do = load_rows(do_base, offs_m, stride_dom, q_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        if MASKED:
            lse_log2 = tl.load(lse_base + offs_m, mask=offs_m < q_len, other=0.0) * LOG2E
            delta = tl.load(delta_base + offs_m, mask=offs_m < q_len, other=0.0)
        else:
            lse_log2 = tl.load(lse_base + offs_m) * LOG2E
            delta = tl.load(delta_base + offs_m)
        s_t = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_N, BLOCK_M]
        p_t = tl.math.exp2(s_t - lse_log2[None, :])
        if MASKED:
            # A select, not a product: masked rows may have lse = -inf (p = inf) or be garbage.
            keep = (offs_m[None, :] < q_len) & (offs_n[:, None] < kv_len)
            keep = keep & visible(offs_m[None, :], offs_n[:, None], window, IS_CAUSAL, HAS_WINDOW)
            p_t = tl.where(keep, p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=DOT_PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=DOT_PRECISION)
    return dk, dv


@autotune(_DKDV_CONFIGS, _DKDV_FP32_CONFIGS)
@triton.jit(do_not_specialize=["max_seq_len_kv", "broadcast_q_len", "window"])
def _jfa_bwd_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, q_offset_ptr, kv_offset_ptr,
    stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh, stride_dom, stride_doh, stride_lse_h,
    stride_dkm, stride_dkh, stride_dvm, stride_dvh,
    num_kv_heads, max_seq_len_kv, broadcast_q_len, window, qk_scale, sm_scale,
    q_len_bucket, kv_len_bucket,  # autotune key only
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP_SIZE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    num_n_blocks = tl.cdiv(max_seq_len_kv, BLOCK_N)
    pid = tl.program_id(0)
    batch_head = pid // num_n_blocks
    n_block = pid % num_n_blocks
    b = batch_head // num_kv_heads
    kv_h = batch_head % num_kv_heads

    kv_start, kv_len = sequence_bounds(kv_offset_ptr, b)
    n_lo = n_block * BLOCK_N
    if n_lo >= kv_len:
        return
    if BROADCAST_Q:
        q_start = 0
        q_len = broadcast_q_len
        out_start = b.to(tl.int64) * broadcast_q_len
    else:
        q_start, q_len = sequence_bounds(q_offset_ptr, b)
        out_start = q_start

    offs_n = n_lo + tl.arange(0, BLOCK_N)
    k = load_rows(k_ptr + kv_start * stride_km + kv_h * stride_kh, offs_n, stride_km, kv_len, HEAD_DIM, BLOCK_D,
                  CHECK_ROWS=True)  # fmt: skip
    v = load_rows(v_ptr + kv_start * stride_vm + kv_h * stride_vh, offs_n, stride_vm, kv_len, HEAD_DIM, BLOCK_D,
                  CHECK_ROWS=True)  # fmt: skip
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    lo, full_lo, full_hi, hi = q_blocks_for_kv_tile(
        n_lo, tl.minimum(n_lo + BLOCK_N, kv_len), q_len, window, IS_CAUSAL, HAS_WINDOW, BLOCK_M
    )
    for g in range(GROUP_SIZE):  # the query heads sharing this KV head
        h = kv_h * GROUP_SIZE + g
        q_base = q_ptr + q_start * stride_qm + h * stride_qh
        do_base = do_ptr + out_start * stride_dom + h * stride_doh
        lse_base = lse_ptr + h * stride_lse_h + out_start
        delta_base = delta_ptr + h * stride_lse_h + out_start
        dk, dv = _dkdv_q_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom, offs_n,
                                lo, full_lo, q_len, kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, IS_CAUSAL,
                                HAS_WINDOW, MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
        dk, dv = _dkdv_q_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom, offs_n,
                                full_lo, full_hi, q_len, kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M,
                                IS_CAUSAL, HAS_WINDOW, MASKED=False, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
        dk, dv = _dkdv_q_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom, offs_n,
                                full_hi, hi, q_len, kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, IS_CAUSAL,
                                HAS_WINDOW, MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
    store_rows(dk_ptr + kv_start * stride_dkm + kv_h * stride_dkh, dk * sm_scale, offs_n, stride_dkm, kv_len,
               HEAD_DIM, BLOCK_D)  # fmt: skip
    store_rows(dv_ptr + kv_start * stride_dvm + kv_h * stride_dvh, dv, offs_n, stride_dvm, kv_len, HEAD_DIM, BLOCK_D)


# ---------------------------------------------------------------------------------------------
# dQ
# ---------------------------------------------------------------------------------------------


@triton.jit
def _dq_kv_blocks(dq, q, do, lse_log2, delta, k_base, v_base, stride_k, stride_v, offs_m, n_begin, n_end, kv_len,
                  window, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                  IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASKED: tl.constexpr,
                  DOT_PRECISION: tl.constexpr):  # fmt: skip
    """Accumulates into dq [BLOCK_M, BLOCK_D] the KV blocks starting in [n_begin, n_end)."""
    for n_lo in range(n_begin, n_end, BLOCK_N):
        offs_n = n_lo + tl.arange(0, BLOCK_N)
        k = load_rows(k_base, offs_n, stride_k, kv_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        v = load_rows(v_base, offs_n, stride_v, kv_len, HEAD_DIM, BLOCK_D, CHECK_ROWS=MASKED)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        p = tl.math.exp2(s - lse_log2[:, None])
        if MASKED:
            keep = (offs_n[None, :] < kv_len) & visible(offs_m[:, None], offs_n[None, :], window, IS_CAUSAL, HAS_WINDOW)
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PRECISION)
    return dq


@autotune(_DQ_CONFIGS, _DQ_FP32_CONFIGS)
@triton.jit(do_not_specialize=["max_seq_len_q", "broadcast_q_len", "window", "batches_per_program"])
def _jfa_bwd_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, q_offset_ptr, kv_offset_ptr,
    stride_qm, stride_qh, stride_km, stride_kh, stride_vm, stride_vh, stride_dom, stride_doh, stride_lse_h,
    stride_dqm, stride_dqh,
    num_q_heads, num_batches, batches_per_program, max_seq_len_q, broadcast_q_len, window, qk_scale, sm_scale,
    q_len_bucket, kv_len_bucket,  # autotune key only
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, GROUP_SIZE: tl.constexpr, IS_CAUSAL: tl.constexpr,
    HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    num_m_blocks = tl.cdiv(max_seq_len_q, BLOCK_M)
    pid = tl.program_id(0)
    chunk_head = pid // num_m_blocks
    m_block = num_m_blocks - 1 - pid % num_m_blocks  # last (heaviest causal) blocks first
    chunk = chunk_head // num_q_heads
    h = chunk_head % num_q_heads
    kv_h = h // GROUP_SIZE
    first_batch = chunk * batches_per_program
    last_batch = tl.minimum(first_batch + batches_per_program, num_batches)

    if BROADCAST_Q:
        q_start = 0
        q_len = broadcast_q_len
        dq_start = chunk.to(tl.int64) * broadcast_q_len  # this chunk's float32 partial
    else:  # one batch element per chunk
        q_start, q_len = sequence_bounds(q_offset_ptr, first_batch)
        dq_start = q_start
    m_lo = m_block * BLOCK_M
    if m_lo >= q_len:
        return

    offs_m = m_lo + tl.arange(0, BLOCK_M)
    q = load_rows(q_ptr + q_start * stride_qm + h * stride_qh, offs_m, stride_qm, q_len, HEAD_DIM, BLOCK_D,
                  CHECK_ROWS=True)  # fmt: skip
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for b in range(first_batch, last_batch):
        if BROADCAST_Q:
            out_start = broadcast_q_len.to(tl.int64) * b  # b is a plain int under the interpreter
        else:
            out_start = q_start
        kv_start, kv_len = sequence_bounds(kv_offset_ptr, b)
        do = load_rows(do_ptr + out_start * stride_dom + h * stride_doh, offs_m, stride_dom, q_len, HEAD_DIM,
                       BLOCK_D, CHECK_ROWS=True)  # fmt: skip
        row_mask = offs_m < q_len
        lse_log2 = tl.load(lse_ptr + h * stride_lse_h + out_start + offs_m, mask=row_mask, other=0.0) * LOG2E
        delta = tl.load(delta_ptr + h * stride_lse_h + out_start + offs_m, mask=row_mask, other=0.0)
        k_base = k_ptr + kv_start * stride_km + kv_h * stride_kh
        v_base = v_ptr + kv_start * stride_vm + kv_h * stride_vh
        lo, full_lo, full_hi, hi = kv_blocks_for_q_tile(
            m_lo, tl.minimum(m_lo + BLOCK_M, q_len), kv_len, window, IS_CAUSAL, HAS_WINDOW, BLOCK_N
        )
        dq = _dq_kv_blocks(dq, q, do, lse_log2, delta, k_base, v_base, stride_km, stride_vm, offs_m, lo, full_lo,
                           kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL, HAS_WINDOW,
                           MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
        dq = _dq_kv_blocks(dq, q, do, lse_log2, delta, k_base, v_base, stride_km, stride_vm, offs_m, full_lo,
                           full_hi, kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL, HAS_WINDOW,
                           MASKED=False, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
        dq = _dq_kv_blocks(dq, q, do, lse_log2, delta, k_base, v_base, stride_km, stride_vm, offs_m, full_hi, hi,
                           kv_len, window, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, IS_CAUSAL, HAS_WINDOW,
                           MASKED=True, DOT_PRECISION=DOT_PRECISION)  # fmt: skip
    store_rows(dq_ptr + dq_start * stride_dqm + h * stride_dqh, dq * sm_scale, offs_m, stride_dqm, q_len, HEAD_DIM,
               BLOCK_D)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Launcher
# ---------------------------------------------------------------------------------------------


def _batches_per_dq_program(num_batches: int, q_len: int, num_q_heads: int, device: torch.device) -> int:
    """Broadcast-Q dQ: batch elements per program, so that heads x q-blocks x chunks fills the
    device. A function of shapes and device only, hence the same reduction order every run."""
    if device.type == "cuda":
        target_programs = _DQ_PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target_programs = _INTERPRETER_DQ_PROGRAMS
    programs_per_chunk = num_q_heads * triton.cdiv(q_len, 64)
    num_chunks = min(max(target_programs // programs_per_chunk, 1), num_batches)
    return triton.cdiv(num_batches, num_chunks)


def backward(
    grad_out: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    out: Tensor,
    lse: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    params: JFAParams,
) -> tuple[Tensor, Tensor, Tensor]:
    num_batches = num_sequences(key_offset)
    _, num_q_heads, head_dim = query.shape
    num_kv_heads = key.shape[1]
    total_out = output_rows(query, key_offset, params.broadcast_q)
    dk = torch.empty(key.shape, dtype=key.dtype, device=key.device)
    dv = torch.empty(value.shape, dtype=value.dtype, device=value.device)
    if total_out == 0:  # no query rows: nothing flows back
        return torch.zeros_like(query, memory_format=torch.contiguous_format), dk.zero_(), dv.zero_()

    delta = torch.empty_like(lse)
    _jfa_bwd_delta_kernel[(triton.cdiv(total_out, _DELTA_BLOCK_ROWS), num_q_heads)](
        out, grad_out, delta, out.stride(0), out.stride(1), grad_out.stride(0), grad_out.stride(1), delta.stride(0),
        total_out, HEAD_DIM=head_dim, BLOCK_D=triton.next_power_of_2(head_dim), BLOCK_ROWS=_DELTA_BLOCK_ROWS,
    )  # fmt: skip

    max_seq_len_q = query.shape[0] if params.broadcast_q else params.max_seq_len_q
    q_offset = key_offset if params.broadcast_q else query_offset  # not read with broadcast_q
    common = dict(
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        GROUP_SIZE=num_q_heads // num_kv_heads,
        IS_CAUSAL=params.causal,
        HAS_WINDOW=params.window_size is not None,
        BROADCAST_Q=params.broadcast_q,
        DOT_PRECISION=dot_precision(query.dtype == torch.float32),
    )
    scales = (params.sm_scale * LOG2E.value, params.sm_scale)
    buckets = (seq_len_bucket(max_seq_len_q), seq_len_bucket(params.max_seq_len_kv))

    if key.shape[0] > 0:

        def dkdv_grid(meta: dict) -> tuple[int]:
            return (num_batches * num_kv_heads * triton.cdiv(params.max_seq_len_kv, meta["BLOCK_N"]),)

        _jfa_bwd_dkdv_kernel[dkdv_grid](
            query, key, value, grad_out, lse, delta, dk, dv, q_offset, key_offset,
            query.stride(0), query.stride(1), key.stride(0), key.stride(1), value.stride(0), value.stride(1),
            grad_out.stride(0), grad_out.stride(1), lse.stride(0), dk.stride(0), dk.stride(1), dv.stride(0),
            dv.stride(1), num_kv_heads, params.max_seq_len_kv, query.shape[0], params.window_size or 0,
            *scales, *buckets, **common,
        )  # fmt: skip

    if params.broadcast_q:
        batches_per_program = _batches_per_dq_program(num_batches, query.shape[0], num_q_heads, query.device)
        num_chunks = triton.cdiv(num_batches, batches_per_program)
        dq = torch.empty((num_chunks * query.shape[0], num_q_heads, head_dim), dtype=torch.float32, device=query.device)
    else:
        batches_per_program, num_chunks = 1, num_batches
        dq = torch.empty(query.shape, dtype=query.dtype, device=query.device)

    def dq_grid(meta: dict) -> tuple[int]:
        return (num_chunks * num_q_heads * triton.cdiv(max_seq_len_q, meta["BLOCK_M"]),)

    _jfa_bwd_dq_kernel[dq_grid](
        query, key, value, grad_out, lse, delta, dq, q_offset, key_offset,
        query.stride(0), query.stride(1), key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        grad_out.stride(0), grad_out.stride(1), lse.stride(0), dq.stride(0), dq.stride(1),
        num_q_heads, num_batches, batches_per_program, max_seq_len_q, query.shape[0], params.window_size or 0,
        *scales, *buckets, **common,
    )  # fmt: skip
    if params.broadcast_q:  # fixed-order float32 reduction of the per-chunk partials
        dq = dq.view(num_chunks, *query.shape).sum(dim=0).to(query.dtype)
    return dq, dk, dv
