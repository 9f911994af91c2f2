"""Argument validation of the JFA front door: every rule raises a ValueError naming its argument.

Offsets values are checked on the host for CPU tensors (and on any device with
JFA_DEBUG_CHECKS=1); on CUDA by an asynchronous device assertion, tested here for the absence of
host syncs and, on CPU, by calling the asynchronous check directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from kernels import jagged_flash_attention
from kernels import jfa as front_door
from tests.kernels.jfa_oracle import DEVICE, ON_GPU, offsets_of

LENGTHS = (3, 0, 5)
ROOT = Path(__file__).resolve().parents[2]


def _call(**overrides: Any) -> None:
    """A valid cross-attention call (B=3, Hq=4, Hkv=2, D=16) with some arguments replaced."""
    args: dict[str, Any] = dict(
        query=torch.randn(8, 4, 16, device=DEVICE),
        key=torch.randn(8, 2, 16, device=DEVICE),
        value=torch.randn(8, 2, 16, device=DEVICE),
        query_offset=offsets_of(LENGTHS),
        key_offset=offsets_of(LENGTHS, torch.int32),
        max_seq_len_q=5,
        max_seq_len_kv=5,
        backend="reference",
    )
    args.update(overrides)
    jagged_flash_attention(**args)


def _offsets(*values: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=DEVICE)


def _qkv(head_dim: int, heads: tuple[int, int]) -> dict[str, torch.Tensor]:
    return dict(query=torch.randn(8, heads[0], head_dim, device=DEVICE),
                key=torch.randn(8, heads[1], head_dim, device=DEVICE),
                value=torch.randn(8, heads[1], head_dim, device=DEVICE))  # fmt: skip


OTHER_DEVICE = "meta"  # a device the inputs are not on, available everywhere

INVALID_CALLS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "query_not_3d": (lambda: dict(query=torch.randn(8, 64, device=DEVICE)), "query: must be a 3-D tensor"),
    "query_integer_dtype": (lambda: dict(query=torch.ones(8, 4, 16, dtype=torch.int32, device=DEVICE)), "query: dtype"),
    "key_dtype_differs": (lambda: dict(key=torch.randn(8, 2, 16, dtype=torch.float64, device=DEVICE)), "key: dtype"),
    "value_dtype_differs": (
        lambda: dict(value=torch.randn(8, 2, 16, device=DEVICE).half()), "value: dtype must match query's"),
    "value_device_differs": (lambda: dict(value=torch.randn(8, 2, 16, device=OTHER_DEVICE)), "value: must be on"),
    "value_shape_differs": (lambda: dict(value=torch.randn(8, 1, 16, device=DEVICE)), "value: shape must equal"),
    "key_head_dim_differs": (
        lambda: dict(key=torch.randn(8, 2, 32, device=DEVICE), value=torch.randn(8, 2, 32, device=DEVICE)),
        "key: head_dim must equal",
    ),
    "head_dim_not_multiple_of_16": (lambda: _qkv(24, heads=(4, 2)), "query: head_dim must be a multiple of 16"),
    "head_dim_above_256": (lambda: _qkv(272, heads=(1, 1)), "query: head_dim must be a multiple of 16"),
    "heads_not_multiple": (lambda: dict(query=torch.randn(8, 3, 16, device=DEVICE)), "query: heads"),
    "last_dim_strided": (
        lambda: dict(query=torch.randn(8, 16, 4, device=DEVICE).transpose(1, 2)), "query: last dimension"),
    "offsets_float": (lambda: dict(key_offset=_offsets(0, 3, 3, 8).float()), "key_offset: must be a 1-D int32"),
    "offsets_2d": (lambda: dict(key_offset=_offsets(0, 3, 3, 8).view(2, 2)), "key_offset: must be a 1-D int32"),
    "offsets_empty": (lambda: dict(key_offset=_offsets()), "key_offset: must have B\\+1 >= 1"),
    "offsets_other_device": (
        lambda: dict(query_offset=torch.zeros(4, dtype=torch.int64, device=OTHER_DEVICE)), "query_offset: must be on"),
    "offsets_not_contiguous": (
        lambda: dict(key_offset=_offsets(0, 9, 3, 9, 3, 9, 8)[::2]), "key_offset: must be contiguous"),
    "query_offset_missing": (lambda: dict(query_offset=None), "query_offset: is required"),
    "query_offset_with_broadcast": (lambda: dict(broadcast_q=True), "query_offset: must be None"),
    "batch_sizes_differ": (lambda: dict(query_offset=_offsets(0, 3, 8)), "query_offset: must have as many entries"),
    "offsets_do_not_start_at_0": (lambda: dict(query_offset=_offsets(1, 3, 3, 8)), "query_offset: must start at 0"),
    "offsets_decrease": (lambda: dict(key_offset=_offsets(0, 4, 3, 8)), "key_offset: must be non-decreasing"),
    "offsets_do_not_end_at_rows": (lambda: dict(key_offset=_offsets(0, 3, 3, 7)), "key_offset: must end at key.shape"),
    "length_above_max_q": (lambda: dict(max_seq_len_q=4), "query_offset: lengths must be <= max_seq_len_q"),
    "length_above_max_kv": (lambda: dict(max_seq_len_kv=4), "key_offset: lengths must be <= max_seq_len_kv"),
    "max_seq_len_negative": (lambda: dict(max_seq_len_kv=-1), "max_seq_len_kv: must be an int >= 0"),
    "max_seq_len_float": (lambda: dict(max_seq_len_q=5.0), "max_seq_len_q: must be an int >= 0"),
    "broadcast_max_q_below_q_len": (
        lambda: dict(query_offset=None, broadcast_q=True, max_seq_len_q=7), "max_seq_len_q: must be >= q_len"),
    "sm_scale_zero": (lambda: dict(sm_scale=0.0), "sm_scale: must be a finite float > 0"),
    "sm_scale_nan": (lambda: dict(sm_scale=float("nan")), "sm_scale: must be a finite float > 0"),
    "window_negative": (lambda: dict(window_size=-1), "window_size: must be None or an int >= 0"),
    "window_bool": (lambda: dict(window_size=True), "window_size: must be None or an int >= 0"),
    "backend_unknown": (lambda: dict(backend="cudnn"), "backend: must be 'auto' or one of"),
    # tlx serves head dims 64/128 on sm_90 only; never this call
    "backend_cannot_serve": (lambda: dict(backend="tlx"), "backend: 'tlx' cannot serve this call: "),
}


@pytest.mark.parametrize("name", list(INVALID_CALLS))
def test_invalid_call_raises_value_error_naming_the_argument(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # On GPU the offsets values are checked by a device assertion, which would abort this process's
    # CUDA context (tested in a subprocess below); the debug switch gives the host-side ValueError.
    if ON_GPU:
        monkeypatch.setenv(front_door.DEBUG_CHECKS_ENV, "1")
    overrides, message = INVALID_CALLS[name]
    with pytest.raises(ValueError, match="^" + message):
        _call(**overrides())


def test_valid_call_passes() -> None:
    _call()
    _call(query=torch.randn(3, 4, 16, device=DEVICE), query_offset=None, broadcast_q=True, max_seq_len_q=3)


# -----------------------------------------------------------------------------------------------
# The asynchronous (GPU) path of the offsets checks
# -----------------------------------------------------------------------------------------------


def test_async_offsets_check_names_the_argument() -> None:
    # On CPU torch._assert_async raises at once; on GPU it would abort the CUDA context.
    bad = torch.tensor([0, 4, 3, 8])
    with pytest.raises(RuntimeError, match="^key_offset: must start at 0, be non-decreasing"):
        front_door._assert_offsets_async("key_offset", bad, 8, "key.shape[0]", 5, "max_seq_len_kv")


def test_async_offsets_check_runs_once_per_tensor_version(monkeypatch: pytest.MonkeyPatch) -> None:
    asserts: list[str] = []
    assert_async = torch._assert_async
    monkeypatch.setattr(torch, "_assert_async", lambda cond, msg: (asserts.append(msg), assert_async(cond, msg)))
    offsets = torch.tensor([0, 3, 3, 8])

    def check(max_len: int) -> None:
        front_door._assert_offsets_async("key_offset", offsets, 8, "rows", max_len, "max")

    check(5)
    check(5)
    assert len(asserts) == 1, "the same offsets tensor is asserted once"
    check(6)
    assert len(asserts) == 2, "a different max length is a different check"
    offsets[2] = 9  # in-place edit bumps the tensor version: checked again, and now invalid
    with pytest.raises(RuntimeError, match="^key_offset:"):
        check(6)


def test_async_offsets_check_of_inference_tensors_runs_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inference tensors keep no version counter (reading it raises): always checked, never cached."""
    asserts: list[str] = []
    assert_async = torch._assert_async
    monkeypatch.setattr(torch, "_assert_async", lambda cond, msg: (asserts.append(msg), assert_async(cond, msg)))
    with torch.inference_mode():
        offsets = torch.tensor([0, 3, 3, 8])
        for _ in range(2):
            front_door._assert_offsets_async("key_offset", offsets, 8, "rows", 5, "max")
        offsets[2] = 9
        with pytest.raises(RuntimeError, match="^key_offset:"):
            front_door._assert_offsets_async("key_offset", offsets, 8, "rows", 5, "max")
    assert len(asserts) == 3 and offsets not in front_door._ASYNC_CHECKED


@pytest.mark.skipif(not ON_GPU, reason="needs CUDA")
def test_debug_checks_raise_value_error_on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(front_door.DEBUG_CHECKS_ENV, "1")
    with pytest.raises(ValueError, match="^key_offset: must be non-decreasing"):
        _call(key_offset=_offsets(0, 4, 3, 8), backend="triton")


@pytest.mark.skipif(not ON_GPU, reason="needs CUDA")
def test_bad_offsets_on_gpu_stop_the_process_with_the_rule() -> None:
    """Without the debug switch, bad offsets on CUDA trip the asynchronous device assertion: the
    process stops (no wrong answer, no out-of-bounds read) and the message names the argument."""
    program = (
        "import torch\n"
        "from kernels import jagged_flash_attention\n"
        "q = torch.randn(8, 2, 64, device='cuda', dtype=torch.bfloat16)\n"
        "good = torch.tensor([0, 3, 3, 8], device='cuda')\n"
        "bad = torch.tensor([0, 4, 3, 8], device='cuda')\n"
        "out = jagged_flash_attention(q, q, q, good, bad, 5, 5, backend='triton')\n"
        "torch.cuda.synchronize()\n"
        "print('NOT STOPPED')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != front_door.DEBUG_CHECKS_ENV}
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0 and "NOT STOPPED" not in result.stdout
    assert "key_offset: must start at 0, be non-decreasing" in result.stderr, result.stderr[-2000:]


@pytest.mark.skipif(not ON_GPU, reason="needs CUDA")
@pytest.mark.parametrize("broadcast_q", [False, True])
def test_gpu_hot_path_does_not_sync(broadcast_q: bool) -> None:
    """Validation, backend selection, forward and backward enqueue work without a device->host sync."""
    query = torch.randn(3 if broadcast_q else 8, 4, 64, device=DEVICE, requires_grad=True)
    key = torch.randn(8, 2, 64, device=DEVICE, requires_grad=True)
    value = torch.randn(8, 2, 64, device=DEVICE, requires_grad=True)
    query_offset = None if broadcast_q else offsets_of(LENGTHS)

    def step(key_offset: torch.Tensor) -> None:
        out = jagged_flash_attention(query, key, value, query_offset, key_offset, 5, 5, causal=True,
                                     broadcast_q=broadcast_q, backend="triton")  # fmt: skip
        out.sum().backward()

    step(offsets_of(LENGTHS, torch.int32))  # autotuning and compilation synchronise; the steady state must not
    fresh_key_offset = offsets_of(LENGTHS, torch.int32)  # a new tensor: validated again
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step(fresh_key_offset)
    finally:
        torch.cuda.set_sync_debug_mode("default")
