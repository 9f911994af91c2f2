"""Triton helpers shared by the JFA forward and backward kernels (also callable from TLX kernels).

Conventions: a *tile* is the block of rows a program keeps resident (query rows in the forward and
dQ kernels, key rows in the dK/dV kernel); the other side is *streamed* in blocks. Streamed rows
past the sequence end are the next sequence's data (or out of bounds), so they are masked; tile
rows past the end only produce values that are never stored.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# Kernels are decorated (compiled or interpreted) at import, so this is the mode they run in.
INTERPRETER: bool = triton.knobs.runtime.interpret


def _patch_triton_36_interpreter() -> None:
    """Two fixes to Triton 3.6's interpreter (CPU runs under TRITON_INTERPRET=1):

    * it holds scalars as shape-(1,) arrays and turns loop bounds into ints with ``int(array)``,
      which NumPy >= 2.4 rejects: use ``.item()``;
    * it re-patches ``triton.language`` (``inspect.getmembers``) on every call of a nested
      ``@triton.jit`` helper, which dominated run time: patch each language module once a launch.
    """
    from triton.runtime import interpreter

    patch_tensor = interpreter._patch_lang_tensor

    def patch_tensor_with_item_index(tensor, scope):  # type: ignore[no-untyped-def]
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    languages_patched_in_launch: set[int] = set()
    launch_kernel = interpreter.GridExecutor.__call__

    def launch_kernel_tracking_patches(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        languages_patched_in_launch.clear()
        return launch_kernel(self, *args, **kwargs)

    def call_helper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        languages = {id(value) for value in self.fn.__globals__.values() if value is tl or value is tl.core}
        if not languages <= languages_patched_in_launch:
            interpreter._patch_lang(self.fn)
            languages_patched_in_launch.update(languages)
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as error:
            raise interpreter.InterpreterError(repr(error)) from error

    interpreter._patch_lang_tensor = patch_tensor_with_item_index
    interpreter.GridExecutor.__call__ = launch_kernel_tracking_patches
    interpreter.InterpretedFunction.__call__ = call_helper


if INTERPRETER:
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(tl.cdiv, InterpretedFunction):  # triton.language was decorated in compiled mode
        raise ImportError("TRITON_INTERPRET=1 was set after triton was first imported; set it before")
    if triton.__version__.startswith("3.6."):
        _patch_triton_36_interpreter()

LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
# Finite stand-in for -inf in masked scores: exp2(MASKED_SCORE - m) is exactly 0 against any real
# row max, and a row that never sees a visible key keeps m == MASKED_SCORE (so no inf - inf NaN).
MASKED_SCORE: tl.constexpr = tl.constexpr(-1.0e30)


AUTOTUNE_ENV = "JFA_TRITON_AUTOTUNE"
AUTOTUNE_KEY = ["HEAD_DIM", "GROUP_SIZE", "IS_CAUSAL", "HAS_WINDOW", "BROADCAST_Q", "q_len_bucket", "kv_len_bucket"]


def block_configs(*shapes: tuple[int, int, int, int]) -> list[triton.Config]:
    """Configs from (BLOCK_M, BLOCK_N, num_warps, num_stages) tuples; the first is the default."""
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in shapes]


def autotune(configs: list[triton.Config], fp32_configs: list[triton.Config]):  # type: ignore[no-untyped-def]
    """``triton.autotune`` over ``configs`` for fp16/bf16 inputs, over ``fp32_configs`` (small tiles:
    IEEE float32 dots are slow to compile and register-hungry) for float32 inputs.

    ``JFA_TRITON_AUTOTUNE=0`` (read per tuning) takes each list's first config without a search:
    the tests use it, since they would otherwise compile every config for every option combination.
    Under the interpreter there is one 16x16 config (tiny test sequences still cross blocks).
    """
    if INTERPRETER:
        return triton.autotune(block_configs((16, 16, 4, 1)), key=AUTOTUNE_KEY)

    def candidates(all_configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
        chosen = fp32_configs if kwargs["DOT_PRECISION"] == "ieee" else configs
        return chosen if os.environ.get(AUTOTUNE_ENV, "1") != "0" else chosen[:1]

    return triton.autotune(
        configs + fp32_configs, key=AUTOTUNE_KEY, prune_configs_by={"early_config_prune": candidates}
    )


def seq_len_bucket(max_seq_len: int) -> int:
    """Autotune key for a length: its next power of two, so varying batch maxima reuse a tuning."""
    return triton.next_power_of_2(max(max_seq_len, 1))


def dot_precision(dtype_is_fp32: bool) -> str:
    """float32 inputs keep float32 products (TF32 would miss the 1e-4 accuracy of fp32 calls)."""
    return "ieee" if dtype_is_fp32 else "tf32"


@triton.jit
def sequence_bounds(offsets_ptr, b):
    """(first row as int64, length as int32) of batch element b in a jagged tensor. int32 lengths
    keep the block loops' induction variables 32-bit, which the software pipeliner needs."""
    start = tl.load(offsets_ptr + b).to(tl.int64)
    end = tl.load(offsets_ptr + b + 1).to(tl.int64)
    return start, (end - start).to(tl.int32)


@triton.jit
def visible(q_pos, kv_pos, window, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """Mask predicate (broadcasting q_pos against kv_pos): j <= i if causal, |i - j| <= W if windowed."""
    keep = q_pos >= 0  # all true, with the broadcast shape once combined below
    if IS_CAUSAL:
        keep = keep & (kv_pos <= q_pos)
    if HAS_WINDOW:
        keep = keep & (kv_pos >= q_pos - window) & (kv_pos <= q_pos + window)
    return keep


@triton.jit
def kv_blocks_for_q_tile(m_lo, m_hi, kv_len, window, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                         BLOCK_N: tl.constexpr):  # fmt: skip
    """KV blocks a query tile (rows [m_lo, m_hi), m_hi clipped to the sequence) must visit.

    Returns (lo, full_lo, full_hi, hi): blocks starting in [lo, hi) hold every key visible to some
    row of the tile; the aligned sub-range [full_lo, full_hi) holds only keys < kv_len that every
    row sees, so it needs no mask. The three loops [lo, full_lo), [full_lo, full_hi),
    [full_hi, hi) with step BLOCK_N cover each block once.
    """
    lo = 0
    hi = kv_len
    full_lo = 0
    full_hi = kv_len
    if IS_CAUSAL:
        hi = tl.minimum(hi, m_hi)  # j <= i <= m_hi - 1
        full_hi = tl.minimum(full_hi, m_lo + 1)  # j <= m_lo
    if HAS_WINDOW:
        lo = tl.maximum(m_lo - window, 0)
        hi = tl.minimum(hi, m_hi + window)
        full_lo = tl.maximum(m_hi - 1 - window, 0)
        full_hi = tl.minimum(full_hi, m_lo + window + 1)
    return _block_ranges(lo, full_lo, full_hi, hi, BLOCK_N)


@triton.jit
def q_blocks_for_kv_tile(n_lo, n_hi, q_len, window, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                         BLOCK_M: tl.constexpr):  # fmt: skip
    """Query blocks a KV tile (rows [n_lo, n_hi), n_hi clipped to the sequence) must visit; same
    return convention as :func:`kv_blocks_for_q_tile`, with queries as the streamed side."""
    lo = 0
    hi = q_len
    full_lo = 0
    full_hi = q_len
    if IS_CAUSAL:
        lo = n_lo  # i >= j >= n_lo
        full_lo = n_hi - 1  # i >= every j of the tile
    if HAS_WINDOW:
        lo = tl.maximum(lo, n_lo - window)
        hi = tl.minimum(hi, n_hi + window)
        full_lo = tl.maximum(full_lo, n_hi - 1 - window)
        full_hi = tl.minimum(full_hi, n_lo + window + 1)
    return _block_ranges(lo, full_lo, full_hi, hi, BLOCK_M)


@triton.jit
def _block_ranges(lo, full_lo, full_hi, hi, BLOCK: tl.constexpr):
    """Aligns raw row bounds to blocks: masked [lo, full_lo), unmasked [full_lo, full_hi),
    masked [full_hi, hi); lo <= full_lo <= full_hi <= max(lo, ceil(hi))."""
    lo = (lo // BLOCK) * BLOCK
    hi_ceil = tl.maximum(tl.cdiv(hi, BLOCK) * BLOCK, lo)
    full_lo = tl.minimum(tl.maximum(tl.cdiv(full_lo, BLOCK) * BLOCK, lo), hi_ceil)
    full_hi = tl.minimum(tl.maximum((full_hi // BLOCK) * BLOCK, full_lo), hi_ceil)
    return lo, full_lo, full_hi, hi


@triton.jit
def load_rows(base_ptr, rows, stride_row, n_rows, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
              CHECK_ROWS: tl.constexpr):  # fmt: skip
    """Loads a [len(rows), BLOCK_D] tile of one head; rows >= n_rows (if CHECK_ROWS) and
    columns >= HEAD_DIM read as 0."""
    cols = tl.arange(0, BLOCK_D)
    ptrs = base_ptr + rows[:, None].to(tl.int64) * stride_row + cols[None, :]
    if CHECK_ROWS:
        mask = rows[:, None] < n_rows
        if BLOCK_D != HEAD_DIM:
            mask = mask & (cols[None, :] < HEAD_DIM)
        tile = tl.load(ptrs, mask=mask, other=0.0)
    elif BLOCK_D != HEAD_DIM:
        tile = tl.load(ptrs, mask=cols[None, :] < HEAD_DIM, other=0.0)
    else:
        tile = tl.load(ptrs)
    return tile


@triton.jit
def store_rows(base_ptr, tile, rows, stride_row, n_rows, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """Stores rows < n_rows and columns < HEAD_DIM of a tile, cast to the destination dtype."""
    cols = tl.arange(0, BLOCK_D)
    ptrs = base_ptr + rows[:, None].to(tl.int64) * stride_row + cols[None, :]
    mask = rows[:, None] < n_rows
    if BLOCK_D != HEAD_DIM:
        mask = mask & (cols[None, :] < HEAD_DIM)
    tl.store(ptrs, tile.to(base_ptr.dtype.element_ty), mask=mask)
