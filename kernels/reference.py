"""Reference JFA backend: plain PyTorch, any device, float32 math, one batch element at a time.

The readable statement of what every other backend computes, and the fallback of ``backend="auto"``
when no kernel backend serves a call. It reads the offsets on the host (a device sync on GPU) and
materialises each sequence's full score matrix: an oracle, not a fast path.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from kernels.common import JFAParams, num_sequences, output_rows, visible_key_range

_COMPUTE_DTYPE = torch.float32


def supports(query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str | None:
    return None  # every call the front door accepts


def _sequences(
    query: Tensor, query_offset: Tensor | None, key_offset: Tensor, params: JFAParams
) -> Iterator[tuple[slice, slice, slice]]:
    """Per batch element: (query rows, key/value rows, output rows)."""
    kv_bounds = key_offset.tolist()
    if params.broadcast_q:
        q_len = query.shape[0]
        q_bounds = [b * q_len for b in range(len(kv_bounds))]
    else:
        q_bounds = query_offset.tolist()
    for b in range(num_sequences(key_offset)):
        out_rows = slice(q_bounds[b], q_bounds[b + 1])
        q_rows = slice(0, query.shape[0]) if params.broadcast_q else out_rows
        yield q_rows, slice(kv_bounds[b], kv_bounds[b + 1]), out_rows


def _probabilities(
    q_LHD: Tensor, k_SHD: Tensor, lse_HL: Tensor | None, params: JFAParams
) -> tuple[Tensor, Tensor]:
    """Softmax probabilities ``p [H, L, S]`` of one sequence (zero where masked) and their LSE.

    ``k_SHD`` already has the query's head count. Given ``lse_HL`` (backward), P is recomputed
    from it, as the kernels do.
    """
    scores_HLS = torch.einsum("lhd,shd->hls", q_LHD, k_SHD) * params.sm_scale
    q_pos = torch.arange(q_LHD.shape[0], device=q_LHD.device)
    kv_pos = torch.arange(k_SHD.shape[0], device=q_LHD.device)
    lo, hi = visible_key_range(q_pos, k_SHD.shape[0], params.causal, params.window_size)
    visible_LS = (kv_pos >= lo[:, None]) & (kv_pos < hi[:, None])
    scores_HLS = scores_HLS.masked_fill(~visible_LS, float("-inf"))
    if lse_HL is None:
        lse_HL = torch.logsumexp(scores_HLS, dim=-1)
    # Rows without a visible key have lse = -inf; exp(-inf - 0) = 0 keeps them NaN-free.
    finite_lse_HL = torch.where(torch.isinf(lse_HL), 0.0, lse_HL)
    return torch.exp(scores_HLS - finite_lse_HL[..., None]), lse_HL


def _expand_kv_heads(x_SHD: Tensor, num_q_heads: int) -> Tensor:
    """GQA: key/value head g serves query heads g*G ... g*G+G-1."""
    return x_SHD.repeat_interleave(num_q_heads // x_SHD.shape[1], dim=1)


def _sum_kv_heads(dx_SHD: Tensor, num_kv_heads: int) -> Tensor:
    """Adjoint of :func:`_expand_kv_heads`: sum the gradients of each query-head group."""
    seq, num_q_heads, dim = dx_SHD.shape
    return dx_SHD.view(seq, num_kv_heads, num_q_heads // num_kv_heads, dim).sum(dim=2)


def forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    params: JFAParams,
) -> tuple[Tensor, Tensor]:
    num_q_heads, head_dim = query.shape[1], query.shape[2]
    total_out = output_rows(query, key_offset, params.broadcast_q)
    out = query.new_zeros((total_out, num_q_heads, head_dim))
    lse = query.new_full((num_q_heads, total_out), float("-inf"), dtype=torch.float32)
    for q_rows, kv_rows, out_rows in _sequences(query, query_offset, key_offset, params):
        q = query[q_rows].to(_COMPUTE_DTYPE)
        k = _expand_kv_heads(key[kv_rows].to(_COMPUTE_DTYPE), num_q_heads)
        v = _expand_kv_heads(value[kv_rows].to(_COMPUTE_DTYPE), num_q_heads)
        p_HLS, lse_HL = _probabilities(q, k, None, params)
        out[out_rows] = torch.einsum("hls,shd->lhd", p_HLS, v).to(query.dtype)
        lse[:, out_rows] = lse_HL
    return out, lse


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
    num_q_heads, num_kv_heads = query.shape[1], key.shape[1]
    # float32 accumulators: broadcast_q sums dq over the batch.
    dq = torch.zeros(query.shape, dtype=_COMPUTE_DTYPE, device=query.device)
    dk = torch.zeros(key.shape, dtype=_COMPUTE_DTYPE, device=key.device)
    dv = torch.zeros(value.shape, dtype=_COMPUTE_DTYPE, device=value.device)
    for q_rows, kv_rows, out_rows in _sequences(query, query_offset, key_offset, params):
        q = query[q_rows].to(_COMPUTE_DTYPE)
        k = _expand_kv_heads(key[kv_rows].to(_COMPUTE_DTYPE), num_q_heads)
        v = _expand_kv_heads(value[kv_rows].to(_COMPUTE_DTYPE), num_q_heads)
        do = grad_out[out_rows].to(_COMPUTE_DTYPE)
        p_HLS, _ = _probabilities(q, k, lse[:, out_rows], params)
        dp_HLS = torch.einsum("lhd,shd->hls", do, v)
        # dS = P * (dP - rowsum(P * dP)), the softmax Jacobian applied to dP.
        ds_HLS = p_HLS * (dp_HLS - (p_HLS * dp_HLS).sum(dim=-1, keepdim=True))
        dq[q_rows] += torch.einsum("hls,shd->lhd", ds_HLS, k) * params.sm_scale
        dk[kv_rows] += _sum_kv_heads(torch.einsum("hls,lhd->shd", ds_HLS, q) * params.sm_scale, num_kv_heads)
        dv[kv_rows] += _sum_kv_heads(torch.einsum("hls,lhd->shd", p_HLS, do), num_kv_heads)
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)
