"""Replay the resident broadcast forward's deals of tiles on the bench's lengths (CPU, a model).

    python -m benchmarks.early_tiles_replay [--seeds 6] [--t-sched 6.7] [--pingpong]

The numbers behind `FwdConfig.early_tiles` (session 55, `docs/kernels/tlx_hopper.md`): every CTA
of a (head, q-block) pair walks its tiles; a tile costs `a + b * blocks` µs of its consumer group
(split tiles: the two groups take alternate positions and run side by side; --pingpong: the CTA
runs its tiles one after another), from run 52's H200 timeline fit of the PMA q128 fill-0.1
forward (1.18 + 1.48 µs per 32-key block). Tiles from the schedule start no earlier than
--t-sched (the build's end plus the hand-over), early tiles from --t-early, and the launch's last
CTA, whose SM the build's CTA holds, from --t-sched + --late. Deals:

- today: the pair's elements heaviest first, zigzag over its P CTAs (`tlx_schedule.tile_at`);
- swap_pairs: today's with every second pair of a CTA's positions swapped (split tiles);
- early: positions 0 and 1 of every CTA are elements r and P + r, the rest heaviest first, zigzag
  over the 2P (CTA, group) participants ranked by their early tile's work, lightest first
  (`tlx_schedule.tile_after_early`; ping-pong: over the P CTAs by their two early tiles' sum);
- early, last place without: the same, a pair's last place taking no early tile (the kernel's).

The model has no coupling through the CTA's shared K/V ring (run 52 measured ~0.65 µs of group gap
per block of lead), nor HBM contention: it ranks deals, it does not predict times.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.tlx_hopper_bench import lengths


def zigzag(k: int, slot: int, n: int) -> int:
    """`tlx_schedule._zigzag`: the index of round k's item for participant slot of n."""
    return k * n + (slot if k % 2 == 0 else n - 1 - slot)


def dealt(items: list[int], slot: int, n: int) -> list[int]:
    """The items participant slot of n gets, zigzag, in order."""
    out, k = [], 0
    while zigzag(k, slot, n) < len(items):
        out.append(items[zigzag(k, slot, n)])
        k += 1
    return out


def heaviest_first(elements, work: list[int]) -> list[int]:
    return sorted(elements, key=lambda e: (-work[e], e))


def deal(work: list[int], P: int, kind: str, split: bool) -> list[list[tuple[bool, int]]]:
    """Per CTA slot r of a pair, its tiles in position order as (early, element); a position
    without a tile holds (False, -1)."""
    B = len(work)
    if kind in ("today", "swap_pairs"):
        order = heaviest_first(range(B), work)
        ctas = [[(False, e) for e in dealt(order, r, P)] for r in range(P)]
        if kind == "swap_pairs":
            for r, tiles in enumerate(ctas):
                tiles += [(False, -1)] * (len(tiles) % 2)
                ctas[r] = [tiles[i ^ ((i >> 1) & 1)] for i in range(len(tiles))]
        return ctas
    last_without = kind == "early_last_without"
    early = {r: [r, P + r] for r in range(P - 1 if last_without else P)}
    taken = {e for pair in early.values() for e in pair}
    rest = heaviest_first([e for e in range(B) if e not in taken], work)
    parts = 2 * P if split else P
    # a participant's load: its early tile's work (ping-pong: both), none lightest of all
    if split:
        load = {g * P + r: work[early[r][g]] + 1 if r in early else 0 for r in range(P) for g in (0, 1)}
    else:
        load = {r: sum(work[e] for e in early[r]) + 1 if r in early else 0 for r in range(P)}
    rank = {p: i for i, p in enumerate(sorted(load, key=lambda p: (load[p], p)))}
    ctas = []
    for r in range(P):
        tiles = [(True, e) for e in early.get(r, [])] or [(False, -1), (False, -1)]
        if split:
            mine = [dealt(rest, rank[g * P + r], parts) for g in (0, 1)]
            for k in range(max(len(m) for m in mine)):
                tiles += [(False, m[k] if k < len(m) else -1) for m in mine]
        else:
            tiles += [(False, e) for e in dealt(rest, rank[r], parts)]
        ctas.append(tiles)
    return ctas


def cta_end(tiles: list[tuple[bool, int]], work: list[int], split: bool, start_early: float,
            start_sched: float, a: float, b: float) -> float:
    """When a CTA's last group ends (split: position i to group i % 2)."""
    groups = [0.0, 0.0] if split else [0.0]
    for i, (early, e) in enumerate(tiles):
        if e < 0:
            continue
        g = i % 2 if split else 0
        groups[g] = max(groups[g], start_early if early else start_sched) + a + b * work[e]
    return max(groups)


def replay(work: list[int], heads: int, P: int, kind: str, split: bool, t_early: float,
           t_sched: float, late: float, a: float, b: float) -> tuple[float, float]:
    """(the last CTA's end, the median CTA's end) over the pairs of a launch."""
    ctas = deal(work, P, kind, split)
    ends = []
    for pair in range(heads):
        for r, tiles in enumerate(ctas):
            if (pair, r) == (heads - 1, P - 1):  # its SM frees when the build ends: nothing early
                ends.append(cta_end(tiles, work, split, t_sched + late, t_sched + late, a, b))
            else:
                ends.append(cta_end(tiles, work, split, t_early, t_sched, a, b))
    return max(ends), statistics.median(ends)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--fill", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=768)
    ap.add_argument("--max-kv", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctas", type=int, default=132)
    ap.add_argument("--block-n", type=int, default=32)
    ap.add_argument("--a", type=float, default=1.18, help="µs per tile")
    ap.add_argument("--b", type=float, default=1.48, help="µs per key block")
    ap.add_argument("--t-early", type=float, default=2.5)
    ap.add_argument("--t-sched", type=float, default=6.7)
    ap.add_argument("--late", type=float, default=0.5, help="the last CTA's start after the others'")
    ap.add_argument("--pingpong", action="store_true", help="a CTA's tiles one after another")
    args = ap.parse_args(argv)
    split = not args.pingpong
    P = args.ctas // args.heads
    kinds = ["today", *(["swap_pairs"] if split else []), "early", "early_last_without"]
    print(f"| deal | last CTA end (µs) | median CTA end (µs) |\n|---|--:|--:|")
    for kind in kinds:
        rows = []
        for seed in range(args.seeds):
            g = torch.Generator().manual_seed(seed)
            klen = lengths(args.batch, args.max_kv, args.fill, g).tolist()
            work = [-(-k // args.block_n) for k in klen]
            rows.append(replay(work, args.heads, P, kind, split, args.t_early, args.t_sched,
                               args.late, args.a, args.b))
        print(f"| {kind} | {statistics.fmean(r[0] for r in rows):.2f} | "
              f"{statistics.fmean(r[1] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
