"""The sequence arch: a stack of pre-norm transformer layers over jagged sequences.

A batch of sequences is kept as one packed tensor plus offsets, never padded::

    lengths  [2, 0, 3]                     B = 3
    offsets  [0, 2, 2, 5]                  B + 1
    x        [a0 a1 | | c0 c1 c2]          [sum(lengths), d_model]

Every op here is either row-wise (norms, projections, FFN) or a jagged attention call, so padding
never appears on the sequence path.
"""

from __future__ import annotations

import torch
from torch import nn

from gem.models.attention import JaggedAttention
from gem.models.jagged import Jagged


def prepend_tokens(seq: Jagged, tokens: torch.Tensor) -> Jagged:
    """Put `tokens [B, n, d]` in front of every sequence (e.g. non-sequence summary tokens as CLS
    tokens that the sequence can attend to). Empty sequences become length n."""
    batch, n, d = tokens.shape
    total = seq.values.shape[0] + batch * n
    new_offsets = seq.offsets + n * torch.arange(batch + 1, device=seq.offsets.device, dtype=seq.offsets.dtype)
    out = seq.values.new_empty(total, d)
    token_rows = (new_offsets[:-1, None] + torch.arange(n, device=tokens.device)).reshape(-1)
    out[token_rows] = tokens.reshape(-1, d).to(out.dtype)
    is_event = torch.ones(total, dtype=torch.bool, device=out.device)
    is_event[token_rows] = False
    out[is_event] = seq.values
    return Jagged(out, new_offsets, seq.max_len + n)


class JaggedSelfAttention(nn.Module):
    """Multi-head self-attention within each jagged sequence (GQA when num_kv_heads < num_heads)."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, attention: JaggedAttention,
                 causal: bool, window_size: int | None) -> None:
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"model.sequence: d_model ({d_model}) must divide by num_heads ({num_heads}), "
                             f"and num_heads by num_kv_heads ({num_kv_heads})")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.qkv = nn.Linear(d_model, (num_heads + 2 * num_kv_heads) * self.head_dim)
        self.out = nn.Linear(d_model, d_model)
        self.attention, self.causal, self.window_size = attention, causal, window_size

    def forward(self, seq: Jagged) -> torch.Tensor:
        total = seq.values.shape[0]
        q, k, v = self.qkv(seq.values).split(
            [self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim, self.num_kv_heads * self.head_dim], dim=1)
        out = self.attention(
            q.reshape(total, self.num_heads, self.head_dim).contiguous(),
            k.reshape(total, self.num_kv_heads, self.head_dim).contiguous(),
            v.reshape(total, self.num_kv_heads, self.head_dim).contiguous(),
            seq.offsets, seq.offsets, seq.max_len, seq.max_len,
            causal=self.causal, window_size=self.window_size,
        )
        return self.out(out.reshape(total, self.num_heads * self.head_dim))


class LayerStack(nn.ModuleList):
    """Layers applied in order. One module rather than a loop in the model's forward, so that
    torch.fx (TorchRec's train pipeline) sees the stack as a single opaque call."""

    def forward(self, seq: Jagged) -> Jagged:
        for layer in self:
            seq = layer(seq)
        return seq


class TransformerLayer(nn.Module):
    """x + SelfAttention(LN(x)), then x + FFN(LN(x)), row-wise on jagged rows."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, ffn_mult: int,
                 attention: JaggedAttention, causal: bool, window_size: int | None) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(d_model)
        self.attn = JaggedSelfAttention(d_model, num_heads, num_kv_heads, attention, causal, window_size)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_mult * d_model), nn.GELU(), nn.Linear(ffn_mult * d_model, d_model))

    def forward(self, seq: Jagged) -> Jagged:
        x = seq.values + self.attn(seq.with_values(self.attn_norm(seq.values)))
        return seq.with_values(x + self.ffn(self.ffn_norm(x)))
