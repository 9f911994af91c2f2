"""benchmarks.split_balance_model: the schedule's deal, the ways of splitting a CTA's tiles between
its groups and of claiming tiles at run time, on hand-checked examples."""

from benchmarks import split_balance_model as model


def test_deal_is_heaviest_first_zigzag():
    # sorted 9..1 over 3 CTAs: round 0 forward (9, 8, 7), round 1 backward (6, 5, 4), round 2 forward
    assert model.deal([3, 9, 1, 7, 5, 8, 2, 6, 4], 3) == [[9, 4, 3], [8, 5, 2], [7, 6, 1]]


def test_alternating_groups_give_group_0_the_heavier_share():
    # one CTA, tiles 5, 4, 3, 2, 1 at no fixed cost: alternately 5+3+1 = 9 against 4+2 = 6;
    # balanced (estimate 0): 5 -> g0, 4 -> g1, 3 -> g1 (4 < 5), 2 -> g0 (5 < 7), 1 -> g0 (a tie)
    assert model.static_end([5, 4, 3, 2, 1], 1, 0.0, False, 0, 0.0) == 9
    assert model.static_end([5, 4, 3, 2, 1], 1, 0.0, True, 0, 0.0) == 8  # g0 5+2+1, g1 4+3
    # a fixed cost per tile counts against the group with more tiles
    assert model.static_end([5, 4, 3, 2, 1], 1, 1.0, False, 0, 0.0) == 12


def test_claimed_tiles_go_to_the_first_free_group():
    # two CTAs (four groups), tiles 4, 3, 2, 2, 1: 4, 3, 2, 2 start at once, 1 follows the first 2
    assert model.claimed_end([4, 3, 2, 2, 1], 2, 0.0, 0.0) == 4


def test_free_group_takes_the_tile():
    # one CTA, tiles 5, 4, 3, 2, 1: 5 -> g0, 4 -> g1, 3 -> g1 (free at 4), 2 -> g0 (free at 5),
    # 1 -> g0 (both free at 7: a tie goes to g0): g0 5+2+1 = 8, g1 4+3 = 7
    assert model.static_end([5, 4, 3, 2, 1], 1, 0.0, False, 0, 0.0, free_group=True) == 8


def test_ctas_claim_by_their_groups_mean_progress():
    # two CTAs A, B alternating inside: 4 -> A.g0 (A's mean now 2); 3 -> B.g0 (B's 1.5); 2 -> B.g1
    # (B's 2.5); 2 -> A.g1 (A's 3); 1 -> B.g0 (2.5 < 3): A 4 | 2, B 3+1 | 2
    assert model.cta_claimed_end([4, 3, 2, 2, 1], 2, 0.0, 0.0, False, 0) == 4
    # the free group inside each CTA: the 1 goes to B.g1 (free at 2): A 4 | 2, B 3 | 2+1
    assert model.cta_claimed_end([4, 3, 2, 2, 1], 2, 0.0, 0.0, False, 0, free_group=True) == 4


def test_table_for_the_default_shape(capsys):
    assert model.main(["--tile-cost", "2", "--noise", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PMA q128 fill0.1: 768 tiles per head over 33 CTAs")
    row = list(map(float, lines[-1].strip("|").split("|")[2:]))
    alternate, balanced, free, cta_alt, cta_bal, cta_free, claimed = row
    assert alternate > balanced >= claimed >= 1.0
    assert alternate > free >= claimed and alternate > cta_free >= claimed
