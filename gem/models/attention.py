"""Attention backends for the GEM model: our JFA kernels, plus the two baselines users compare
against. Every backend computes the same function as `kernels.jagged_flash_attention` (jagged
values `[total, H, D]` + offsets `[B+1]`; `broadcast_q` for one dense query shared by the batch;
masking positions counted from each sequence's start; rows that see no key output 0).

- JFA backends (`auto`, `reference`, `triton`, `tlx`): `kernels.jagged_flash_attention`.
- `sdpa_padded`: pad every sequence to the batch maximum, masked `scaled_dot_product_attention`,
  unpad. What a user without jagged kernels writes.
- `varlen`: `torch.nn.attention.varlen.varlen_attn` (FlashAttention varlen, CUDA fp16/bf16 only),
  with a broadcast query expanded per batch element and GQA heads expanded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch
import torch.nn.functional as F

from gem.models.jagged import row_positions
from kernels import jagged_flash_attention

JFA_BACKENDS = ("auto", "reference", "triton", "tlx")
BASELINES = ("sdpa_padded", "varlen")


@dataclass
class AttentionConfig:
    backend: str = "auto"  # auto | reference | triton | tlx | sdpa_padded | varlen
    deterministic: bool = False  # bitwise-reproducible JFA gradients (no order-dependent atomics)

    def __post_init__(self) -> None:
        if self.backend not in JFA_BACKENDS + BASELINES:
            raise ValueError(f"attention.backend must be one of {JFA_BACKENDS + BASELINES}, got {self.backend!r}")


class JaggedAttention(Protocol):
    def __call__(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        query_offset: torch.Tensor | None, key_offset: torch.Tensor, max_seq_len_q: int, max_seq_len_kv: int, *,
        causal: bool = False, window_size: int | None = None, broadcast_q: bool = False,
    ) -> torch.Tensor: ...


def attention_function(cfg: AttentionConfig) -> JaggedAttention:
    """The jagged attention callable the model's layers use for `cfg.backend`."""
    if cfg.backend in BASELINES:
        return _sdpa_padded if cfg.backend == "sdpa_padded" else _varlen

    def jfa(query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv, *,
            causal=False, window_size=None, broadcast_q=False):
        return jagged_flash_attention(
            query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv,
            causal=causal, window_size=window_size, broadcast_q=broadcast_q,
            backend=cfg.backend, deterministic=cfg.deterministic,
        )

    return jfa


def _expand_broadcast_query(query: torch.Tensor, key_offset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[q_len, H, D] shared query -> jagged [B*q_len, H, D] with offsets b*q_len."""
    batch = key_offset.numel() - 1
    q_len = query.shape[0]
    expanded = query.unsqueeze(0).expand(batch, *query.shape).reshape(batch * q_len, *query.shape[1:])
    offsets = torch.arange(batch + 1, device=query.device, dtype=key_offset.dtype) * q_len
    return expanded, offsets


def _expand_kv_heads(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    groups = query.shape[1] // key.shape[1]
    if groups == 1:
        return key, value
    return key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)


def _pad(values: torch.Tensor, offsets: torch.Tensor, max_len: int) -> torch.Tensor:
    """Jagged [total, H, D] -> zero-padded [B, H, max_len, D]."""
    batch_ids, pos = row_positions(offsets, values.shape[0])
    padded = values.new_zeros(offsets.numel() - 1, max_len, *values.shape[1:])
    padded = padded.index_put((batch_ids, pos), values)
    return padded.transpose(1, 2)


def _visible(q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool, window_size: int | None) -> torch.Tensor:
    visible = torch.ones(q_pos.shape[-1], k_pos.shape[-1], dtype=torch.bool, device=q_pos.device)
    delta = q_pos[:, None] - k_pos[None, :]
    if causal:
        visible &= delta >= 0
    if window_size is not None:
        visible &= delta.abs() <= window_size
    return visible


def _sdpa_padded(query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv, *,
                 causal=False, window_size=None, broadcast_q=False):
    key, value = _expand_kv_heads(query, key, value)
    k_pad, v_pad = _pad(key, key_offset, max_seq_len_kv), _pad(value, key_offset, max_seq_len_kv)
    if broadcast_q:
        q_len = query.shape[0]
        q_pad = query.transpose(0, 1).unsqueeze(0).expand(key_offset.numel() - 1, -1, -1, -1)
        query_offset = torch.arange(key_offset.numel(), device=query.device, dtype=key_offset.dtype) * q_len
        max_seq_len_q = q_len
    else:
        q_pad = _pad(query, query_offset, max_seq_len_q)
    device = query.device
    k_lengths = key_offset[1:] - key_offset[:-1]
    pos_q, pos_k = torch.arange(max_seq_len_q, device=device), torch.arange(max_seq_len_kv, device=device)
    mask = _visible(pos_q, pos_k, causal, window_size)[None] & (pos_k[None, None, :] < k_lengths[:, None, None])
    # A row that sees no key would be NaN in SDPA; let it see key 0 and zero its output below.
    has_key = mask.any(dim=-1, keepdim=True)
    safe_mask = mask | (~has_key & (pos_k == 0))
    out = F.scaled_dot_product_attention(q_pad, k_pad, v_pad, attn_mask=safe_mask[:, None])
    out = out * has_key[:, None].to(out.dtype)
    total_q = query.shape[0] * (key_offset.numel() - 1) if broadcast_q else query.shape[0]
    batch_ids, pos = row_positions(query_offset, total_q)
    return out.transpose(1, 2)[batch_ids, pos]


def _varlen(query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv, *,
            causal=False, window_size=None, broadcast_q=False):
    from torch.nn.attention.varlen import varlen_attn

    if query.device.type != "cuda" or query.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError("attention.backend=varlen needs CUDA fp16/bf16 tensors (FlashAttention varlen)")
    if broadcast_q:
        max_seq_len_q = query.shape[0]
        query, query_offset = _expand_broadcast_query(query, key_offset)
    key, value = _expand_kv_heads(query, key, value)
    left = -1 if window_size is None else window_size
    right = 0 if causal else (-1 if window_size is None else window_size)
    # FlashAttention aligns causal masks to the sequence ends; with equal q/kv lengths (the only
    # causal use in the model: self-attention) that is our start-aligned rule.
    out = varlen_attn(query, key, value, query_offset.to(torch.int32), key_offset.to(torch.int32),
                      max_seq_len_q, max_seq_len_kv, window_size=(left, right))
    # Rows of a query sequence whose key sequence is empty: 0, as in every other backend.
    k_lengths = key_offset[1:] - key_offset[:-1]
    batch_ids, _ = row_positions(query_offset, out.shape[0])
    return out * (k_lengths[batch_ids] > 0)[:, None, None].to(out.dtype)
