"""`kernels.tlx_timeline`'s host side: the stamps buffer and its tile records (CPU; the kernel's
stamps are checked on the GPU in test_tlx_hopper.py)."""

from __future__ import annotations

import torch

from kernels import tlx_timeline
from tests.kernels.timeline_samples import two_ctas


def test_tiles_are_timed_from_the_groups_previous_stamp():
    tiles = tlx_timeline.group_tiles(two_ctas().buffer, 2)
    got = sorted((t["cta"], t["group"], t["blocks"], t["batch"], t["ns"], t["cycles"]) for t in tiles)
    assert got == [
        (0, 0, 2, 10, 2000, 4000),  # from the PDL wait (3,000) to 5,000
        (0, 0, 4, 12, 4000, 8000),  # from group 0's previous tile, not group 1's
        (0, 1, 3, 11, 3000, 6000),  # group 1's first: from the PDL wait
        (1, 0, 1, 20, 1000, 2000),
        (1, 1, 2, 21, 2000, 4000),
    ]


def test_ring_turns_follow_the_tiles_in_the_producers_order():
    turns = tlx_timeline.ring_turn_stamps(two_ctas().buffer, 2)
    assert [(t["cta"], t["turn"], t["owners"]) for t in turns] == (
        [(0, n, (0,)) for n in range(2)] + [(0, n, (1,)) for n in range(2, 5)]
        + [(0, n, (0,)) for n in range(5, 9)] + [(1, 0, (0,)), (1, 1, (1,)), (1, 2, (1,))])
    # times from the CTA's PDL wait; the owner's wait ends first; a missing stamp reads None
    assert turns[3]["issued"] == 300 and turns[3]["seen"] == [1000, 800]
    assert turns[9]["issued"] == 0 and turns[9]["seen"] == [500, None]


def test_epilogue_stamps_of_each_groups_first_own_tile():
    rows = tlx_timeline.epilogue_stamps(two_ctas().buffer, 2)
    got = [(r["cta"], r["group"], r["last_wait"], r["pv"], r["normalised"], r["stored"])
           for r in rows]
    assert got == [
        # CTA 0 (PDL wait at 3,000): group 0's tile is turns 0-1 (its last wait 100 + 500 after),
        # group 1's turns 2-4 (400 + 500); the stores issued at the tile records' 5,000 and 6,000
        (0, 0, 600, 1000, 1500, 2000),
        (0, 1, 900, 2000, 2500, 3000),
        # CTA 1: no epilogue stamps (as in timelines recorded before them)
        (1, 0, 500, None, None, 1000),
        (1, 1, 700, None, None, 2000),
    ]


def test_epilogue_last_wait_is_the_first_tiles_last_block_when_the_groups_share_tiles():
    """The ping-pong tile: both groups own every turn, so the first tile's last K wait is the
    wait of its own last block (turn nblk - 1), not of the last stamped turn; None where that
    block lies past the stamped turns."""
    t = tlx_timeline.allocate(1, 2, 2, torch.device("cpu"))
    b, ready = t.buffer, 1000
    b[0, tlx_timeline.READY.value] = ready
    for it, (end, blocks) in enumerate([(5000, 3), (9000, 80)]):
        for group in (0, 1):
            i = tlx_timeline.HEADER.value + tlx_timeline.TILE_FIELDS.value * (it * 2 + group)
            b[0, i:i + 4] = torch.tensor([end + group, 0, blocks, it])
    base = b.shape[1] - tlx_timeline.RING_AREA
    for turn in range(tlx_timeline.RING_TURNS.value):
        f = base + turn * tlx_timeline.RING_FIELDS.value
        b[0, f:f + 3] = torch.tensor([ready + 10 * turn, ready + 10 * turn + 5, ready + 10 * turn + 7])
    rows = tlx_timeline.epilogue_stamps(b, 2)
    assert [(r["group"], r["last_wait"]) for r in rows] == [(0, 25), (1, 27)]
    b[0, tlx_timeline.HEADER.value + 2] = b[0, tlx_timeline.HEADER.value + 2 + tlx_timeline.TILE_FIELDS.value] = 70
    assert [r["last_wait"] for r in tlx_timeline.epilogue_stamps(b, 2)] == [None, None]


def test_tiles_read_the_same_without_ring_turns():
    """A timeline saved before the ring turns (rows without their area, `ring_turns=0`) gives the
    same tiles: the tile records end where the ring area begins."""
    buf = two_ctas().buffer
    old = buf[:, :buf.shape[1] - tlx_timeline.RING_AREA]
    assert tlx_timeline.group_tiles(old, 2, ring_turns=0) == tlx_timeline.group_tiles(buf, 2)


def test_buffer_shape_follows_the_launch():
    t = tlx_timeline.allocate(132, 2, 24, torch.device("cpu"))
    width = tlx_timeline.HEADER.value + tlx_timeline.TILE_FIELDS.value * 2 * 24 + 64 * 4
    assert t.buffer.shape == (132, width) and t.stride == width
    assert bool((t.buffer == -1).all())
    # resident: a pair's CTAs share its batch elements; generic: the tiles over every CTA
    assert tlx_timeline.max_iterations(True, 768, 33, 3072, 132) == 24
    assert tlx_timeline.max_iterations(False, 768, 1, 768 * 8 * 4, 132) == 187
    # swap_pairs rounds the kernel's count up to even
    assert tlx_timeline.max_iterations(True, 23 * 2, 2, 46, 2, swap_pairs=True) == 24
