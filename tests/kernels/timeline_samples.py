"""A synthetic forward timeline (`kernels.tlx_timeline`'s layout) for the CPU tests of its readers."""

from __future__ import annotations

import torch

from kernels import tlx_timeline


def two_ctas() -> tlx_timeline.Timeline:
    """Two CTAs of two split-tile groups (iteration it in group it % 2), three iterations each.

    CTA 0: entry 1,000 ns, PDL wait over at 3,000; group 0's tiles end at 5,000 (2 blocks) and
    9,000 (iteration 2, 4 blocks), group 1's at 6,000 (iteration 1, 3 blocks); ends 9,500 / 7,000.
    CTA 1: entry 1,200, ready 3,200; tiles at 4,200 (1 block) and 5,200 (iteration 1, 2 blocks);
    ends 4,500 / 5,600. Cycles are twice the ns since the entry.
    Ring turns (CTA 0's nine: 2 + 3 + 4 blocks; CTA 1's three): turn n issued 100 n ns after the
    PDL wait, its tile's group done waiting 500 ns after that and the other group 700 ns after;
    CTA 1's group 1 never stamped its turn 0.
    Epilogue stamps of the groups' first own tiles, CTA 0 only: group 0's last PV done at 4,000 and
    O normalised at 4,500, group 1's at 5,000 and 5,500.
    """
    t = tlx_timeline.allocate(2, 2, 3, torch.device("cpu"))
    b = t.buffer

    def stamp(cta, field, ns):
        b[cta, field], b[cta, field + 1] = ns, 2 * (ns - b[cta, 0].item() if field else 0)

    def tile(cta, it, group, ns, blocks, batch):
        i = tlx_timeline.HEADER.value + tlx_timeline.TILE_FIELDS.value * (it * 2 + group)
        b[cta, i:i + 4] = torch.tensor([ns, 2 * (ns - b[cta, 0].item()), blocks, batch])

    for cta, (entry, ready, end0, end1) in enumerate([(1000, 3000, 9500, 7000), (1200, 3200, 4500, 5600)]):
        b[cta, tlx_timeline.ENTRY.value], b[cta, tlx_timeline.ENTRY.value + 1] = entry, 0
        stamp(cta, tlx_timeline.READY.value, ready)
        stamp(cta, tlx_timeline.GROUP_END.value, end0)
        stamp(cta, tlx_timeline.GROUP_END.value + 2, end1)
        b[cta, tlx_timeline.SM_ID.value] = 7 + cta
    tile(0, 0, 0, 5000, 2, 10)
    tile(0, 1, 1, 6000, 3, 11)
    tile(0, 2, 0, 9000, 4, 12)
    tile(1, 0, 0, 4200, 1, 20)
    tile(1, 1, 1, 5200, 2, 21)
    base = b.shape[1] - tlx_timeline.RING_AREA
    for cta, owners in enumerate([[0, 0, 1, 1, 1, 0, 0, 0, 0], [0, 1, 1]]):
        ready = b[cta, tlx_timeline.READY.value].item()
        for turn, owner in enumerate(owners):
            f = base + turn * tlx_timeline.RING_FIELDS.value
            b[cta, f] = ready + 100 * turn
            b[cta, f + 1 + owner] = ready + 100 * turn + 500
            b[cta, f + 2 - owner] = ready + 100 * turn + 700
    b[1, base + 2] = -1
    e = tlx_timeline.EPILOGUE.value
    b[0, e:e + 4] = torch.tensor([4000, 4500, 5000, 5500])
    return t
