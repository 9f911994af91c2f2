"""benchmarks/early_tiles_replay.py: its deals hand out every element once, as the kernel's do."""

import pytest

from benchmarks import early_tiles_replay as replay


# swap_pairs orders the split tile's positions only
@pytest.mark.parametrize("kind,split", [(k, s) for k in ("today", "early", "early_last_without")
                                        for s in (True, False)] + [("swap_pairs", True)])
def test_every_element_dealt_once(kind, split):
    work = [(7 * e) % 5 + 1 for e in range(41)]
    ctas = replay.deal(work, 6, kind, split)
    dealt = [e for tiles in ctas for _, e in tiles if e >= 0]
    assert sorted(dealt) == list(range(41))


def test_early_positions_and_the_last_place():
    """Positions 0 and 1 of CTA r are elements r and P + r; the last place takes none (kernel's
    `tlx_schedule.early_tile`), its positions empty."""
    ctas = replay.deal([1] * 20, 4, "early_last_without", True)
    assert [tiles[:2] for tiles in ctas[:3]] == [[(True, r), (True, 4 + r)] for r in range(3)]
    assert ctas[3][:2] == [(False, -1), (False, -1)]


def test_late_cta_sets_the_end_without_the_last_places_exemption():
    """One seed of the bench's row: with early tiles for every place the late CTA ends last;
    without them for the last place it no longer does."""
    import torch

    from benchmarks.tlx_hopper_bench import lengths

    work = [-(-k // 32) for k in lengths(768, 1024, 0.1, torch.Generator().manual_seed(0)).tolist()]
    args = (work, 4, 33)
    every = replay.replay(*args, "early", True, 2.5, 6.7, 0.5, 1.18, 1.48)
    without = replay.replay(*args, "early_last_without", True, 2.5, 6.7, 0.5, 1.18, 1.48)
    assert without[0] < every[0]
