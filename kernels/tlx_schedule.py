"""Device-built persistent schedules for the TLX Hopper JFA kernels (no host sync).

Jagged layout (written down once, shared by every TLX file)::

    values  q_LHD [total_q, H, D]   rows of sequence b: offsets[b] ... offsets[b+1]-1
    offsets       [B+1]             prefix sums, on the device, int32 or int64
    broadcast_q:  q_LHD [q_len, H, D] shared by all b; output row of (b, i) = b*q_len + i

Forward tiles are (batch b, q-head h, q-block mb) with q-block = BLOCK_M consecutive query rows of
one sequence. The KV work of a tile is the number of BLOCK_N key blocks it visits, a pure function of
(qlen, klen, mb, causal, window) computed by `kv_block_range`, the ONE helper that the schedule
builder, the producer warp and the consumer warpgroups all call, so their trip counts agree.

Schedule (built by `build_schedule`, a single Triton program, or torch ops for huge batches; the
launchers take it through `cached_schedule`): the non-empty entries (b, mb) (mb*BLOCK_M < qlen)
heaviest first, ties in batch order; for broadcast_q grouped by q-block first. An entry is stored
as the int64 `b << 32 | mb`, so `tile_at` takes b and mb as its two halves: every warp role decodes
a tile per iteration (run 18, dense B768 forward: ~120 instructions per warp and tile with two
signed runtime divisions, by H and by NUM_MB, ~4 % of the kernel's instructions), so the decode
has no division by NUM_MB and its window divisions are unsigned.
"Heaviest" is the entry's KV block count while every count is below PRIORITY_BUCKETS, else that
count scaled into PRIORITY_BUCKETS classes (the order only balances the CTAs' work; every role
recomputes a tile's range). A counting sort builds it: passes over the (q-block,) classes in order,
each a prefix sum over the entries, instead of a sorting network over all of them (a single-program
`tl.sort` of 8,192 keys took 0.25 ms on the H200, a sixth of a jagged self-attention forward). A
pass ranks `schedule_fields(n)` consecutive classes at once: an entry counts 1 in its class's bit
field of an int64, so one prefix sum holds every class's running count (a pass's latency is
what the build costs: PMA q192 at fill 0.5 has 17 classes).
`tile_entry[i]` holds the i-th entry and `n_entries[0]` the number of non-empty ones (entries past
it are not written).

Two ways to deal the sorted tiles over the persistent CTAs (`tile_at`):
- generic: the sorted entries are cut into windows of `tile_window` consecutive entries; inside a
  window the tiles go head by head (t -> head, then entry), and they are dealt zigzag: iteration k
  of CTA p takes t = k*P + (p if k even else P-1-p). Window 1: tile t = (entry t // H, head t % H),
  the heads of one entry neighbours in time (GQA heads sharing a KV head read it from L2). A window
  of one sequence's blocks (NUM_MB; the launchers' `tile_window=0`) makes the tiles running at the
  same time the q-blocks of a few (batch, head) pairs that share their K/V, the order of the
  tutorial's dense kernel, where with many heads window 1 spreads the CTAs over more (batch, head)
  pairs' K/V than L2 holds (B4 H32 N4096: 32 heads x 2 MB). The launchers take window 0 exactly
  then (`tlx_hopper.tile_window_for`).
- resident (broadcast_q, H*NUM_MB <= #CTAs): CTA p owns one (head, q-block) pair for the whole
  launch and walks that q-block's batches heaviest first, zigzag over the CTAs of its pair, so the
  Q tile is loaded once and stays in shared memory.
"""

from __future__ import annotations

import functools
import weakref

import torch
import triton
import triton.language as tl
from torch.utils.weak import WeakIdKeyDictionary
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from kernels.common import offsets_versioned, tracked_version
from kernels.tlx_launch import launch, trailing_constexprs

MAX_SCHEDULE_BLOCK = 16384  # entries ordered by one Triton program; torch ops beyond
PRIORITY_BUCKETS = 32  # work classes of the heaviest-first order (exact below 32 blocks)
# entries up to which a pass ranks several classes in int64 bit fields (sm_90 at `build_warps`' 8:
# 80-104 registers at 1,024-2,048 entries, 195 at 4,096, 253 and 40 spilled bytes at 8,192; 16
# warps spilled more: 192 bytes at 8,192); beyond, one class per pass in int32
PACKED_MAX_BLOCK = 8192


def schedule_block(n_entries: int) -> int:
    """The one-program build's vector width for n_entries entries (a power of two, at least 16).
    Integer bits, not `triton.next_power_of_2`: that one is a constexpr function whose host call
    costs ~2 us (a launch's host path)."""
    return max(16, 1 << (n_entries - 1).bit_length())


def schedule_fields(block: int) -> int:
    """Classes ranked per counting-sort pass over `block` entries: as many count fields of
    block.bit_length() bits (a count reaches `block`) as 63 bits hold (12 at 16 entries, 5 at
    1,024-2,048, 4 at 4,096-8,192), or 1 above PACKED_MAX_BLOCK."""
    return 63 // block.bit_length() if block <= PACKED_MAX_BLOCK else 1


def build_warps(block: int) -> int:
    """Warps of the one-program build of `block` entries. Run 37 (H200, CUDA-graph device time,
    2 / 4 / 8 / 16 warps): 128 entries 2.9 / 2.5 / 2.7 / 3.3 us; 768-1,024 (the PMA builds)
    11.5-11.6 / 8.1-8.3 / 6.9-7.0 / 7.9-8.1; 6,144-8,192 (self, PMA dK/dV) 8 and 16 alike, 4 up to
    1.8x slower (spills). The cut between 128 and 768 entries is a guess (not measured)."""
    return 4 if block <= 256 else 8


@triton.jit
def wait_for_previous_kernel(PDL: tl.constexpr):
    """PDL (programmatic dependent launch, `FwdConfig.pdl`): the kernel's CTAs started while the
    previous kernel in the stream (the schedule build, which lets them launch at its start) still
    ran; wait here for it to finish and its writes to show. Before this a PDL kernel touches no
    global memory: the schedule is not written yet, and the caching allocator hands out memory on
    stream order, which an early start does not keep."""
    if PDL:
        gdc_wait()


@triton.jit
def kv_block_range(m0, qlen, klen, window, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """KV rows [lo, lo + nblk*BLOCK_N) visited by the q-block starting at row m0 (0 if empty)."""
    rmax = tl.minimum(m0 + BLOCK_M, qlen) - 1  # last real query row of the block
    lo = m0 * 0
    hi = klen
    if CAUSAL:
        hi = tl.minimum(hi, rmax + 1)
    if HAS_WINDOW:
        lo = tl.maximum(m0 - window, 0)
        hi = tl.minimum(hi, rmax + window + 1)
    nblk = tl.where((hi > lo) & (m0 < qlen), (hi - lo + BLOCK_N - 1) // BLOCK_N, 0)
    return lo, nblk


@triton.jit
def q_block_range(n0, klen, qlen, window, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_MQ: tl.constexpr):
    """Query rows [lo, lo + nsteps*BLOCK_MQ) that see some key of the KV block starting at n0.

    The transpose of `kv_block_range`, for the KV-stationary backward (0 steps if the block is empty
    or no query sees it)."""
    jmax = tl.minimum(n0 + BLOCK_N, klen) - 1  # last real key row of the block
    lo = n0 * 0
    hi = qlen
    if CAUSAL:
        lo = n0
    if HAS_WINDOW:
        lo = tl.maximum(lo, n0 - window)
        hi = tl.minimum(hi, jmax + window + 1)
    nsteps = tl.where((hi > lo) & (n0 < klen), (hi - lo + BLOCK_MQ - 1) // BLOCK_MQ, 0)
    return lo, nsteps


@triton.jit
def kv_unmasked_range(m0, qlen, klen, window, lo, nblk, CAUSAL: tl.constexpr,
                      HAS_WINDOW: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(first, a, c): the KV blocks of a q-block that need no mask, where every real row sees
    every key: block 0 (the consumer's prologue) iff first, and blocks [a, c), 1 <= a <= c <= nblk.
    """
    # block j is unmasked iff j_lo <= j < j_hi
    rmax = tl.minimum(m0 + BLOCK_M, qlen) - 1
    upper = klen  # block j is unmasked only if lo + (j+1)*BLOCK_N <= upper
    if CAUSAL:
        upper = tl.minimum(upper, m0 + 1)
    if HAS_WINDOW:
        upper = tl.minimum(upper, m0 + window + 1)
    j_hi = tl.where(upper > lo, (upper - lo) // BLOCK_N, 0)
    j_lo = lo * 0
    if HAS_WINDOW:
        need = rmax - window - lo  # block start must be >= rmax - window
        j_lo = tl.where(need > 0, (need + BLOCK_N - 1) // BLOCK_N, 0)
    first = (nblk > 0) & (j_lo == 0) & (j_hi >= 1)
    a = tl.minimum(tl.maximum(j_lo, 1), nblk)
    c = tl.minimum(tl.maximum(j_hi, a), nblk)
    return first, a, c


@triton.jit
def seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q: tl.constexpr):
    """(q_row0 in query, out_row0 in out, qlen, kv_row0, klen) of batch element b."""
    k_begin = tl.load(k_off + b).to(tl.int32)
    klen = tl.load(k_off + b + 1).to(tl.int32) - k_begin
    if BROADCAST_Q:
        q_begin = b * 0
        out_begin = b * q_len
        qlen = q_len + b * 0
    else:
        q_begin = tl.load(q_off + b).to(tl.int32)
        qlen = tl.load(q_off + b + 1).to(tl.int32) - q_begin
        out_begin = q_begin
    return q_begin, out_begin, qlen, k_begin, klen


@triton.jit
def _zigzag(it, p, n):
    """Index of the it-th item dealt to participant p of n: round `it` goes 0..n-1 when even,
    n-1..0 when odd, so heavy-first sorted items even out over the participants."""
    return it * n + tl.where(it % 2 == 0, p, n - 1 - p)


@triton.jit
def tile_at(it, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB, ctas_per_pair, tile_window,
            RESIDENT: tl.constexpr):
    """(valid, b, h, mb) of the it-th tile of CTA pid (see the module docstring); tile_window >= 1
    (generic order only)."""
    if RESIDENT:
        pair = pid // ctas_per_pair
        r = pid % ctas_per_pair
        j = _zigzag(it, r, ctas_per_pair)
        h = pair % H
        mb = pair // H
        valid = (pair < H * NUM_MB) & (j < B)
        e = tl.load(tile_entry + mb * B + j, mask=valid, other=0)
        b = (e >> 32).to(tl.int32)
    else:
        t = _zigzag(it, pid, n_prog)
        valid = t < n_tiles
        # unsigned divisions (every operand >= 0): the signed sequences are longer; the JIT
        # specialises tile_window == 1, the launchers' usual order, to tile t = (entry t // H,
        # head t % H), and H == 1 too, so their product may be a plain int (hence tl.cast)
        first = (t.to(tl.uint32) // tl.cast(tile_window * H, tl.uint32)).to(tl.int32) * tile_window
        width = tl.maximum(tl.minimum(tile_window, n_tiles // H - first), 1)  # the last is short
        local = t - first * H
        h = (local.to(tl.uint32) // width.to(tl.uint32)).to(tl.int32)
        idx = first + local - h * width  # first + local % width
        e = tl.load(tile_entry + idx, mask=valid, other=0)
        b = (e >> 32).to(tl.int32)
        mb = e.to(tl.int32)  # the low half
    return valid, b, h, mb


@triton.jit
def n_iterations(n_tiles, n_prog, B, ctas_per_pair, RESIDENT: tl.constexpr):
    """Persistent-loop trip count of every CTA (the same for every warp role)."""
    if RESIDENT:
        n = (B + ctas_per_pair - 1) // ctas_per_pair
    else:
        n = (n_tiles + n_prog - 1) // n_prog
    return n


@triton.jit
def _rank_one_class(group, g):
    """(each entry's rank in the order, the number ranked) of the entries whose group is below
    0x7FFFFFFF, one group per pass from g, the smallest."""
    pos = group * 0
    placed = tl.sum(pos, 0)
    while g < 0x7FFFFFFF:
        hit = (group == g).to(tl.int32)
        pos = tl.where(hit != 0, placed + tl.cumsum(hit, 0) - 1, pos)
        placed += tl.sum(hit, 0)
        g = tl.min(tl.where(group > g, group, 0x7FFFFFFF), 0)
    return pos, placed


@triton.jit
def _rank_packed(group, g, BLOCK: tl.constexpr, FIELDS: tl.constexpr, FIELD_BITS: tl.constexpr):
    """`_rank_one_class`'s result, groups g .. g+FIELDS-1 per pass: an entry of group g+d counts 1
    in bit field d (FIELD_BITS bits: up to BLOCK) of an int64, so one prefix sum ranks them all."""
    pos = group * 0
    placed = tl.sum(pos, 0)
    field_mask = (1 << FIELD_BITS) - 1
    while g < 0x7FFFFFFF:
        d = group - g
        in_pass = (d >= 0) & (d < FIELDS)
        shift = (tl.where(in_pass, d, 0) * FIELD_BITS).to(tl.int64)
        one = tl.where(in_pass, tl.full([BLOCK], 1, tl.int64) << shift, 0)
        counts = tl.sum(one, 0)  # field d: the size of group g+d
        # field d of `earlier`: the entries of groups g .. g+d-1 (shifts only: no overflow)
        earlier = counts * 0
        in_earlier = counts * 0
        for f in tl.static_range(FIELDS):
            earlier |= in_earlier << (f * FIELD_BITS)
            in_earlier += (counts >> (f * FIELD_BITS)) & field_mask
        rank = ((tl.cumsum(one, 0) >> shift) & field_mask) + ((earlier >> shift) & field_mask)
        pos = tl.where(in_pass, placed + rank.to(tl.int32) - 1, pos)
        placed += in_earlier.to(tl.int32)
        g = tl.min(tl.where(group >= g + FIELDS, group, 0x7FFFFFFF), 0)
    return pos, placed


@triton.jit
def _jfa_schedule_kernel(q_off, k_off, tile_entry, n_entries, B, q_len, NUM_MB, window,
                         CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
                         KV_STATIONARY: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK: tl.constexpr, NUM_BUCKETS: tl.constexpr, FIELDS: tl.constexpr,
                         FIELD_BITS: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr):
    """Ordered entries. Q-stationary (forward, dq): entry = (b, q-block), work = KV blocks.
    KV-stationary (dk/dv): entry = (b, kv-block of BLOCK_M rows), work = q steps of BLOCK_N rows.
    FIELDS: classes ranked per pass (`schedule_fields`), in count fields of FIELD_BITS bits.
    LAUNCH_DEPENDENTS: the next kernel, launched with PDL, may start its CTAs now (they wait in
    `wait_for_previous_kernel` for this one to finish)."""
    if LAUNCH_DEPENDENTS:
        gdc_launch_dependents()
    e = tl.arange(0, BLOCK)
    in_range = e < B * NUM_MB
    b = tl.where(in_range, e // NUM_MB, 0)
    mb = e % NUM_MB
    k_begin = tl.load(k_off + b).to(tl.int32)
    klen = tl.load(k_off + b + 1).to(tl.int32) - k_begin
    if BROADCAST_Q:
        qlen = klen * 0 + q_len
    else:
        qlen = tl.load(q_off + b + 1).to(tl.int32) - tl.load(q_off + b).to(tl.int32)
    m0 = mb * BLOCK_M
    if KV_STATIONARY:
        lo, work = q_block_range(m0, klen, qlen, window, CAUSAL, HAS_WINDOW, BLOCK_M, BLOCK_N)
        valid = in_range & (m0 < klen)
    else:
        lo, work = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW, BLOCK_M, BLOCK_N)
        valid = in_range & (m0 < qlen)
    work = tl.where(valid, work, 0)
    max_work = tl.max(work, 0)
    n_buckets = tl.minimum(max_work + 1, NUM_BUCKETS)
    bucket = tl.where(max_work < NUM_BUCKETS, work, (work * NUM_BUCKETS) // (max_work + 1))
    group = n_buckets - 1 - bucket  # 0 = heaviest
    if BROADCAST_Q and not KV_STATIONARY:  # resident CTAs read B entries per q-block
        group = mb * n_buckets + group
    group = tl.where(valid, group, 0x7FFFFFFF)
    # counting sort, stable (batch order within a group): passes over the groups in order, a
    # group's entries after every earlier group's; one group (PMA's dK/dV builds: every kv-block
    # has q_len's steps) in the int32 pass, cheaper than one packed pass (run 37: 9.5 against
    # 14.7 us at 8,192 entries)
    g = tl.min(group, 0)
    if FIELDS == 1:
        pos, placed = _rank_one_class(group, g)
    elif tl.max(tl.where(valid, group, -1), 0) == g:
        pos, placed = _rank_one_class(group, g)
    else:
        pos, placed = _rank_packed(group, g, BLOCK, FIELDS, FIELD_BITS)
    tl.store(tile_entry + pos, (b.to(tl.int64) << 32) | mb, mask=valid)
    tl.store(n_entries, placed)


def _schedule_torch(q_off, k_off, B, q_len, num_mb, window, causal, broadcast_q, block_m,
                    block_n, kv_stationary):
    """The order of `_jfa_schedule_kernel`, with torch ops (large batches); no host sync."""
    dev = k_off.device
    e = torch.arange(B * num_mb, device=dev, dtype=torch.int64)
    b, mb = e // num_mb, e % num_mb
    klen = (k_off[1:] - k_off[:-1]).to(torch.int64)[b]
    qlen = (torch.full_like(klen, q_len) if broadcast_q
            else (q_off[1:] - q_off[:-1]).to(torch.int64)[b])
    m0 = mb * block_m
    if kv_stationary:  # q_block_range
        jmax = torch.minimum(m0 + block_m, klen) - 1
        lo = m0.clone() if causal else torch.zeros_like(m0)
        hi = qlen.clone()
        if window is not None:
            lo = torch.maximum(lo, m0 - window)
            hi = torch.minimum(hi, jmax + window + 1)
        valid = m0 < klen
    else:  # kv_block_range
        rmax = torch.minimum(m0 + block_m, qlen) - 1
        lo = torch.zeros_like(m0)
        hi = klen.clone()
        if causal:
            hi = torch.minimum(hi, rmax + 1)
        if window is not None:
            lo = torch.clamp(m0 - window, min=0)
            hi = torch.minimum(hi, rmax + window + 1)
        valid = m0 < qlen
    work = torch.where((hi > lo) & valid, (hi - lo + block_n - 1) // block_n, 0)
    max_work = work.max()
    n_buckets = torch.clamp(max_work + 1, max=PRIORITY_BUCKETS)
    bucket = torch.where(max_work < PRIORITY_BUCKETS, work, (work * PRIORITY_BUCKETS) // (max_work + 1))
    group = n_buckets - 1 - bucket
    if broadcast_q and not kv_stationary:
        group = mb * n_buckets + group
    group = torch.where(valid, group, torch.iinfo(torch.int64).max)
    order = torch.sort(group, stable=True).indices
    tile_entry = (b[order] << 32) | mb[order]
    n_entries = valid.sum().to(torch.int32).reshape(1)
    return tile_entry, n_entries


def build_schedule(q_off, k_off, B, q_len, num_mb, window, causal, broadcast_q, block_m, block_n,
                   kv_stationary=False, use_torch=False, launch_dependents=False,
                   fields: int | None = None, num_warps: int | None = None):
    """Sorted tile entries (int64 [B*num_mb], each `b << 32 | block`) and their count (int32 [1]),
    on the device.

    Q-stationary (forward, dq): block = q-block; block_m/block_n = query/key block rows.
    KV-stationary (dk/dv): block = kv-block; block_m = kv block, block_n = q step rows.
    launch_dependents: the kernel that reads the schedule is launched with PDL (it may start at
    the build's start).
    fields: classes ranked per counting-sort pass (None: `schedule_fields`; 1 to
    `schedule_fields`' count; benchmarks compare them).
    num_warps: of the one program (None: `build_warps`; benchmarks compare them).
    """
    n = B * num_mb
    if use_torch or n > MAX_SCHEDULE_BLOCK:
        return _schedule_torch(q_off, k_off, B, q_len, num_mb, window, causal, broadcast_q,
                               block_m, block_n, kv_stationary)
    constexprs, options = _build_launch(n, causal, window is not None, broadcast_q, kv_stationary,
                                        block_m, block_n, launch_dependents, fields, num_warps)
    tile_entry = torch.empty(n, device=k_off.device, dtype=torch.int64)
    n_entries = torch.empty(1, device=k_off.device, dtype=torch.int32)
    launch(_jfa_schedule_kernel, (1,),
        q_off if q_off is not None else k_off, k_off, tile_entry, n_entries, B, q_len, num_mb,
        0 if window is None else window, *constexprs, **options)
    return tile_entry, n_entries


@functools.lru_cache(maxsize=256)
def _build_launch(n: int, causal: bool, has_window: bool, broadcast_q: bool, kv_stationary: bool,
                  block_m: int, block_n: int, launch_dependents: bool, fields: int | None,
                  num_warps: int | None) -> tuple[tuple, dict]:
    """The one-program build's constexpr arguments (in `_jfa_schedule_kernel`'s signature order,
    passed positionally) and launch options for n entries, checked once per configuration (host
    time: the PMA forwards rebuild their schedule on every direct call)."""
    block = schedule_block(n)
    most = schedule_fields(block)
    if fields is None:
        fields = most
    elif not 1 <= fields <= most:
        raise ValueError(f"fields: must be in 1..{most} for {n} entries (count fields of "
                         f"{block.bit_length()} bits in 63), got {fields}")
    if num_warps is not None and num_warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"num_warps: must be a power of two from 1 to 32, got {num_warps}")
    constexprs = dict(
        CAUSAL=causal, HAS_WINDOW=has_window, BROADCAST_Q=broadcast_q, KV_STATIONARY=kv_stationary,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK=block, NUM_BUCKETS=PRIORITY_BUCKETS, FIELDS=fields,
        FIELD_BITS=block.bit_length(), LAUNCH_DEPENDENTS=launch_dependents)
    return (trailing_constexprs(_jfa_schedule_kernel, constexprs),
            dict(num_warps=num_warps or build_warps(block)))


# key_offset -> {(id(query_offset), configuration): (query_offset weakref, offsets versions, schedule)}
_SCHEDULES: WeakIdKeyDictionary = WeakIdKeyDictionary()


def cached_schedule(q_off, k_off, B, q_len, num_mb, window, causal, broadcast_q, block_m, block_n,
                    kv_stationary=False, launch_dependents=False):
    """`build_schedule`'s result, built once per (offsets, configuration) instead of once per call.

    A model's attention layers share one offsets tensor, and a layer's backward needs the schedules
    its forward saw, so most builds repeat one already made for the same batch (in gem_base 9 of 12
    per step, each a 0.25 ms single-program sort plus a launch). An entry is reused only while both
    offsets tensors are the same objects with the same `_version` (an in-place write bumps it) and
    dies with the key offsets, so a schedule never outlives its batch. Built fresh, never cached:
    outside the front door's eager calls (`kernels.common.offsets_versioned`: compiled graphs
    write reused buffers without a version bump), for inference tensors (no version counter), and
    while a CUDA graph is being captured (the build must be part of every replay).
    launch_dependents: `build_schedule`'s, for a build (not part of the key: it only changes when
    the next kernel may start).
    """
    config = (B, q_len, num_mb, window, causal, broadcast_q, block_m, block_n, kv_stationary)
    versions = (tracked_version(k_off), 0 if q_off is None else tracked_version(q_off))
    if (not offsets_versioned() or None in versions
            or (k_off.is_cuda and torch.cuda.is_current_stream_capturing())):
        return build_schedule(q_off, k_off, *config, launch_dependents=launch_dependents)
    per_offsets = _SCHEDULES.get(k_off)
    if per_offsets is None:
        per_offsets = _SCHEDULES[k_off] = {}
    key = (None if q_off is None else id(q_off), config)
    hit = per_offsets.get(key)
    if hit is not None:
        q_ref, seen_versions, schedule = hit
        if (q_ref is None or q_ref() is q_off) and seen_versions == versions:
            return schedule
    schedule = build_schedule(q_off, k_off, *config, launch_dependents=launch_dependents)
    for stale in [k for k, (ref, _, _) in per_offsets.items() if ref is not None and ref() is None]:
        del per_offsets[stale]  # query offsets that died (e.g. a per-call arange) while k_off lives
    per_offsets[key] = (None if q_off is None else weakref.ref(q_off), versions, schedule)
    return schedule


def clear_schedule_cache() -> None:
    """Forget every cached schedule (benchmarks timing one call as the first of its batch)."""
    _SCHEDULES.clear()
