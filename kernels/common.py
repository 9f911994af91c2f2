"""Definitions shared by every jagged flash attention (JFA) backend.

Jagged layout (the one place it is drawn; tensors carry their shape in names where it helps)::

    B = 3 sequences of lengths 2, 0, 3 (empty sequences are allowed)

    offsets  [B+1]      = [0,    2, 2,       5]        int32 or int64 prefix sums of the lengths
    values   [T, H, D]  = [ a0 a1 | (empty) | c0 c1 c2 ]  T = offsets[-1] rows, no padding
    row                     0  1               2  3  4

Sequence b owns rows ``offsets[b] : offsets[b+1]``; a token's position is counted from its
sequence's start. ``query`` / ``query_offset`` and ``key``, ``value`` / ``key_offset`` both use this
layout and describe the same B. With ``broadcast_q`` the query is ONE dense sequence
``[q_len, Hq, D]`` shared by every batch element (PMA), ``query_offset`` is None, and the output
has ``B * q_len`` rows: batch b in rows ``b*q_len : (b+1)*q_len``.

Masking: key j is visible to query i iff ``j <= i`` (``causal``) and ``|i - j| <= W``
(``window_size=W``); both may combine. A query row with no visible key outputs zeros and has
LSE = -inf.

A backend is a module with the three functions of :class:`JFABackend`; the front door
(``kernels.jfa``) validates arguments once, so backends receive well-formed inputs.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


@dataclass(frozen=True)
class JFAParams:
    """Scalar options of one call; every backend receives the same object.

    Attributes:
        max_seq_len_q: upper bound of the query lengths (with broadcast_q: >= q_len).
        max_seq_len_kv: upper bound of the key/value lengths.
        sm_scale: score scale (the front door defaults it to 1/sqrt(D)).
        causal: key j visible to query i only if j <= i.
        window_size: None, or W >= 0: key j visible to query i only if |i - j| <= W.
        broadcast_q: one dense query sequence shared by the whole batch (see module docstring).
        deterministic: outputs and gradients must be bitwise reproducible run to run.
    """

    max_seq_len_q: int
    max_seq_len_kv: int
    sm_scale: float
    causal: bool = False
    window_size: int | None = None
    broadcast_q: bool = False
    deterministic: bool = False


# True while the front door runs an eager call: its offsets are framework tensors whose in-place
# writes bump `_version`, so a backend may reuse what it derived from them (the tlx schedules).
# Inside compiled graphs Inductor reuses buffers and fills them from kernels without a version bump,
# so there nothing derived from offsets is reused.
_OFFSETS_VERSIONED: contextvars.ContextVar[bool] = contextvars.ContextVar("jfa_offsets_versioned", default=False)


@contextlib.contextmanager
def versioned_offsets() -> Iterator[None]:
    """The front door's promise, for the calls inside, that offsets change only with a version bump."""
    token = _OFFSETS_VERSIONED.set(True)
    try:
        yield
    finally:
        _OFFSETS_VERSIONED.reset(token)


def offsets_versioned() -> bool:
    return _OFFSETS_VERSIONED.get()


def tracked_version(tensor: Tensor) -> int | None:
    """The tensor's version counter (in-place writes bump it), or None for inference tensors, which
    keep none: whatever is cached per (tensor, version) must not be cached for them."""
    return None if tensor.is_inference() else tensor._version


class JFABackend(Protocol):
    """The contract every backend module (``kernels.reference``, ``kernels.triton_backend``,
    ``kernels.tlx_hopper``) fulfils. Inputs are validated by the front door: q/k/v share dtype and
    device and have a stride-1 last dim (rows and heads may be strided), offsets are well-formed."""

    def supports(self, query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str | None:
        """None if this backend can serve the call, else the reason it cannot.

        Must read only metadata (device, dtype, head counts, head dim, params), never tensor data
        nor jagged row counts: under torch.compile the choice is made once per graph. The front door
        passes the max lengths as 0 (batches carry their own, symbolic under torch.compile); a
        broadcast query's row count, q_len, a model constant, may be read instead.
        """
        ...

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        query_offset: Tensor | None,
        key_offset: Tensor,
        params: JFAParams,
    ) -> tuple[Tensor, Tensor]:
        """Returns ``out [total_out, Hq, D]`` (query's dtype, contiguous, zero rows where no key is
        visible) and ``lse [Hq, total_out]`` float32 natural-log logsumexp of the scaled scores
        (-inf where no key is visible). Both freshly allocated."""
        ...

    def backward(
        self,
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
        """Returns ``(dq, dk, dv)`` shaped and typed like query, key, value (freshly allocated).
        ``grad_out`` is contiguous. With broadcast_q, dq is the sum over the batch, accumulated in
        float32."""
        ...


def num_sequences(key_offset: Tensor) -> int:
    """B, the number of batch elements."""
    return key_offset.shape[0] - 1


def output_rows(query: Tensor, key_offset: Tensor, broadcast_q: bool) -> int:
    """Rows of the output: total_q, or B * q_len with broadcast_q."""
    return num_sequences(key_offset) * query.shape[0] if broadcast_q else query.shape[0]


def visible_key_range(
    q_pos: Tensor, kv_len: Tensor | int, causal: bool, window_size: int | None
) -> tuple[Tensor, Tensor]:
    """Keys visible to the query at position ``q_pos`` are ``lo <= j < hi`` (none when hi <= lo).

    The definition of the mask at row granularity; the Triton kernels apply the same rule per
    element (``triton_common.visible``) and per block (``triton_common.kv_blocks_for_q_tile``).
    ``kv_len`` may be a tensor broadcastable against ``q_pos``.
    """
    lo = torch.zeros_like(q_pos)
    hi = torch.broadcast_to(torch.as_tensor(kv_len, device=q_pos.device), q_pos.shape)
    if causal:
        hi = torch.minimum(hi, q_pos + 1)
    if window_size is not None:
        lo = (q_pos - window_size).clamp_min(0)
        hi = torch.minimum(hi, q_pos + window_size + 1)
    return lo, hi


def visible_pairs(q_lengths: Tensor, kv_lengths: Tensor, causal: bool, window_size: int | None) -> Tensor:
    """Number of (query, key) pairs the mask lets through, per batch element (int64 ``[B]``).

    For cost models (FLOPs = 4·H·D·pairs forward); reads the lengths on the host.
    """
    q_lengths, kv_lengths = q_lengths.cpu().long(), kv_lengths.cpu().long()
    batch_of_row = torch.repeat_interleave(torch.arange(len(q_lengths)), q_lengths)
    row_starts = torch.cumsum(q_lengths, 0) - q_lengths
    q_pos = torch.arange(int(q_lengths.sum())) - row_starts[batch_of_row]
    lo, hi = visible_key_range(q_pos, kv_lengths[batch_of_row], causal, window_size)
    pairs = torch.zeros(len(q_lengths), dtype=torch.int64)
    return pairs.index_add_(0, batch_of_row, (hi - lo).clamp_min(0))
