"""A kernel that leaves NaN in every SM's shared memory, for tests of kernels that read shared
memory they have not written (GPU with fbtriton's TLX only; imported by those tests)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

TILES = 13  # 13 x 16 KB: the shared memory the TLX kernels use, and one CTA per SM


@triton.jit
def _fill_with_nan(sink_ptr, N_TILES: tl.constexpr):
    tiles = tlx.local_alloc((64, 128), tl.bfloat16, N_TILES)
    for i in tl.static_range(N_TILES):
        tlx.local_store(tiles[i], tl.full([64, 128], float("nan"), tl.bfloat16))
    # a value read back and stored, so that the stores cannot be dropped
    tl.store(sink_ptr + tl.program_id(0), tl.sum(tlx.local_load(tiles[N_TILES - 1]).to(tl.float32)))


def fill_shared_memory_with_nan(device: int | None = None) -> None:
    """Two CTAs per SM write NaN over 208 KB of shared memory each; checks that they did."""
    n_sm = torch.cuda.get_device_properties(device or 0).multi_processor_count
    sink = torch.zeros(2 * n_sm, device="cuda" if device is None else f"cuda:{device}")
    _fill_with_nan[(2 * n_sm,)](sink, N_TILES=TILES, num_warps=4)
    if not sink.isnan().all():
        raise AssertionError("the shared-memory fill did not read its NaN back")
