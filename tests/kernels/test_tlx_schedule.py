"""The TLX persistent schedule and block ranges, checked exhaustively against brute force.

Plain Triton (no TLX): runs on a GPU, or on the CPU under TRITON_INTERPRET=1; skipped otherwise.
A probe kernel walks every CTA's persistent loop exactly like the TLX kernels do (`tile_at`,
`n_iterations`, `kv_block_range`, `kv_unmasked_range`) and records what each tile would touch.
The checks: every non-empty (batch, head, q-block) tile is visited exactly once whatever the grid
size; its KV block range covers every visible (query, key) pair; the blocks it runs without a mask
are fully visible to every real query row, and the first block is declared unmasked exactly when
it is.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels.tlx_schedule import (PACKED_MAX_BLOCK, PRIORITY_BUCKETS, build_schedule,
                                  kv_block_range, kv_unmasked_range, n_iterations, q_block_range,
                                  schedule_fields, seq_bounds, tile_at)
from tests.kernels.plain_triton import DEVICE, INTERPRET, needs_gpu_or_interpreter

_OLD_INTERPRETER = INTERPRET and tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 7)
pytestmark = [needs_gpu_or_interpreter]
# the triton 3.6 interpreter cannot run a loop whose bound was loaded from memory (the probe's)
needs_new_interpreter = pytest.mark.skipif(_OLD_INTERPRETER,
                                           reason="needs fbtriton 3.7's interpreter (TLX extra)")


@triton.jit
def _probe_kernel(q_off, k_off, tile_entry, n_entries, rec, B, H, q_len, NUM_MB, window,
                  ctas_per_pair, tile_window, MAX_IT, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                  BROADCAST_Q: tl.constexpr, RESIDENT: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    n_tiles = tl.load(n_entries) * H
    n_iter = n_iterations(n_tiles, n_prog, B, ctas_per_pair, RESIDENT)
    for it in range(0, n_iter):
        valid, b, h, mb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                  ctas_per_pair, tile_window, RESIDENT)
        if valid:
            q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q)
            m0 = mb * BLOCK_M
            lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW, BLOCK_M, BLOCK_N)
            first, a, c = kv_unmasked_range(m0, qlen, klen, window, lo, nblk, CAUSAL, HAS_WINDOW,
                                            BLOCK_M, BLOCK_N)
            base = rec + (pid * MAX_IT + it) * 9
            tl.store(base + 0, 1)
            tl.store(base + 1, b)
            tl.store(base + 2, h)
            tl.store(base + 3, mb)
            tl.store(base + 4, lo)
            tl.store(base + 5, nblk)
            tl.store(base + 6, a)
            tl.store(base + 7, c)
            tl.store(base + 8, first.to(tl.int32))


def _decode(entries: torch.Tensor) -> list[tuple[int, int]]:
    """The builders' int64 entries `b << 32 | block` as (b, block)."""
    assert entries.dtype == torch.int64
    return [(e >> 32, e & 0xFFFFFFFF) for e in entries.cpu().tolist()]


def _run(q_lens, k_lens, H, bcast, q_len, causal, window, block_m, block_n, n_prog, resident,
         tile_window=1):
    """Every CTA's visited tiles in visiting order (rows: 1, b, h, mb, lo, nblk, a, c, first), the number
    of q-blocks, and the schedule's entries as (b, mb); tile_window 0: one sequence's q-blocks, as
    the launchers."""
    B = len(k_lens)
    off = lambda ls: torch.tensor([0] + ls).cumsum(0).to(DEVICE, torch.int32)
    k_off = off(k_lens)
    q_off = None if bcast else off(q_lens)
    max_q = q_len if bcast else max(q_lens)
    num_mb = max(1, triton.cdiv(max_q, block_m))
    entries, n_entries = build_schedule(q_off, k_off, B, q_len, num_mb, window, causal, bcast,
                                        block_m, block_n)
    pairs = H * num_mb
    cpp = n_prog // pairs if resident else 1
    if resident:
        n_prog = pairs * cpp
    max_it = B * H * num_mb + 1
    rec = torch.zeros(n_prog * max_it * 9, dtype=torch.int32, device=DEVICE)
    _probe_kernel[(n_prog,)](q_off if q_off is not None else k_off, k_off, entries, n_entries, rec,
                             B, H, q_len, num_mb, 0 if window is None else window, cpp,
                             tile_window or num_mb, max_it,
                             CAUSAL=causal, HAS_WINDOW=window is not None, BROADCAST_Q=bcast,
                             RESIDENT=resident, BLOCK_M=block_m, BLOCK_N=block_n)
    rec = rec.view(-1, 9).cpu()
    return rec[rec[:, 0] == 1].tolist(), num_mb, _decode(entries[:int(n_entries)])


def _check(q_lens, k_lens, H, bcast, q_len, causal, window, block_m, block_n, n_prog, resident,
           tile_window=1):
    tiles, num_mb, _ = _run(q_lens, k_lens, H, bcast, q_len, causal, window, block_m, block_n,
                            n_prog, resident, tile_window)
    seen = {}
    for _, b, h, mb, lo, nblk, a, c, first in tiles:
        assert (b, h, mb) not in seen, f"tile {(b, h, mb)} visited twice"
        seen[(b, h, mb)] = (lo, nblk, a, c, first)
    for b in range(len(k_lens)):
        qlen = q_len if bcast else q_lens[b]
        klen = k_lens[b]
        for mb in range(num_mb):
            m0 = mb * block_m
            for h in range(H):
                if m0 >= qlen:
                    assert (b, h, mb) not in seen
                    continue
                assert (b, h, mb) in seen, f"tile {(b, h, mb)} never visited"
                lo, nblk, a, c, first = seen[(b, h, mb)]
                assert nblk == 0 or 1 <= a <= c <= nblk
                rows = range(m0, min(m0 + block_m, qlen))
                for i in rows:
                    for j in range(klen):
                        vis = (not causal or j <= i) and (window is None or abs(i - j) <= window)
                        if vis:
                            assert lo <= j < lo + nblk * block_n, (b, mb, i, j, lo, nblk)
                full = lambda n0: all(j < klen and (not causal or j <= i)
                                      and (window is None or abs(i - j) <= window)
                                      for i in rows for j in range(n0, n0 + block_n))
                for blk in range(a, c):
                    assert full(lo + blk * block_n), (b, mb, blk)
                assert first == (nblk > 0 and full(lo)), (b, mb, lo, nblk, first)


@needs_new_interpreter
# a window >= 64 lets a 128-key block start before a row's window yet fit whole inside another's
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, 37), (True, 5),
                                           (False, 100)])
@pytest.mark.parametrize("n_prog", [1, 3, 7])
@pytest.mark.parametrize("tile_window", [1, 0, 2])  # 0: one sequence's q-blocks (3 here)
def test_jagged_schedule(causal, window, n_prog, tile_window):
    g = torch.Generator().manual_seed(n_prog)
    k_lens = torch.randint(0, 300, (9,), generator=g).tolist()
    k_lens[0], k_lens[1] = 0, 300
    q_lens = list(k_lens) if not window else torch.randint(0, 260, (9,), generator=g).tolist()
    _check(q_lens, k_lens, 2, False, 0, causal, window, 128, 128, n_prog, False, tile_window)


@needs_new_interpreter
@pytest.mark.parametrize("tile_window", [1, 3, 0])
def test_tile_window_order(tile_window):
    """One CTA walks the tiles in order t = 0, 1, ...: windows of `tile_window` consecutive entries
    (the last one shorter), heads outer inside a window; window 1 = each entry's heads in a row."""
    k_lens = [300, 0, 130, 200, 64, 1, 300]  # 19 entries: up to 5 q-blocks of 64 per sequence
    H = 3
    tiles, num_mb, entries = _run(k_lens, k_lens, H, False, 0, False, None, 64, 64, 1, False,
                                  tile_window)
    width = tile_window or num_mb
    want = []
    for first in range(0, len(entries), width):
        window = entries[first:first + width]
        want += [(b, h, mb) for h in range(H) for b, mb in window]
    assert [(b, h, mb) for _, b, h, mb, *_ in tiles] == want
    assert width == 1 or len(entries) % width != 0  # the case has a short last window


@needs_new_interpreter
@pytest.mark.parametrize("causal,window", [(False, None), (True, 20)])
@pytest.mark.parametrize("q_len,block_m,block_n", [(192, 192, 64), (300, 128, 128), (1, 128, 128)])
@pytest.mark.parametrize("n_prog,resident", [(7, True), (5, False), (12, True)])
def test_broadcast_schedule(causal, window, q_len, block_m, block_n, n_prog, resident):
    g = torch.Generator().manual_seed(q_len)
    k_lens = torch.randint(0, 260, (11,), generator=g).tolist()
    k_lens[3] = 0
    H = 2
    if resident and H * max(1, triton.cdiv(q_len, block_m)) > n_prog:
        pytest.skip("more (head, q-block) pairs than CTAs")
    _check(None, k_lens, H, True, q_len, causal, window, block_m, block_n, n_prog, resident)


@triton.jit
def _q_range_probe(n0_ptr, klen_ptr, qlen_ptr, out_ptr, window, N, CAUSAL: tl.constexpr,
                   HAS_WINDOW: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_MQ: tl.constexpr,
                   BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    ok = i < N
    n0 = tl.load(n0_ptr + i, mask=ok, other=0)
    klen = tl.load(klen_ptr + i, mask=ok, other=0)
    qlen = tl.load(qlen_ptr + i, mask=ok, other=0)
    lo, nsteps = q_block_range(n0, klen, qlen, window, CAUSAL, HAS_WINDOW, BLOCK_N, BLOCK_MQ)
    tl.store(out_ptr + 2 * i, lo, mask=ok)
    tl.store(out_ptr + 2 * i + 1, nsteps, mask=ok)


@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, 37), (True, 5)])
def test_q_block_range_covers_visible_pairs(causal, window):
    """The KV-stationary backward's query range: every (query, key) pair a KV block sees is in it."""
    cases = [(n0, klen, qlen) for klen in (0, 1, 100, 130, 300) for qlen in (0, 1, 64, 200, 333)
             for n0 in range(0, max(klen, 1), 128)]
    t = lambda col: torch.tensor([c[col] for c in cases], dtype=torch.int32, device=DEVICE)
    out = torch.zeros(2 * len(cases), dtype=torch.int32, device=DEVICE)
    _q_range_probe[(1,)](t(0), t(1), t(2), out, 0 if window is None else window, len(cases),
                         CAUSAL=causal, HAS_WINDOW=window is not None, BLOCK_N=128, BLOCK_MQ=64,
                         BLOCK=triton.next_power_of_2(len(cases)))
    out = out.view(-1, 2).cpu().tolist()
    for (n0, klen, qlen), (lo, nsteps) in zip(cases, out):
        for j in range(n0, min(n0 + 128, klen)):
            for i in range(qlen):
                if (not causal or j <= i) and (window is None or abs(i - j) <= window):
                    assert lo <= i < lo + nsteps * 64, (n0, klen, qlen, lo, nsteps, i, j)


@pytest.mark.parametrize("fields", [None, 1, 2, 3, 7])  # classes per counting-sort pass
@pytest.mark.parametrize("kv_stationary", [False, True])
@pytest.mark.parametrize("bcast", [False, True])
def test_schedule_kernel_matches_torch(kv_stationary, bcast, fields):
    g = torch.Generator().manual_seed(7)
    B = 37
    k_lens = torch.randint(0, 400, (B,), generator=g).tolist()
    q_lens = torch.randint(0, 300, (B,), generator=g).tolist()
    k_lens[0] = q_lens[1] = 0
    off = lambda ls: torch.tensor([0] + ls).cumsum(0).to(DEVICE, torch.int32)
    q_off = None if bcast else off(q_lens)
    args = (q_off, off(k_lens), B, 192 if bcast else 0, 4, 20, True, bcast, 128, 64)
    a = build_schedule(*args, kv_stationary=kv_stationary, fields=fields)
    b = build_schedule(*args, kv_stationary=kv_stationary, use_torch=True)
    assert torch.equal(a[1].cpu(), b[1].cpu())
    n = int(a[1])
    assert torch.equal(a[0][:n].cpu(), b[0][:n].cpu())


def _expected_order(q_lens, k_lens, q_len, num_mb, causal, bcast, block_m, block_n):
    """The schedule's definition, in Python: non-empty Q-stationary entries heaviest first (KV
    blocks, exact below PRIORITY_BUCKETS, else scaled into that many classes), ties in batch order,
    grouped by q-block first with broadcast_q."""
    work = {}
    for b, klen in enumerate(k_lens):
        qlen = q_len if bcast else q_lens[b]
        for mb in range(num_mb):
            m0 = mb * block_m
            if m0 < qlen:
                hi = min(klen, min(m0 + block_m, qlen)) if causal else klen
                work[b * num_mb + mb] = -(-hi // block_n) if hi > 0 else 0
    top = max(work.values(), default=0)
    bucket = {e: w if top < PRIORITY_BUCKETS else w * PRIORITY_BUCKETS // (top + 1)
              for e, w in work.items()}
    return sorted(work, key=lambda e: ((e % num_mb) if bcast else 0, -bucket[e], e))


@pytest.mark.parametrize("bcast", [False, True])
@pytest.mark.parametrize("max_len", [300, 5000])  # KV block counts below and above PRIORITY_BUCKETS
def test_schedule_order_heaviest_first_both_builders(bcast, max_len):
    g = torch.Generator().manual_seed(max_len)
    B = 53
    k_lens = torch.randint(0, max_len, (B,), generator=g).tolist()
    q_lens = torch.randint(0, max_len, (B,), generator=g).tolist()
    k_lens[0], q_lens[1], k_lens[2] = 0, 0, max_len
    block_m, block_n = 128, 64
    q_len = 300 if bcast else 0
    num_mb = triton.cdiv(q_len if bcast else max(q_lens), block_m)
    off = lambda ls: torch.tensor([0] + ls).cumsum(0).to(DEVICE, torch.int32)
    args = (None if bcast else off(q_lens), off(k_lens), B, q_len, num_mb, None, True, bcast,
            block_m, block_n)
    want = _expected_order(q_lens, k_lens, q_len, num_mb, True, bcast, block_m, block_n)
    for use_torch in (False, True):
        entries, n = build_schedule(*args, use_torch=use_torch)
        assert int(n) == len(want)
        assert _decode(entries[:len(want)]) == [divmod(e, num_mb) for e in want], use_torch


# 159 entries (7 classes per pass at most), 1,800 (5), 2,100 (4) and 9,000 (beyond
# PACKED_MAX_BLOCK: 1)
@pytest.mark.parametrize("B,fields", [(53, 7), (53, 4), (600, None), (600, 1), (700, None),
                                      (3000, None)])
@pytest.mark.parametrize("bcast", [False, True])
def test_schedule_order_many_classes(B, fields, bcast):
    """The order with PRIORITY_BUCKETS classes (times three q-blocks with broadcast_q) in passes of
    several classes, a pass's classes partly empty, against the Python definition."""
    g = torch.Generator().manual_seed(B)
    k_lens = torch.randint(0, 5000, (B,), generator=g).tolist()
    q_lens = torch.randint(0, 190, (B,), generator=g).tolist()
    k_lens[1], q_lens[2], k_lens[3] = 0, 0, 5000
    block_m, block_n, q_len = 64, 64, 190 if bcast else 0
    num_mb = 3
    off = lambda ls: torch.tensor([0] + ls).cumsum(0).to(DEVICE, torch.int32)
    want = _expected_order(q_lens, k_lens, q_len, num_mb, False, bcast, block_m, block_n)
    entries, n = build_schedule(None if bcast else off(q_lens), off(k_lens), B, q_len, num_mb, None,
                                False, bcast, block_m, block_n, fields=fields)
    assert int(n) == len(want)
    assert _decode(entries[:len(want)]) == [divmod(e, num_mb) for e in want]


@pytest.mark.parametrize("fields", [None, 1])
def test_schedule_single_class_in_batch_order(fields):
    """PMA's dK/dV build: every kv-block of a broadcast query has q_len's steps, so one class
    (ranked in one int32 pass whatever `fields`): the non-empty kv-blocks in batch order."""
    g = torch.Generator().manual_seed(11)
    B, block_m, num_mb = 700, 128, 3
    k_lens = torch.randint(0, 3 * block_m, (B,), generator=g).tolist()
    k_lens[0] = k_lens[5] = 0
    k_off = torch.tensor([0] + k_lens).cumsum(0).to(DEVICE, torch.int32)
    entries, n = build_schedule(None, k_off, B, 192, num_mb, None, False, True, block_m, 64,
                                kv_stationary=True, fields=fields)
    want = [(b, kb) for b, klen in enumerate(k_lens) for kb in range(triton.cdiv(klen, block_m))]
    assert int(n) == len(want)
    assert _decode(entries[:len(want)]) == want


def test_schedule_fields_per_block_size():
    """A count field holds the block's entry count; the fields fit 63 bits; one class per pass
    beyond PACKED_MAX_BLOCK."""
    for block in (16, 256, 1024, PACKED_MAX_BLOCK):
        fields = schedule_fields(block)
        assert fields * block.bit_length() <= 63 < (fields + 1) * block.bit_length()
    assert [schedule_fields(n) for n in (16, 256, 1024, 4096, 8192)] == [12, 7, 5, 4, 4]
    assert schedule_fields(2 * PACKED_MAX_BLOCK) == 1


@pytest.mark.parametrize("num_warps", [0, 3, 64])
def test_schedule_warps_out_of_range(num_warps):
    k_off = torch.arange(0, 17, device=DEVICE, dtype=torch.int32)
    with pytest.raises(ValueError, match=rf"num_warps: must be a power of two from 1 to 32, got {num_warps}"):
        build_schedule(None, k_off, 16, 64, 1, None, False, True, 64, 64, num_warps=num_warps)


@pytest.mark.parametrize("fields", [0, 6])
def test_schedule_fields_out_of_range(fields):
    """1,024 entries fit five count fields of 11 bits."""
    k_off = torch.arange(0, 1025, device=DEVICE, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"fields: must be in 1\.\.5 for 1024 entries.*got " + str(fields)):
        build_schedule(None, k_off, 1024, 64, 1, None, False, True, 64, 64, fields=fields)

# The probe's integer arguments. The JIT turns an integer argument equal to 1 into a compile-time
# constant (a plain int inside the kernel), so the helpers must compile with any of them at 1.
_PROBE_INTS = ("B", "H", "q_len", "NUM_MB", "window", "ctas_per_pair", "tile_window", "MAX_IT")


def compile_probe_with_ones(resident: bool) -> None:
    """Compiles the probe for sm_90 ahead of time with every integer argument specialised to 1."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    constants = dict(CAUSAL=True, HAS_WINDOW=True, BROADCAST_Q=resident, RESIDENT=resident,
                     BLOCK_M=128, BLOCK_N=64, **{name: 1 for name in _PROBE_INTS})
    signature = {"q_off": "*i32", "k_off": "*i32", "tile_entry": "*i64", "n_entries": "*i32",
                 "rec": "*i32", **{name: "constexpr" for name in constants}}
    source = ASTSource(_probe_kernel, signature, constants)
    triton.compile(source, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


@pytest.mark.parametrize("resident", [False, True])
def test_helpers_compile_with_integer_arguments_of_one(resident):
    """A launch with one head (or one of any count) compiles: the H200 run of 2026-12-01 failed to
    compile the dK/dV pass of every single-KV-head call (`(tile_window * H).to(...)` on an int)."""
    from tests.kernels.compiled_subprocess import run_without_interpreter

    pytest.importorskip("triton.backends.nvidia")
    code = ("from tests.kernels.test_tlx_schedule import compile_probe_with_ones as c; "
            f"c({resident})")
    result = run_without_interpreter(["-c", code], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
