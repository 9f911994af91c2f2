"""The one front door of jagged flash attention: validate, pick a backend, run it with autograd.

Reads top to bottom: argument validation -> backend selection -> torch custom ops (+ fake
implementations; what torch.compile traces) -> their autograd -> the eager autograd.Function (the
same backend calls without the custom-op dispatch) -> the public :func:`jagged_flash_attention`. The jagged layout and
the masking rules are drawn in ``kernels.common``; each backend lives in its own module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import math
import os
from types import ModuleType
from typing import Any

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from kernels.common import JFABackend, JFAParams, output_rows, tracked_version, versioned_offsets

logger = logging.getLogger(__name__)

BACKEND_MODULES = {
    "tlx": "kernels.tlx_hopper",  # warp-specialised Hopper kernels (fbtriton with TLX), sm_90 only
    "triton": "kernels.triton_backend",  # portable Triton, sm_80+ or TRITON_INTERPRET=1
    "reference": "kernels.reference",  # plain PyTorch, any device
}
AUTO_ORDER = ("tlx", "triton", "reference")  # fastest first; "auto" takes the first that serves

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_OFFSET_DTYPES = (torch.int32, torch.int64)
_MAX_HEAD_DIM = 256
DEBUG_CHECKS_ENV = "JFA_DEBUG_CHECKS"

# ----------------------------------------------------------------------------------------------
# Validation
#
# Metadata rules (shapes, dtypes, devices, strides, scalars) are checked on every call: they are
# free. Offsets *values* (start at 0, non-decreasing, end at the row count, lengths <= max) live
# on the device, and reading them on the host would stall a GPU stream, so:
#   * CPU tensors, or JFA_DEBUG_CHECKS=1: checked on the host, a violation raises ValueError.
#   * CUDA tensors: one torch._assert_async per offsets tensor, enqueued on the stream with no
#     device->host sync; a violation surfaces later as a device-side assert (rerun with
#     JFA_DEBUG_CHECKS=1 for the ValueError naming the rule). Each offsets tensor is asserted once
#     per (tensor, version, row count, max length): a model whose layers share offsets pays once.
#   * Under torch.compile: the same async assertion, traced into the graph.
# ----------------------------------------------------------------------------------------------

_ASYNC_CHECKED: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _fail(argument: str, rule: str) -> ValueError:
    return ValueError(f"{argument}: {rule}")


def _check_qkv(query: Tensor, key: Tensor, value: Tensor) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise _fail(name, f"must be a 3-D tensor [rows, heads, head_dim], got {getattr(x, 'shape', type(x))}")
        if x.dtype not in _DTYPES:
            raise _fail(name, f"dtype must be float16, bfloat16 or float32, got {x.dtype}")
        if x.dtype != query.dtype:
            raise _fail(name, f"dtype must match query's ({query.dtype}), got {x.dtype}")
        if x.device != query.device:
            raise _fail(name, f"must be on query's device ({query.device}), got {x.device}")
        if x.shape[-1] > 1 and x.stride(-1) != 1:
            raise _fail(name, f"last dimension must be contiguous (stride 1), got strides {x.stride()}")
    if value.shape != key.shape:
        raise _fail("value", f"shape must equal key's {tuple(key.shape)}, got {tuple(value.shape)}")
    head_dim = query.shape[2]
    if key.shape[2] != head_dim:
        raise _fail("key", f"head_dim must equal query's ({head_dim}), got {key.shape[2]}")
    if head_dim % 16 != 0 or not 16 <= head_dim <= _MAX_HEAD_DIM:
        raise _fail("query", f"head_dim must be a multiple of 16 in [16, {_MAX_HEAD_DIM}], got {head_dim}")
    if key.shape[1] == 0 or query.shape[1] % key.shape[1] != 0:
        raise _fail("query", f"heads ({query.shape[1]}) must be a multiple of key's heads ({key.shape[1]})")


def _check_offsets_metadata(name: str, offsets: Any, device: torch.device) -> None:
    if not isinstance(offsets, Tensor) or offsets.dim() != 1 or offsets.dtype not in _OFFSET_DTYPES:
        raise _fail(name, f"must be a 1-D int32 or int64 tensor, got {getattr(offsets, 'dtype', type(offsets))}")
    if offsets.shape[0] < 1:
        raise _fail(name, "must have B+1 >= 1 entries")
    if offsets.device != device:
        raise _fail(name, f"must be on the tensors' device ({device}), got {offsets.device}")
    if not offsets.is_contiguous():
        raise _fail(name, "must be contiguous")


def _check_offsets_on_host(name: str, offsets: Tensor, rows: int, rows_desc: str, max_len: int, max_name: str) -> None:
    lengths = offsets.diff()
    if offsets[0] != 0:
        raise _fail(name, f"must start at 0, got {offsets[0].item()}")
    if (lengths < 0).any():
        b = int((lengths < 0).nonzero()[0])
        raise _fail(name, f"must be non-decreasing, got {offsets[b].item()} then {offsets[b + 1].item()} at {b}")
    if offsets[-1] != rows:
        raise _fail(name, f"must end at {rows_desc} = {rows}, got {offsets[-1].item()}")
    if (lengths > max_len).any():
        b = int(lengths.argmax())
        raise _fail(name, f"lengths must be <= {max_name} = {max_len}, sequence {b} has {lengths[b].item()}")


def _assert_offsets_async(name: str, offsets: Tensor, rows: int, rows_desc: str, max_len: int, max_name: str) -> None:
    version = None if torch.compiler.is_compiling() else tracked_version(offsets)
    signature = (version, rows, max_len)
    if version is not None and _ASYNC_CHECKED.get(offsets) == signature:
        return
    lengths = offsets.diff()
    valid = (offsets[0] == 0) & (offsets[-1] == rows) & (lengths >= 0).all() & (lengths <= max_len).all()
    torch._assert_async(
        valid,
        f"{name}: must start at 0, be non-decreasing, end at {rows_desc} and have lengths <= {max_name} "
        f"(rerun with {DEBUG_CHECKS_ENV}=1 for the exact rule)",
    )
    if version is not None:
        _ASYNC_CHECKED[offsets] = signature


def _check_offsets_values(name: str, offsets: Tensor, rows: int, rows_desc: str, max_len: int, max_name: str) -> None:
    on_host = offsets.device.type == "cpu" or os.environ.get(DEBUG_CHECKS_ENV, "0") == "1"
    if on_host and not torch.compiler.is_compiling():
        _check_offsets_on_host(name, offsets, rows, rows_desc, max_len, max_name)
    else:
        _assert_offsets_async(name, offsets, rows, rows_desc, max_len, max_name)


def _check_scalars(params: JFAParams, backend: str) -> None:
    for name in ("max_seq_len_q", "max_seq_len_kv"):
        value = getattr(params, name)
        if not isinstance(value, (int, torch.SymInt)) or isinstance(value, bool) or value < 0:
            raise _fail(name, f"must be an int >= 0, got {value!r}")
    if not math.isfinite(params.sm_scale) or params.sm_scale <= 0:
        raise _fail("sm_scale", f"must be a finite float > 0, got {params.sm_scale!r}")
    window = params.window_size
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 0):
        raise _fail("window_size", f"must be None or an int >= 0, got {window!r}")
    if backend != "auto" and backend not in BACKEND_MODULES:
        raise _fail("backend", f"must be 'auto' or one of {sorted(BACKEND_MODULES)}, got {backend!r}")


def _check_offsets(
    query: Tensor, key: Tensor, query_offset: Tensor | None, key_offset: Tensor, params: JFAParams
) -> None:
    _check_offsets_metadata("key_offset", key_offset, query.device)
    if params.broadcast_q:
        if query_offset is not None:
            raise _fail("query_offset", "must be None with broadcast_q=True (the query is one dense sequence)")
        if params.max_seq_len_q < query.shape[0]:
            raise _fail("max_seq_len_q", f"must be >= q_len = {query.shape[0]} with broadcast_q=True")
    else:
        if query_offset is None:
            raise _fail("query_offset", "is required unless broadcast_q=True")
        _check_offsets_metadata("query_offset", query_offset, query.device)
        if query_offset.shape[0] != key_offset.shape[0]:
            raise _fail(
                "query_offset",
                f"must have as many entries (B+1) as key_offset, got {query_offset.shape[0]} vs {key_offset.shape[0]}",
            )
        _check_offsets_values(
            "query_offset", query_offset, query.shape[0], "query.shape[0]", params.max_seq_len_q, "max_seq_len_q"
        )
    _check_offsets_values(
        "key_offset", key_offset, key.shape[0], "key.shape[0]", params.max_seq_len_kv, "max_seq_len_kv"
    )


# ----------------------------------------------------------------------------------------------
# Backend selection
# ----------------------------------------------------------------------------------------------


@functools.cache
def _import_backend(name: str) -> ModuleType | str:
    """The backend module, or why it cannot be imported (imported lazily, once)."""
    try:
        return importlib.import_module(BACKEND_MODULES[name])
    except ImportError as error:
        return f"not importable: {error}"


def _unsupported_reason(name: str, query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str | None:
    module = _import_backend(name)
    if isinstance(module, str):
        return module
    return module.supports(query, key, value, params)


@functools.cache
def _log_fallback_once(name: str, reason: str, on_gpu: bool) -> None:
    level = logging.WARNING if on_gpu else logging.INFO
    logger.log(level, "jagged_flash_attention: skipping backend %r: %s", name, reason)


def _select_backend(requested: str, query: Tensor, key: Tensor, value: Tensor, params: JFAParams) -> str:
    """The backend that serves this call; under torch.compile chosen once per graph, at trace time.

    No backend's choice depends on the max lengths, and they must not reach the constant-result
    function: batches carry their own longest sequence, so under torch.compile they become symbolic
    ints after the first batch whose maximum differs."""
    selecting = dataclasses.replace(params, max_seq_len_q=0, max_seq_len_kv=0)
    fields = tuple(getattr(selecting, field.name) for field in dataclasses.fields(selecting))
    return _select_backend_eagerly(requested, query, key, value, fields)


@torch.compiler.assume_constant_result  # runs eagerly while tracing; the name is baked into the graph
def _select_backend_eagerly(requested: str, query: Tensor, key: Tensor, value: Tensor, param_fields: tuple) -> str:
    # Takes JFAParams as a tuple: dynamo cannot hand a frozen dataclass to this kind of function.
    params = JFAParams(*param_fields)
    if requested != "auto":
        reason = _unsupported_reason(requested, query, key, value, params)
        if reason is not None:
            raise _fail("backend", f"{requested!r} cannot serve this call: {reason}")
        return requested
    for name in AUTO_ORDER:
        if name == "tlx" and not _is_sm90(query.device):
            reason = f"needs an sm_90 GPU, the tensors are on {query.device}"
        elif name == "triton" and not query.is_cuda:
            # The Triton interpreter serves tests, not speed: on CPU the reference is far faster.
            reason = f"auto runs Triton on CUDA only (the tensors are on {query.device})"
        else:
            reason = _unsupported_reason(name, query, key, value, params)
        if reason is None:
            return name
        _log_fallback_once(name, reason, query.is_cuda)
    raise RuntimeError("jagged_flash_attention: no backend serves this call")  # reference serves all


def _is_sm90(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device) == (9, 0)


def _backend(name: str) -> JFABackend:
    module = _import_backend(name)
    assert not isinstance(module, str), module  # _select_backend imported it already
    return module


# ----------------------------------------------------------------------------------------------
# Custom ops: opaque to torch.compile, described to it by the fake (meta) implementations
# ----------------------------------------------------------------------------------------------


def _on_device_of(x: Tensor) -> contextlib.AbstractContextManager:
    """Triton launches on the current CUDA device: make it the tensors' one (a caller need not
    have called torch.cuda.set_device)."""
    return torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()


@torch.library.custom_op("jfa::jagged_flash_attention_fwd", mutates_args=())
def _forward_op(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    max_seq_len_q: int,
    max_seq_len_kv: int,
    sm_scale: float,
    causal: bool,
    window_size: int | None,
    broadcast_q: bool,
    deterministic: bool,
    backend: str,
) -> tuple[Tensor, Tensor]:
    params = JFAParams(max_seq_len_q, max_seq_len_kv, sm_scale, causal, window_size, broadcast_q, deterministic)
    with _on_device_of(query):
        return _backend(backend).forward(query, key, value, query_offset, key_offset, params)


@_forward_op.register_fake
def _forward_fake(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    max_seq_len_q: int,
    max_seq_len_kv: int,
    sm_scale: float,
    causal: bool,
    window_size: int | None,
    broadcast_q: bool,
    deterministic: bool,
    backend: str,
) -> tuple[Tensor, Tensor]:
    rows = output_rows(query, key_offset, broadcast_q)
    out = query.new_empty((rows, query.shape[1], query.shape[2]))
    return out, query.new_empty((query.shape[1], rows), dtype=torch.float32)


@torch.library.custom_op("jfa::jagged_flash_attention_bwd", mutates_args=())
def _backward_op(
    grad_out: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    out: Tensor,
    lse: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    max_seq_len_q: int,
    max_seq_len_kv: int,
    sm_scale: float,
    causal: bool,
    window_size: int | None,
    broadcast_q: bool,
    deterministic: bool,
    backend: str,
) -> tuple[Tensor, Tensor, Tensor]:
    params = JFAParams(max_seq_len_q, max_seq_len_kv, sm_scale, causal, window_size, broadcast_q, deterministic)
    with _on_device_of(query):
        return _backend(backend).backward(grad_out, query, key, value, out, lse, query_offset, key_offset, params)


@_backward_op.register_fake
def _backward_fake(
    grad_out: Tensor, query: Tensor, key: Tensor, value: Tensor, *args: Any
) -> tuple[Tensor, Tensor, Tensor]:
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)


# ----------------------------------------------------------------------------------------------
# Autograd: gradients for query, key and value; the LSE output carries no gradient
# ----------------------------------------------------------------------------------------------

def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor]) -> None:
    query, key, value, query_offset, key_offset, *options = inputs
    out, lse = output
    ctx.save_for_backward(query, key, value, query_offset, key_offset, out, lse)
    ctx.options = options
    ctx.mark_non_differentiable(lse)


def _backward(ctx: Any, grad_out: Tensor, grad_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    query, key, value, query_offset, key_offset, out, lse = ctx.saved_tensors
    dq, dk, dv = _backward_op(
        grad_out.contiguous(), query, key, value, out, lse, query_offset, key_offset, *ctx.options
    )
    return (dq, dk, dv, None, None) + (None,) * len(ctx.options)


torch.library.register_autograd("jfa::jagged_flash_attention_fwd", _backward, setup_context=_setup_context)


# ----------------------------------------------------------------------------------------------
# Eager path: the same backend calls and gradients as the custom ops, through one
# autograd.Function. torch.library's custom-op dispatch (schema binding, default filling, the
# dynamo-disabled wrappers, output alias checks) costs ~0.1-0.2 ms of host time per call, the time
# a fill-0.1 PMA kernel runs on the H200, so eager training was launch-bound (docs/kernels/tlx_hopper.md).
# ----------------------------------------------------------------------------------------------


class _EagerJFA(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, query: Tensor, key: Tensor, value: Tensor, query_offset: Tensor | None,
                key_offset: Tensor, params: JFAParams, backend: str) -> tuple[Tensor, Tensor]:
        with _on_device_of(query), versioned_offsets():
            out, lse = _backend(backend).forward(query, key, value, query_offset, key_offset, params)
        ctx.save_for_backward(query, key, value, query_offset, key_offset, out, lse)
        ctx.params, ctx.backend = params, backend
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable  # like the custom op: no double backward
    def backward(ctx: Any, grad_out: Tensor, grad_lse: Tensor | None) -> tuple[Tensor | None, ...]:
        query, key, value, query_offset, key_offset, out, lse = ctx.saved_tensors
        with _on_device_of(query), versioned_offsets():
            dq, dk, dv = _backend(ctx.backend).backward(
                grad_out.contiguous(), query, key, value, out, lse, query_offset, key_offset, ctx.params)
        return dq, dk, dv, None, None, None, None


# ----------------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------------


def jagged_flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    query_offset: Tensor | None,
    key_offset: Tensor,
    max_seq_len_q: int,
    max_seq_len_kv: int,
    *,
    sm_scale: float | None = None,
    causal: bool = False,
    window_size: int | None = None,
    broadcast_q: bool = False,
    backend: str = "auto",
    deterministic: bool = False,
    return_lse: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Multi-head attention over jagged (packed, unpadded) sequences; differentiable.

    Layout (drawn in ``kernels.common``): ``query [total_q, Hq, D]`` with ``query_offset [B+1]``,
    ``key``/``value [total_kv, Hkv, D]`` with ``key_offset [B+1]``; batch element b attends from
    query rows ``query_offset[b]:query_offset[b+1]`` to key rows ``key_offset[b]:key_offset[b+1]``.

    Args:
        query, key, value: float16/bfloat16 (GPU) or float32 tensors on one device; the last dim
            must be contiguous. GQA: Hq a multiple of Hkv. D a multiple of 16 up to 256.
        query_offset, key_offset: int32/int64 prefix sums ``[B+1]`` (0, ..., rows); query_offset
            is None with ``broadcast_q``.
        max_seq_len_q, max_seq_len_kv: upper bounds of the sequence lengths (they size the grids).
        sm_scale: score scale, default ``1/sqrt(D)``.
        causal: key j visible to query i iff j <= i (positions from each sequence's start).
        window_size: W >= 0: key j visible to query i iff |i - j| <= W (combines with causal).
        broadcast_q: ``query [q_len, Hq, D]`` is one dense sequence shared by all B elements
            (PMA); the output is ``[B*q_len, Hq, D]`` and the query gradient is the batch sum,
            accumulated in float32.
        backend: "auto" (tlx on sm_90 if importable and supported, else triton on CUDA, else
            reference; the Triton interpreter is used only when "triton" is asked for), or "tlx" | "triton" | "reference" (raises
            ValueError saying why if that backend cannot serve the call).
        deterministic: bitwise reproducible outputs and gradients run to run.
        return_lse: also return the float32 ``[Hq, total_out]`` natural-log logsumexp of the scaled
            scores (-inf for rows without a visible key; not differentiable).

    Returns:
        ``out [total_out, Hq, D]`` (total_out = total_q, or B*q_len with broadcast_q), rows without
        a visible key are zero; ``(out, lse)`` with ``return_lse``.

    Raises:
        ValueError: naming the argument and the rule it breaks. Offsets values are checked on the
            host for CPU tensors (or with ``JFA_DEBUG_CHECKS=1``); on CUDA and under torch.compile
            by an asynchronous device assertion, so the hot path never syncs (see the Validation
            section of this module).

    Example::

        >>> q = torch.randn(5, 2, 16); kv = torch.randn(7, 2, 16)
        >>> q_off = torch.tensor([0, 2, 5]); kv_off = torch.tensor([0, 4, 7])
        >>> jagged_flash_attention(q, kv, kv, q_off, kv_off, 3, 4, causal=True).shape
        torch.Size([5, 2, 16])
    """
    _check_qkv(query, key, value)
    params = JFAParams(
        max_seq_len_q=max_seq_len_q,
        max_seq_len_kv=max_seq_len_kv,
        sm_scale=float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(query.shape[-1]),
        causal=causal,
        window_size=window_size,
        broadcast_q=broadcast_q,
        deterministic=deterministic,
    )
    _check_scalars(params, backend)
    _check_offsets(query, key, query_offset, key_offset, params)
    name = _select_backend(backend, query, key, value, params)
    if torch.compiler.is_compiling():  # the custom op: opaque to the graph, shapes from its fake
        out, lse = _forward_op(
            query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv, params.sm_scale,
            causal, window_size, broadcast_q, deterministic, name,
        )  # fmt: skip
    else:
        out, lse = _EagerJFA.apply(query, key, value, query_offset, key_offset, params, name)
    return (out, lse) if return_lse else out
