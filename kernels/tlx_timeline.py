"""Per-CTA timestamps of the tlx forward (a diagnostic, off by default): where a persistent
kernel's time goes, CTA by CTA and tile by tile.

Nsight Compute sums a launch into stall reasons; it cannot say how long a CTA waits before its
first tile, how a tile's time grows with its K/V blocks, or how long the last CTAs run after the
first have finished. With `tlx_hopper.forward(..., timeline=[])` the kernel (TIMELINE) also writes
the SM's `%globaltimer` (ns, one clock for every SM) and `%clock64` (its own cycles) at a few
points into an int64 buffer, one row per CTA; `benchmarks/tlx_timeline.py` launches and reads it.

Row layout (`Timeline.buffer[cta]`), every field -1 until written:
  [0, 1]            globaltimer, clock64 at the kernel's entry
  [2, 3]            the same after the PDL wait (the schedule is readable)
  [4 + 2g, 5 + 2g]  the same when consumer group g (g < 3) leaves its tile loop, its O stores drained
  [10]              the SM the CTA ran on
  [11 + 2g, 12 + 2g] group g's (g < 2) first tile of its own: the globaltimer when its last PV was
                    waited for, and when its O and LSE were normalised (the epilogue's phases;
                    the tile record stamps the stores' issue)
  HEADER + TILE_FIELDS * (it * num_groups + g) ...: group g's tile of iteration it, written when
                    its epilogue has issued: globaltimer, clock64, its K/V blocks, its batch element
  the last RING_TURNS * RING_FIELDS fields: the CTA's first RING_TURNS K/V ring turns, each
                    the globaltimer when the producer issued its K load (its slot given back) and
                    when each consumer group's wait for that K ended (3 groups at most)
A group's tile runs from its previous record (its first from the PDL wait) to its own.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer, smid

HEADER = tl.constexpr(16)
TILE_FIELDS = tl.constexpr(4)
# the K/V ring turns stamped per CTA (the heavy tiles at a launch's start, where run 48 found the
# second group idle) and their fields: the producer's issue, then one per consumer group
RING_TURNS = tl.constexpr(64)
RING_FIELDS = tl.constexpr(4)
RING_AREA = RING_TURNS.value * RING_FIELDS.value  # the row's last fields (host code)
# header fields (the layout above); GROUP_END + 2g for group g
ENTRY = tl.constexpr(0)
READY = tl.constexpr(2)
GROUP_END = tl.constexpr(4)
SM_ID = tl.constexpr(10)
# group g's first own tile: its last PV done (EPILOGUE + 2g), its O normalised (EPILOGUE + 2g + 1);
# groups 0 and 1 (the split tile's second group found waiting there in run 49)
EPILOGUE = tl.constexpr(11)
EPILOGUE_GROUPS = tl.constexpr(2)


@triton.jit
def _clock64():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _row(timeline, stride):
    """This CTA's row. The CTA id is read where a stamp is written (not pure, so not hoisted): a
    row address kept live across a tile loop would cost the consumers two registers, which the
    split tile (at its register limit) pays in spills."""
    cta = tl.inline_asm_elementwise("mov.u32 $0, %ctaid.x;", "=r", [], dtype=tl.int32, is_pure=False,
                                    pack=1)
    return timeline + cta.to(tl.int64) * stride


@triton.jit
def now():
    """(globaltimer, clock64) at this point."""
    return globaltimer(), _clock64()


@triton.jit
def store_stamp(timeline, stride, field, stamp):
    """A `now()` stamp into fields field and field + 1 of this CTA's row."""
    row = _row(timeline, stride)
    tl.store(row + field, stamp[0])
    tl.store(row + field + 1, stamp[1])


@triton.jit
def mark(timeline, stride, field):
    """The time now into fields field and field + 1 of this CTA's row."""
    store_stamp(timeline, stride, field, now())


@triton.jit
def mark_sm(timeline, stride):
    tl.store(_row(timeline, stride) + SM_ID, smid().to(tl.int64))


@triton.jit
def mark_tile(timeline, stride, record, nblk, b):
    """Tile record `record` of this CTA: the time now, the tile's K/V blocks and batch element."""
    stamp = now()
    row = _row(timeline, stride) + HEADER + record * TILE_FIELDS
    tl.store(row, stamp[0])
    tl.store(row + 1, stamp[1])
    tl.store(row + 2, nblk.to(tl.int64))
    tl.store(row + 3, b.to(tl.int64))


@triton.jit
def mark_epilogue(timeline, stride, it, cid: tl.constexpr, phase: tl.constexpr,
                  SPLIT_TILES: tl.constexpr):
    """The time now for phase `phase` (0: last PV done, 1: O normalised) of group cid's epilogue
    at iteration it, kept for its first own tile (iteration cid with split tiles, else 0) of
    groups 0 and 1."""
    if cid < EPILOGUE_GROUPS:
        if it == (cid if SPLIT_TILES else 0):
            tl.store(_row(timeline, stride) + EPILOGUE + 2 * cid + phase, globaltimer())


@triton.jit
def mark_ring_turn(timeline, stride, turn, who: tl.constexpr):
    """The time now for K/V ring turn `turn` of this CTA, field `who` (0: the producer issued its
    K load; 1 + g: consumer group g's wait for it ended); turns past RING_TURNS are not kept."""
    if turn < RING_TURNS:
        row = _row(timeline, stride) + stride - RING_TURNS * RING_FIELDS
        tl.store(row + turn * RING_FIELDS + who, globaltimer())


@dataclasses.dataclass
class Timeline:
    """One launch's timestamps (`buffer`, the layout above) and what reading them needs."""

    buffer: torch.Tensor   # int64 [n_prog, HEADER + TILE_FIELDS * num_groups * max_iterations
                           #        + ring_turns * RING_FIELDS]
    num_groups: int        # consumer groups per CTA (a group's records: every num_groups-th)
    # the ring turns stamped at the row's end: 0 in timelines recorded before session 50
    ring_turns: int = RING_TURNS.value

    @property
    def stride(self) -> int:
        return self.buffer.shape[1]


def allocate(n_prog: int, num_groups: int, max_iterations: int, device: torch.device) -> Timeline:
    """A Timeline for a launch of n_prog CTAs of at most max_iterations tiles each, every field -1."""
    width = HEADER.value + TILE_FIELDS.value * num_groups * max_iterations + RING_AREA
    return Timeline(torch.full((n_prog, width), -1, dtype=torch.int64, device=device), num_groups)


def max_iterations(resident: bool, B: int, ctas_per_pair: int, n_tiles_bound: int, n_prog: int,
                   swap_pairs: bool = False) -> int:
    """The forward's persistent-loop trip count at most, on the host: the resident order's
    per-pair share (`tlx_schedule.n_iterations`; rounded up to even with `FwdConfig.swap_pairs`,
    as the kernel does), or the generic order's share of at most n_tiles_bound tiles."""
    if not resident:
        return triton.cdiv(n_tiles_bound, n_prog)
    n = triton.cdiv(B, ctas_per_pair)
    return n + n % 2 if swap_pairs else n


def _tile_records(row: list[int], ring_turns: int) -> list[list[int]]:
    """A row's tile records (record it * num_groups + g: group g's tile of iteration it), between
    the header and the ring turns' stamps (ring_turns: `Timeline.ring_turns`)."""
    end = len(row) - ring_turns * RING_FIELDS.value
    return [row[i:i + TILE_FIELDS.value] for i in range(HEADER.value, end, TILE_FIELDS.value)]


def group_tiles(buffer: torch.Tensor, num_groups: int,
                ring_turns: int = RING_TURNS.value) -> list[dict]:
    """Every tile record of a timeline's buffer as {cta, group, blocks, batch, end, ns, cycles}: its
    epilogue's stamp (globaltimer ns) and its time from the group's previous stamp (the first from
    the PDL wait), in ns and SM cycles. ring_turns: `Timeline.ring_turns`."""
    ready = READY.value
    tiles = []
    for cta, row in enumerate(buffer.tolist()):
        records = _tile_records(row, ring_turns)
        for group in range(num_groups):
            prev_ns, prev_cycles = row[ready], row[ready + 1]
            for ns, cycles, blocks, batch in records[group::num_groups]:
                if ns < 0:
                    continue  # the group took no tile at this iteration (split tiles: the other's)
                tiles.append(dict(cta=cta, group=group, blocks=blocks, batch=batch, end=ns,
                                  ns=ns - prev_ns, cycles=cycles - prev_cycles))
                prev_ns, prev_cycles = ns, cycles
    return tiles


def ring_turn_stamps(buffer: torch.Tensor, num_groups: int,
                     ring_turns: int = RING_TURNS.value) -> list[dict]:
    """Every stamped K/V ring turn of a timeline's buffer (the first ring_turns of each CTA, at its
    row's end) as {cta, turn, owners, issued, seen}: the groups whose tile it belongs to (from the
    tile records: an iteration's blocks follow the earlier iterations'), the producer's issue and
    each group's end of wait, in ns from the CTA's PDL wait (None where not stamped)."""
    width = RING_FIELDS.value
    turns = []
    for cta, row in enumerate(buffer.tolist()):
        records = _tile_records(row, ring_turns)
        owners = []  # per ring turn, in the producer's order
        for it in range(len(records) // num_groups):
            recs = records[it * num_groups:(it + 1) * num_groups]
            ran = [g for g, r in enumerate(recs) if r[0] >= 0]
            owners += [tuple(ran)] * max((recs[g][2] for g in ran), default=0)
        base = len(row) - ring_turns * width
        for turn in range(min(len(owners), ring_turns)):
            f = row[base + turn * width:][:width]
            at = [None if x < 0 else x - row[READY.value] for x in f]
            turns.append(dict(cta=cta, turn=turn, owners=owners[turn], issued=at[0],
                              seen=at[1:1 + num_groups]))
    return turns


def epilogue_stamps(buffer: torch.Tensor, num_groups: int,
                    ring_turns: int = RING_TURNS.value) -> list[dict]:
    """The first own tile's epilogue of groups 0 and 1 in each CTA of a timeline's buffer, as
    {cta, group, last_wait, pv, normalised, stored}: the end of its wait for its last K/V block's K
    (`ring_turn_stamps`; None past the stamped turns), its last PV done, its O normalised and its
    stores issued (the tile record), in ns from the CTA's PDL wait; None where not stamped
    (timelines recorded before session 51 have no epilogue stamps)."""
    turns_of: dict[int, list[dict]] = {}
    for t in ring_turn_stamps(buffer, num_groups, ring_turns):
        turns_of.setdefault(t["cta"], []).append(t)
    rows = []
    for cta, row in enumerate(buffer.tolist()):
        ready = row[READY.value]
        records = _tile_records(row, ring_turns)
        for group in range(min(num_groups, EPILOGUE_GROUPS.value)):
            own = [r for r in records[group::num_groups] if r[0] >= 0]
            if not own:
                continue
            # the tile's last block: the group's nblk-th owned turn (its first tile's turns come
            # first; with a shared tile every group owns every turn)
            owned = [t for t in turns_of.get(cta, []) if group in t["owners"]]  # in turn order
            nblk = own[0][2]
            last_wait = owned[nblk - 1]["seen"][group] if 0 < nblk <= len(owned) else None
            pv, normalised = (row[EPILOGUE.value + 2 * group + k] for k in range(2))
            rows.append(dict(cta=cta, group=group, last_wait=last_wait,
                             pv=None if pv < 0 else pv - ready,
                             normalised=None if normalised < 0 else normalised - ready,
                             stored=own[0][0] - ready))
    return rows
