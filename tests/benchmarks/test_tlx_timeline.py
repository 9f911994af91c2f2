"""benchmarks.tlx_timeline's reading of a forward's per-CTA stamps (synthetic buffers on the CPU;
the GPU test of the stamps themselves is in tests/kernels/test_tlx_hopper.py)."""

from __future__ import annotations

import pytest
import torch

from benchmarks import tlx_timeline as tool
from kernels import tlx_timeline
from tests.kernels.timeline_samples import two_ctas


def test_summary_of_a_launch():
    s = tool.summarise(two_ctas())
    assert (s["ctas"], s["sms"], s["tiles"]) == (2, 2, 5)
    assert s["span_us"] == pytest.approx(8.5)  # entry 1,000 to the last end 9,500
    assert s["entries_us"] == pytest.approx(0.2)
    assert s["ready_us"] == pytest.approx(2.0)
    assert s["first_tile_us"] == pytest.approx((4.0 + 3.0) / 2)  # 5,000 - 1,000 and 4,200 - 1,200
    assert s["end_us"] == pytest.approx((8.5 + 4.6) / 2)
    assert s["tail_us"] == pytest.approx(8.5 - (8.5 + 4.6) / 2)
    assert s["groups_apart_us"] == pytest.approx((2.5 + 1.1) / 2)  # 9,500 - 7,000 and 5,600 - 4,500
    assert s["busy"] == pytest.approx((8.5 / 8.5 + 4.4 / 8.5) / 2)
    # tiles of 1, 2, 2, 3, 4 blocks took 1,000, 2,000, 2,000, 3,000, 4,000 ns: 0 + 1,000 per block
    assert s["tile_ns"] == pytest.approx((0.0, 1000.0), abs=1e-6)
    assert s["tile_cycles"] == pytest.approx((0.0, 2000.0), abs=1e-6)
    assert s["tile_median_ns"] == {1: 1000, 2: 2000, 3: 3000, 4: 4000}
    assert s["clock_mhz"] == pytest.approx(2000.0)  # two cycles per ns


def test_fit_line_with_one_block_count_is_flat():
    assert tool.fit_line([3, 3, 3], [1.0, 2.0, 3.0]) == (2.0, 0.0)
    assert tool.fit_line([1, 2, 3], [3.0, 5.0, 7.0]) == pytest.approx((1.0, 2.0))


def test_a_launch_without_stamps_is_refused():
    with pytest.raises(ValueError, match="timeline: a CTA left no entry stamp"):
        tool.summarise(tlx_timeline.allocate(3, 2, 4, torch.device("cpu")))


def _saved(tmp_path, before_ring_turns=False):
    """two_ctas() saved twice as `--save` writes it, or as sessions 44-49 did (no ring turns)."""
    t = two_ctas()
    path = tmp_path / "t.pt"
    if before_ring_turns:
        saved = dict(buffer=t.buffer[:, :t.buffer.shape[1] - tlx_timeline.RING_AREA], num_groups=2)
    else:
        saved = dict(buffer=t.buffer, num_groups=2, ring_turns=t.ring_turns)
    torch.save(dict(title="synthetic", timelines=[saved] * 2), path)
    return path


@pytest.mark.parametrize("before_ring_turns", [False, True])
def test_saved_timelines_are_read_back_into_the_table(tmp_path, capsys, before_ring_turns):
    path = _saved(tmp_path, before_ring_turns)
    assert tool.main(["--load", str(path), "--out", str(tmp_path / "t.md")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert text.startswith("## tlx forward timeline: synthetic")
    assert "| span (µs) | 8.50 | 8.50 |" in text
    assert "| tile = a + b * blocks (ns) | 0 + 1000 b | 0 + 1000 b |" in text
    assert "| median tile of 3 blocks (ns) | 3000 | 3000 |" in text
    assert ("The first K/V ring turns" in text) != before_ring_turns
    assert text.strip() == capsys.readouterr().out.strip()


def test_turn_table_gives_each_turns_issue_and_waits():
    """Medians over the two CTAs of two_ctas(): turn 0 issued at the PDL wait in both, group 0's
    wait over at 500 ns in both, group 1's at 700 in CTA 0 and unstamped in CTA 1; turns 3-8
    exist in CTA 0 only."""
    lines = tool.turn_table(two_ctas(), turns=4).splitlines()
    assert lines[0] == ("| turn | its tile's group | issued (µs) | group 0 waited until (µs) "
                        "| group 1 waited until (µs) |")
    assert lines[2] == "| 0 | 0 | 0.00 | 0.50 | 0.70 |"
    # turn 1 is group 0's in CTA 0 and group 1's in CTA 1 (a tie: the first CTA's owner shown);
    # each group waited 0.6 in one CTA and 0.8 in the other
    assert lines[3] == "| 1 | 0 | 0.10 | 0.70 | 0.70 |"
    assert lines[4] == "| 2 | 1 | 0.20 | 0.90 | 0.70 |"
    assert lines[5] == "| 3 | 1 | 0.30 | 1.00 | 0.80 |"
    assert len(lines) == 6  # turns 0-3


def test_epilogue_table_gives_each_groups_phases_and_spread():
    """two_ctas(): medians over the CTAs (the phases CTA 0's only) and how far apart the CTAs
    issued the stores on the one clock (group 0: 5,000 and 4,200; group 1: 6,000 and 5,200)."""
    lines = tool.epilogue_table(two_ctas()).splitlines()
    assert lines[0].startswith("| group | last K wait ended (µs) | last PV done | O normalised |")
    assert lines[2] == "| 0 | 0.55 | 1.00 | 1.50 | 1.50 | 0.80 |"
    assert lines[3] == "| 1 | 0.80 | 2.00 | 2.50 | 2.50 | 0.80 |"
    assert len(lines) == 4


def test_saved_timeline_is_plotted(tmp_path):
    pytest.importorskip("matplotlib")
    assert tool.main(["--load", str(_saved(tmp_path)), "--plot", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_recording_needs_a_gpu():
    with pytest.raises(SystemExit, match="tlx_timeline needs a CUDA device"):
        tool.main(["--samples", "1"])
