"""Reference JFA backend: plain PyTorch, any device, float32 math, every sequence at once.

The readable statement of what every other backend computes, and the fallback of ``backend="auto"``
where no kernel backend serves a call (e.g. CPU training). The jagged rows are gathered into a
padded ``[B, L, H, D]`` view of ``max_seq_len`` rows per sequence, the full masked score tensor
``[B, H, Lq, Lk]`` is materialised, and the results are scattered back to the jagged rows. Memory
is O(B·H·max_q·max_kv): an oracle and a CPU path, not a fast GPU path. No host sync: the padded
shape comes from the ``max_seq_len_*`` arguments, never from the offsets' values.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.common import JFAParams, num_sequences, output_rows, visible_key_range

_COMPUTE_DTYPE = torch.float32


def supports(query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str | None:
    return None  # every call the front door accepts


def _padded_rows(offsets: Tensor, max_len: int, total: int) -> tuple[Tensor, Tensor]:
    """Row index ``[B, L]`` of position l of sequence b (clamped when past its end) and whether
    that position exists."""
    starts, lengths = offsets[:-1].long(), (offsets[1:] - offsets[:-1]).long()
    pos = torch.arange(max_len, device=offsets.device)
    valid_BL = pos < lengths[:, None]
    rows_BL = (starts[:, None] + pos).clamp(max=max(total - 1, 0))
    return rows_BL, valid_BL


def _pad(x_THD: Tensor, rows_BL: Tensor, valid_BL: Tensor, num_heads: int) -> Tensor:
    """Jagged ``[T, H, D]`` -> zero-padded float32 ``[B, L, num_heads, D]`` (GQA heads repeated)."""
    if x_THD.shape[0] == 0:
        padded = x_THD.new_zeros((*rows_BL.shape, *x_THD.shape[1:]), dtype=_COMPUTE_DTYPE)
    else:
        padded = torch.where(valid_BL[..., None, None], x_THD.to(_COMPUTE_DTYPE)[rows_BL], 0.0)
    return padded.repeat_interleave(num_heads // x_THD.shape[1], dim=2)


class _Layout:
    """Where each sequence's query and key rows are, padded to the call's maximum lengths."""

    def __init__(self, query: Tensor, key: Tensor, query_offset: Tensor | None, key_offset: Tensor,
                 params: JFAParams) -> None:
        self.batch = num_sequences(key_offset)
        self.kv_rows, self.kv_valid = _padded_rows(key_offset, params.max_seq_len_kv, key.shape[0])
        if params.broadcast_q:
            q_len = query.shape[0]
            offsets = torch.arange(self.batch + 1, device=key_offset.device) * q_len
            self.out_rows, self.q_valid = _padded_rows(offsets, q_len, self.batch * q_len)
        else:
            self.out_rows, self.q_valid = _padded_rows(query_offset, params.max_seq_len_q, query.shape[0])
        q_pos = torch.arange(self.out_rows.shape[1], device=key.device)[None, :, None].expand(self.batch, -1, 1)
        kv_len = self.kv_valid.sum(dim=1)[:, None, None]  # [B, 1, 1]
        lo, hi = visible_key_range(q_pos, kv_len, params.causal, params.window_size)  # [B, Lq, 1]
        kv_pos = torch.arange(self.kv_rows.shape[1], device=key.device)
        visible = (kv_pos >= lo) & (kv_pos < hi) & self.q_valid[:, :, None]  # [B, Lq, Lk]
        self.visible_B1QK = visible[:, None]

    def query(self, query: Tensor, params: JFAParams) -> Tensor:
        if params.broadcast_q:
            return query.to(_COMPUTE_DTYPE).unsqueeze(0).expand(self.batch, *query.shape)
        return _pad(query, self.out_rows, self.q_valid, query.shape[1])

    def to_jagged(self, x_BLHD: Tensor, total: int) -> Tensor:
        """Scatter the valid padded rows back to jagged ``[total, H, D]``."""
        out = x_BLHD.new_zeros((total, *x_BLHD.shape[2:]))
        return out.index_put_((self.out_rows[self.q_valid],), x_BLHD[self.q_valid])

    def lse_padded(self, lse_HT: Tensor) -> Tensor:
        """``[H, total]`` -> ``[B, H, Lq]``, -inf on padding."""
        if lse_HT.shape[1] == 0:
            return lse_HT.new_full((self.batch, lse_HT.shape[0], self.out_rows.shape[1]), float("-inf"))
        padded = lse_HT[:, self.out_rows].permute(1, 0, 2)
        return padded.masked_fill(~self.q_valid[:, None, :], float("-inf"))


def _probabilities(q_BQHD: Tensor, k_BKHD: Tensor, layout: _Layout, params: JFAParams,
                   lse_BHQ: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Softmax probabilities ``[B, H, Lq, Lk]`` (zero where masked) and their LSE ``[B, H, Lq]``.
    Given ``lse_BHQ`` (backward), P is recomputed from it, as the kernels do."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q_BQHD, k_BKHD) * params.sm_scale
    scores = scores.masked_fill(~layout.visible_B1QK, float("-inf"))
    if lse_BHQ is None:
        lse_BHQ = torch.logsumexp(scores, dim=-1)
    # Rows without a visible key have lse = -inf; exp(-inf - 0) = 0 keeps them NaN-free.
    finite = torch.where(torch.isinf(lse_BHQ), 0.0, lse_BHQ)
    return torch.exp(scores - finite[..., None]), lse_BHQ


def _sum_kv_heads(dx_BKHD: Tensor, num_kv_heads: int) -> Tensor:
    """Adjoint of the GQA head repeat: sum the gradients of each query-head group."""
    b, k, num_q_heads, d = dx_BKHD.shape
    return dx_BKHD.view(b, k, num_kv_heads, num_q_heads // num_kv_heads, d).sum(dim=3)


def _scatter_kv(dx_BKHD: Tensor, layout: _Layout, like: Tensor) -> Tensor:
    dx = torch.zeros(like.shape, dtype=_COMPUTE_DTYPE, device=like.device)
    return dx.index_put_((layout.kv_rows[layout.kv_valid],), dx_BKHD[layout.kv_valid], accumulate=True)


def forward(query: Tensor, key: Tensor, value: Tensor, query_offset: Tensor | None, key_offset: Tensor,
            params: JFAParams) -> tuple[Tensor, Tensor]:
    num_q_heads = query.shape[1]
    layout = _Layout(query, key, query_offset, key_offset, params)
    q = layout.query(query, params)
    k = _pad(key, layout.kv_rows, layout.kv_valid, num_q_heads)
    v = _pad(value, layout.kv_rows, layout.kv_valid, num_q_heads)
    p, lse_BHQ = _probabilities(q, k, layout, params)
    total_out = output_rows(query, key_offset, params.broadcast_q)
    out = layout.to_jagged(torch.einsum("bhqk,bkhd->bqhd", p, v), total_out).to(query.dtype)
    lse = layout.to_jagged(lse_BHQ.permute(0, 2, 1)[..., None], total_out)[..., 0].T.contiguous()
    has_row = torch.zeros(total_out, dtype=torch.bool, device=query.device)
    has_row[layout.out_rows[layout.q_valid]] = True
    return out, lse.masked_fill(~has_row, float("-inf"))


def backward(grad_out: Tensor, query: Tensor, key: Tensor, value: Tensor, out: Tensor, lse: Tensor,
             query_offset: Tensor | None, key_offset: Tensor, params: JFAParams) -> tuple[Tensor, Tensor, Tensor]:
    num_q_heads, num_kv_heads = query.shape[1], key.shape[1]
    layout = _Layout(query, key, query_offset, key_offset, params)
    q = layout.query(query, params)
    k = _pad(key, layout.kv_rows, layout.kv_valid, num_q_heads)
    v = _pad(value, layout.kv_rows, layout.kv_valid, num_q_heads)
    do = _pad(grad_out, layout.out_rows, layout.q_valid, num_q_heads)
    p, _ = _probabilities(q, k, layout, params, layout.lse_padded(lse))
    dp = torch.einsum("bqhd,bkhd->bhqk", do, v)
    # dS = P * (dP - rowsum(P * dP)), the softmax Jacobian applied to dP.
    ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
    dq_BQHD = torch.einsum("bhqk,bkhd->bqhd", ds, k) * params.sm_scale
    if params.broadcast_q:
        dq = dq_BQHD.sum(dim=0)  # float32 sum over the batch
    else:
        dq = layout.to_jagged(dq_BQHD, query.shape[0])
    dk = _sum_kv_heads(torch.einsum("bhqk,bqhd->bkhd", ds, q) * params.sm_scale, num_kv_heads)
    dv = _sum_kv_heads(torch.einsum("bhqk,bqhd->bkhd", p, do), num_kv_heads)
    return (dq.to(query.dtype), _scatter_kv(dk, layout, key).to(key.dtype),
            _scatter_kv(dv, layout, value).to(value.dtype))
