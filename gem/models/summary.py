"""Sequence summarisation: turn each user's jagged sequence into a few dense tokens.

- `PoolingByAttention` (PMA): k learned query tokens, ONE dense query `[k, H, d_h]` broadcast over
  the batch (`broadcast_q=True`), attending over every sequence -> `[B, k, d]`.
- `TargetAttention`: the candidate-ad token attends over its user's sequence -> `[B, 2, d]`: the
  read-out, and the read-out multiplied elementwise by the candidate's query, whose per-head sums are
  the attention-weighted candidate x event affinities (a bilinear term the interaction gets for free
  instead of having to learn a product of two tokens).
- `recent_events`: the K most recent events, zero where the sequence is shorter -> `[B, K, d]`.

Empty sequences give zero summaries (attention over no key outputs 0), never NaN.
"""

from __future__ import annotations

import torch
from torch import nn

from gem.models.attention import JaggedAttention
from gem.models.jagged import Jagged


class _CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, attention: JaggedAttention) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"model.summary: d_model ({d_model}) must divide by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.norm = nn.LayerNorm(d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.attention = attention

    def keys_values(self, seq: Jagged) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.kv(self.norm(seq.values)).chunk(2, dim=1)
        shape = (seq.values.shape[0], self.num_heads, self.head_dim)
        return k.reshape(shape).contiguous(), v.reshape(shape).contiguous()


class PoolingByAttention(_CrossAttention):
    """Args: d_model, num_queries (k), num_heads, attention. `Jagged [ΣL, d]` -> `[B, k, d]`."""

    def __init__(self, d_model: int, num_queries: int, num_heads: int, attention: JaggedAttention) -> None:
        super().__init__(d_model, num_heads, attention)
        self.query = nn.Parameter(torch.randn(num_queries, num_heads, self.head_dim) * d_model ** -0.5)

    def forward(self, seq: Jagged) -> torch.Tensor:
        k, v = self.keys_values(seq)
        batch, num_queries = seq.offsets.numel() - 1, self.query.shape[0]
        out = self.attention(self.query.to(k.dtype), k, v, None, seq.offsets, num_queries, seq.max_len, broadcast_q=True)
        return self.out(out.reshape(batch, num_queries, -1))


class TargetAttention(_CrossAttention):
    """Args: d_model, num_heads, attention. (`Jagged [ΣL, d]`, target `[B, d]`) -> `[B, 2, d]`."""

    num_tokens = 2

    def __init__(self, d_model: int, num_heads: int, attention: JaggedAttention) -> None:
        super().__init__(d_model, num_heads, attention)
        # Pre-norm like the keys: the candidate's embeddings start tiny, and an un-normalised query
        # would be its bias alone, the same for every candidate.
        self.target_norm = nn.LayerNorm(d_model)
        self.q = nn.Linear(d_model, d_model)
        self.affinity_out = nn.Linear(d_model, d_model)

    def forward(self, seq: Jagged, target: torch.Tensor) -> torch.Tensor:
        k, v = self.keys_values(seq)
        batch = target.shape[0]
        q = self.q(self.target_norm(target)).reshape(batch, self.num_heads, self.head_dim).to(k.dtype)
        one_per_row = torch.arange(batch + 1, device=target.device, dtype=seq.offsets.dtype)
        out = self.attention(q.contiguous(), k, v, one_per_row, seq.offsets, 1, seq.max_len)
        # q ⊙ Σ_j π_j v_j: summed over a head's dims, Σ_j π_j <q, v_j>, the candidate's affinity with the
        # events it attends to, which a read-out of the pooled value alone cannot express linearly.
        readout, affinity = self.out(out.reshape(batch, -1)), self.affinity_out((q * out).reshape(batch, -1))
        return torch.stack([readout, affinity], dim=1)


def recent_events(seq: Jagged, k: int, event_starts: torch.Tensor) -> torch.Tensor:
    """The last k events of every sequence, most recent first, zero-filled -> `[B, k, d]`.

    `event_starts [B]` is where each sequence's events begin (after any prepended CLS tokens).
    """
    rows = seq.offsets[1:, None] - 1 - torch.arange(k, device=seq.offsets.device)  # [B, k]
    valid = rows >= event_starts[:, None]
    if seq.values.shape[0] == 0:
        return seq.values.new_zeros(*rows.shape, seq.values.shape[1])
    gathered = seq.values[rows.clamp(min=0)]
    return gathered * valid[..., None].to(gathered.dtype)
