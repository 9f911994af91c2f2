"""The TLX kernels compiled with OWN_FENCES (`tlx_launch.fence_insertion_skipped`) fence their own
generic-proxy shared stores before any async-proxy read.

Without Triton's fence-insertion pass nothing else orders a `local_store` before a wgmma or TMA
store that reads the same bytes, so each kernel's TTGIR is checked, role by role, in program order:
every store into a tile with an NVMMA layout (the layouts wgmma and TMA read) meets a
`fence_async_shared` or a read-back of the same tile (a generic staging read: `local_load`) before
the next wgmma, TMA store or barrier arrival (which could hand the tile to another role). Stores of
row statistics (swizzled layouts, only ever read back by `local_load`) are not subject to it, and
no `local_alloc` may copy from registers (its fence was the pass's).

Compiles for sm_90 without a GPU where fbtriton (TLX) imports; each compile runs in a subprocess
without TRITON_INTERPRET.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton.language.extra.tlx")

ROOT = Path(__file__).resolve().parents[2]

# the op that a store must not reach unfenced: an async read of shared memory, or a hand-over
_ASYNC_OR_HANDOVER = ("ttng.warp_group_dot ", "ttng.async_tma_copy_local_to_global", "ttng.arrive_barrier")


def unfenced_stores(ttgir: str) -> list[str]:
    """The `local_store`s into NVMMA-layout tiles of a TTGIR module that reach a wgmma, a TMA store,
    a barrier arrival or the end of their role before a `fence_async_shared` or a `local_load` of
    the same tile; and every `local_alloc` with a source. One line each, as in the module."""
    nvmma = {m.group(1) for m in re.finditer(r"^(#\w+) = #ttg\.nvmma_shared<", ttgir, re.M)}
    lines = ttgir.splitlines()
    bad = [line.strip() for line in lines if re.search(r"ttg\.local_alloc %", line)]
    for i, line in enumerate(lines):
        m = re.search(r"ttg\.local_store %[\w#]+, (%[\w#]+) : .*memdesc<[^,]+, (#\w+),", line)
        if not m or m.group(2) not in nvmma:
            continue
        tile = m.group(1)
        for later in lines[i + 1:]:
            if "ttng.fence_async_shared" in later or re.search(rf"ttg\.local_load {tile} ", later):
                break
            if any(op in later for op in _ASYNC_OR_HANDOVER) or re.search(r"partition\d+\(|tt\.return", later):
                bad.append(line.strip())
                break
    return bad


def test_the_check_finds_a_missing_fence():
    module = """#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#shared2 = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
    partition0(%a: i32) {
      ttg.local_store %x, %t : tensor<64x64xbf16, #mma> -> !ttg.memdesc<64x64xbf16, #shared, #smem, mutable>
      ttg.local_store %s, %u : tensor<64xf32, #blocked> -> !ttg.memdesc<64xf32, #shared2, #smem, mutable>
      %d = ttng.warp_group_dot %t, %k, %c : !ttg.memdesc<64x64xbf16, #shared, #smem, mutable>
      ttg.local_store %y, %t : tensor<64x64xbf16, #mma> -> !ttg.memdesc<64x64xbf16, #shared, #smem, mutable>
      ttng.fence_async_shared {bCluster = false}
      ttng.arrive_barrier %b, 1 : !ttg.memdesc<1xi64, #shared2, #smem, mutable>
      ttg.local_store %z, %v : tensor<64x128xbf16, #mma1> -> !ttg.memdesc<64x128xbf16, #shared, #smem, mutable>
      %r = ttg.local_load %v : !ttg.memdesc<64x128xbf16, #shared, #smem, mutable> -> tensor<64x128xbf16, #blocked>
      ttng.arrive_barrier %b, 1 : !ttg.memdesc<1xi64, #shared2, #smem, mutable>
      ttg.local_store %w, %t : tensor<64x64xbf16, #mma> -> !ttg.memdesc<64x64xbf16, #shared, #smem, mutable>
    }
    partition1(%a: i32) {
      %p = ttg.local_alloc %w : (tensor<64x64xbf16, #mma>) -> !ttg.memdesc<64x64xbf16, #shared, #smem>
"""
    bad = unfenced_stores(module)
    assert [b.split(":")[0].strip() for b in bad] == [
        "%p = ttg.local_alloc %w",              # copies from registers
        "ttg.local_store %x, %t",               # reaches the wgmma unfenced
        "ttg.local_store %w, %t",               # reaches the end of its role
    ]


_COMPILE = """
import json, sys
sys.path.insert(0, {root!r})
from benchmarks import tlx_compile_check as cc
out = {{}}
for name, cfg, d, dt, causal, window, bcast, q_len in cc.fwd_variants({{"own_fences": True}}):
    if dt == "bf16" and not causal and not window:
        out[name] = cc.compile_fwd(cfg, d, dt, causal, window, bcast, q_len).asm["ttgir"]
for name, kern, d, causal, window, bcast, q_len in cc.bwd_variants():
    if kern != "dq" and not window:
        k = cc.compile_bwd(kern, d, causal, window, bcast, q_len=q_len, overrides={{"own_fences": True}})
        out[name] = k.asm["ttgir"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def own_fences_ttgir() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE.format(root=str(ROOT))], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_own_fences_kernels_fence_every_store_they_read_async(own_fences_ttgir):
    # the forward (self/cross, broadcast; D = 64 and 128), the dK/dV pass (with and without
    # broadcast, causal) and the split-role PMA pass
    names = " ".join(own_fences_ttgir)
    assert "fwd" in names and "bwd-dkdv" in names and "bwd-pma" in names
    for name, ttgir in own_fences_ttgir.items():
        assert "ttng.warp_group_dot" in ttgir, name
        assert unfenced_stores(ttgir) == [], name
