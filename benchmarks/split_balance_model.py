"""A model of how evenly the split-tile forward's two consumer groups share a CTA's tiles (CPU).

    python -m benchmarks.split_balance_model [--shape "PMA q128 fill0.1"] [--tile-cost 1,2,3]
        [--noise 0,0.1]

The resident schedule deals a head's batch elements heaviest first, zigzag over its CTAs
(`tlx_schedule`); a CTA's two groups then take its tiles either alternately (the split tile:
group 0 gets every heavier tile of a pair and, with an odd count, one more) or each to the group
with less estimated work so far (`FwdConfig.balanced_split`, estimating a tile as its K/V blocks
plus `FwdConfig.split_tile_cost`); with `FwdConfig.claim_tiles` the CTAs claim their tiles at run
time instead of the deal, as their groups' mean progress reaches them. A tile takes `cost + blocks` time units, times
(1 + noise * N(0, 1)); the groups run independently (the shared K/V ring's coupling is left out),
and a CTA ends with its slower group. Printed: the last CTA's end over an even share of all the
work (1.0 = perfect balance) for both assignments, and for tiles claimed at run time by whichever
group is free first (no static deal at all). A model of the lengths the bench draws, not a
measurement: the forward's timeline (`benchmarks/tlx_timeline.py`) measures the real tail.
"""

from __future__ import annotations

import argparse
import heapq
import random

import torch


def deal(weights: list[int], ctas: int) -> list[list[int]]:
    """The resident schedule's deal: weights sorted heaviest first, round r over the CTAs forward
    when r is even, backward when odd."""
    order = sorted(weights, reverse=True)
    per: list[list[int]] = [[] for _ in range(ctas)]
    for j, w in enumerate(order):
        r, p = divmod(j, ctas)
        per[p if r % 2 == 0 else ctas - 1 - p].append(w)
    return per


def _greedy_groups(busy: list[float], weight: int, cost: float, noise: float, rnd) -> None:
    """The tile to whichever of the CTA's groups is free first (`FwdConfig.free_group_split`)."""
    g = 0 if busy[0] <= busy[1] else 1
    busy[g] += (cost + weight) * (1 + noise * rnd.gauss(0, 1))


def static_end(weights: list[int], ctas: int, cost: float, balanced: bool, estimate: int,
               noise: float, seed: int = 0, free_group: bool = False) -> float:
    """The last CTA's end with the tiles of each CTA split between its two groups, alternately or
    to the group with less estimated work (blocks + estimate per tile)."""
    rnd = random.Random(seed)
    end = 0.0
    for tiles in deal(weights, ctas):
        busy, est = [0.0, 0.0], [0, 0]
        for i, w in enumerate(tiles):
            if free_group:
                _greedy_groups(busy, w, cost, noise, rnd)
                continue
            g = (0 if est[0] <= est[1] else 1) if balanced else i % 2
            est[g] += w + estimate
            busy[g] += (cost + w) * (1 + noise * rnd.gauss(0, 1))
        end = max(end, *busy)
    return end


def claimed_end(weights: list[int], ctas: int, cost: float, noise: float, seed: int = 0) -> float:
    """The last end with every tile (heaviest first) claimed by the first free group of any CTA."""
    rnd = random.Random(seed)
    free = [0.0] * (2 * ctas)
    heapq.heapify(free)
    end = 0.0
    for w in sorted(weights, reverse=True):
        t = heapq.heappop(free) + (cost + w) * (1 + noise * rnd.gauss(0, 1))
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def cta_claimed_end(weights: list[int], ctas: int, cost: float, noise: float, balanced: bool,
                    estimate: int, seed: int = 0, free_group: bool = False) -> float:
    """The last end with the CTAs claiming the tiles (heaviest first) at run time
    (`FwdConfig.claim_tiles`), each tile going to the claiming CTA's groups alternately or by the
    balance's estimate, as the kernel does. The producer claims for both groups, as far ahead as the
    rings let it, so a CTA's claims follow its groups' mean progress (its look-ahead left out)."""
    rnd = random.Random(seed)
    busy = [[0.0, 0.0] for _ in range(ctas)]
    est = [[0, 0] for _ in range(ctas)]
    taken = [0] * ctas
    free = [(0.0, c) for c in range(ctas)]  # (the CTA's next claim time, CTA)
    heapq.heapify(free)
    for w in sorted(weights, reverse=True):
        _, c = heapq.heappop(free)
        if free_group:
            _greedy_groups(busy[c], w, cost, noise, rnd)
            heapq.heappush(free, (sum(busy[c]) / 2, c))
            continue
        g = (0 if est[c][0] <= est[c][1] else 1) if balanced else taken[c] % 2
        est[c][g] += w + estimate
        taken[c] += 1
        busy[c][g] += (cost + w) * (1 + noise * rnd.gauss(0, 1))
        heapq.heappush(free, (sum(busy[c]) / 2, c))
    return max(max(b) for b in busy)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.tlx_hopper_bench import lengths, shapes

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="PMA q128 fill0.1", help="a tlx_hopper_bench PMA shape")
    ap.add_argument("--block-n", type=int, default=32, help="keys per K/V block")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--tile-cost", default="1,2,3", help="a tile's fixed cost in blocks (comma-separated)")
    ap.add_argument("--estimate", type=int, default=2, help="the balance's per-tile estimate in blocks")
    ap.add_argument("--noise", default="0,0.1", help="relative spread of a tile's time (comma-separated)")
    args = ap.parse_args(argv)
    sh = {s["name"]: s for s in shapes()}.get(args.shape)
    if sh is None or sh["kind"] != "bcast":
        raise SystemExit(f"--shape: expected a PMA shape of tlx_hopper_bench, got {args.shape!r}")
    lens = lengths(sh["B"], sh["max_kv"], sh["fill"], torch.Generator().manual_seed(0)).tolist()
    weights = [-(-n // args.block_n) for n in lens]
    ctas = args.sms // sh["H"]  # one q-block per head: the CTAs of a head's pair
    print(f"{args.shape}: {len(weights)} tiles per head over {ctas} CTAs, mean {sum(weights) / len(weights):.2f} "
          f"blocks; the last CTA's end over an even share of the work")
    print("| tile cost (blocks) | noise | alternate | balanced | free group | CTAs claim, alternate | "
          "CTAs claim, balanced | CTAs claim, free group | groups claim |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for cost in map(float, args.tile_cost.split(",")):
        share = sum(cost + w for w in weights) / (2 * ctas)
        for noise in map(float, args.noise.split(",")):
            alt = static_end(weights, ctas, cost, False, args.estimate, noise) / share
            bal = static_end(weights, ctas, cost, True, args.estimate, noise) / share
            cta_alt = cta_claimed_end(weights, ctas, cost, noise, False, args.estimate) / share
            cta_bal = cta_claimed_end(weights, ctas, cost, noise, True, args.estimate) / share
            free = static_end(weights, ctas, cost, False, args.estimate, noise, free_group=True) / share
            cta_free = cta_claimed_end(weights, ctas, cost, noise, False, args.estimate,
                                       free_group=True) / share
            dyn = claimed_end(weights, ctas, cost, noise) / share
            print(f"| {cost:g} | {noise:g} | {alt:.3f} | {bal:.3f} | {free:.3f} | {cta_alt:.3f} "
                  f"| {cta_bal:.3f} | {cta_free:.3f} | {dyn:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
