"""benchmarks.split_balance_model: the schedule's deal and the two ways of splitting a CTA's tiles
between its groups, on hand-checked examples."""

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


def test_table_for_the_default_shape(capsys):
    assert model.main(["--tile-cost", "2", "--noise", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PMA q128 fill0.1: 768 tiles per head over 33 CTAs")
    alternate, balanced, claimed = map(float, lines[-1].strip("|").split("|")[2:])
    assert alternate > balanced >= claimed >= 1.0
