"""Test helpers for jagged flash attention: random jagged cases and an independent fp64 oracle.

The oracle shares no code with ``kernels`` (not even the mask definition): dense per-sequence
attention in float64 with its gradients from autograd, where ``kernels.reference`` uses
hand-written backward formulas. Tests compare every backend, the reference included, with it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch
from torch import Tensor

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ON_GPU = DEVICE.type == "cuda"
# Lengths are drawn up to this: a few interpreter blocks of 16 on CPU; several 64/128 blocks on GPU.
MAX_LEN = 300 if ON_GPU else 40
# Fresh inputs on demand: JFA_TEST_SEED=<int> changes every case's random draw.
BASE_SEED = int(os.environ.get("JFA_TEST_SEED", "0"))

# max |error| / max |oracle| per dtype: (forward, backward).
TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (1e-2, 2e-2), torch.float16: (1e-2, 2e-2)}


@dataclass(frozen=True)
class Case:
    """One jagged attention problem. ``q_lengths`` is ignored with ``broadcast_q`` (q_len rows)."""

    kv_lengths: tuple[int, ...]
    q_lengths: tuple[int, ...] = ()
    mode: str = "self"  # "self" (query lengths = key lengths) | "cross" | "broadcast"
    q_len: int = 0  # broadcast_q: rows of the shared query
    heads: tuple[int, int] = (2, 2)  # (Hq, Hkv)
    head_dim: int = 32
    causal: bool = False
    window_size: int | None = None
    sm_scale: float | None = None
    dtype: torch.dtype = torch.float32
    seed: int = field(default=0, compare=False)

    @property
    def broadcast_q(self) -> bool:
        return self.mode == "broadcast"

    @property
    def query_lengths(self) -> tuple[int, ...]:
        if self.broadcast_q:
            return (self.q_len,) * len(self.kv_lengths)
        return self.kv_lengths if self.mode == "self" else self.q_lengths


def random_lengths(batch: int, max_len: int, generator: torch.Generator) -> tuple[int, ...]:
    """Uniform lengths in [0, max_len] with an empty and a full sequence forced in (batch >= 2)."""
    lengths = torch.randint(0, max_len + 1, (batch,), generator=generator).tolist()
    if batch >= 2:
        lengths[0], lengths[-1] = 0, max_len
    return tuple(lengths)


def offsets_of(lengths: tuple[int, ...], dtype: torch.dtype = torch.int64) -> Tensor:
    return torch.tensor([0, *torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()], dtype=dtype, device=DEVICE)


@dataclass
class Inputs:
    query: Tensor
    key: Tensor
    value: Tensor
    query_offset: Tensor | None
    key_offset: Tensor
    max_seq_len_q: int
    max_seq_len_kv: int
    grad_out: Tensor


def make_inputs(case: Case) -> Inputs:
    generator = torch.Generator().manual_seed(BASE_SEED * 1_000_003 + case.seed)
    num_q_heads, num_kv_heads = case.heads

    def randn(rows: int, heads: int) -> Tensor:
        x = torch.randn(rows, heads, case.head_dim, generator=generator)
        return x.to(device=DEVICE, dtype=case.dtype)

    key_offset = offsets_of(case.kv_lengths)
    q_lengths = case.query_lengths
    if case.broadcast_q:
        query, query_offset = randn(case.q_len, num_q_heads), None
    elif case.mode == "self":
        query, query_offset = randn(sum(q_lengths), num_q_heads), key_offset  # self-attention shares offsets
    else:
        query, query_offset = randn(sum(q_lengths), num_q_heads), offsets_of(q_lengths, torch.int32)
    total_kv = sum(case.kv_lengths)
    return Inputs(
        query=query,
        key=randn(total_kv, num_kv_heads),
        value=randn(total_kv, num_kv_heads),
        query_offset=query_offset,
        key_offset=key_offset,
        max_seq_len_q=case.q_len if case.broadcast_q else max(q_lengths, default=0),
        max_seq_len_kv=max(case.kv_lengths, default=0),
        grad_out=randn(sum(q_lengths), num_q_heads),
    )


@dataclass
class Expected:
    out: Tensor
    lse: Tensor
    dq: Tensor
    dk: Tensor
    dv: Tensor


def fp64_oracle(case: Case, inputs: Inputs) -> Expected:
    """Dense float64 attention per batch element; gradients by autograd."""
    q = inputs.query.detach().double().requires_grad_()
    k = inputs.key.detach().double().requires_grad_()
    v = inputs.value.detach().double().requires_grad_()
    num_q_heads, num_kv_heads = case.heads
    group = num_q_heads // num_kv_heads
    scale = case.sm_scale if case.sm_scale is not None else 1.0 / math.sqrt(case.head_dim)
    outs, lses = [], []
    q_start = kv_start = 0
    for q_len, kv_len in zip(case.query_lengths, case.kv_lengths):
        q_b = q if case.broadcast_q else q[q_start : q_start + q_len]
        k_b = k[kv_start : kv_start + kv_len].repeat_interleave(group, dim=1)
        v_b = v[kv_start : kv_start + kv_len].repeat_interleave(group, dim=1)
        i = torch.arange(q_len, device=q.device)[:, None]
        j = torch.arange(kv_len, device=q.device)[None, :]
        allowed = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device)
        if case.causal:
            allowed &= j <= i
        if case.window_size is not None:
            allowed &= (i - j).abs() <= case.window_size
        scores = torch.einsum("ihd,jhd->hij", q_b, k_b) * scale
        scores = scores.masked_fill(~allowed, float("-inf"))
        lses.append(torch.logsumexp(scores, dim=-1))
        has_key = allowed.any(dim=-1)[None, :, None]
        # Rows without a visible key: softmax of zeros times 0 keeps the graph NaN-free.
        probs = torch.softmax(scores.masked_fill(~has_key, 0.0), dim=-1) * has_key
        outs.append(torch.einsum("hij,jhd->ihd", probs, v_b))
        q_start += q_len
        kv_start += kv_len
    out = torch.cat(outs) if outs else q.new_zeros(0, num_q_heads, case.head_dim)
    lse = torch.cat(lses, dim=1) if lses else q.new_zeros(num_q_heads, 0)
    grads = (None, None, None)
    if out.requires_grad:  # False only without any batch element
        grads = torch.autograd.grad(out, (q, k, v), inputs.grad_out.double(), allow_unused=True)
    dq, dk, dv = (torch.zeros_like(x) if g is None else g for g, x in zip(grads, (q, k, v)))
    return Expected(out.detach(), lse.detach(), dq, dk, dv)


def relative_error(actual: Tensor, expected: Tensor) -> float:
    """max |actual - expected| / max(max |expected|, 0.1), 0 for empty tensors. The floor: a
    gradient that is exactly zero (one visible key) still carries the rounding noise of the terms
    that cancel in it, dP - delta with |dP| ~ |dO||V| ~ sqrt(D) for unit-scale inputs (fp32 on the
    H200 left 1.1e-6 absolute there)."""
    if expected.numel() == 0:
        return 0.0
    scale = expected.abs().max().clamp_min(0.1)
    return ((actual.double() - expected.double()).abs().max() / scale).item()


def assert_lse_close(actual: Tensor, expected: Tensor, tol: float) -> None:
    """Same -inf pattern (rows without a visible key) and close finite values."""
    assert actual.dtype == torch.float32 and actual.shape == expected.shape
    no_key = torch.isneginf(expected)
    assert torch.equal(torch.isneginf(actual), no_key), "lse must be -inf exactly where no key is visible"
    assert not actual.isnan().any()
    assert relative_error(actual[~no_key], expected[~no_key]) <= tol
