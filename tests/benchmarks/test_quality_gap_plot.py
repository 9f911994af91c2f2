"""benchmarks.quality_gap_plot: gaps to the Bayes NE from recorded eval lines, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.quality_gap_plot import main, parse_group


def write_run(path: Path, click: list[float], conversion: list[float], preempted: bool | None = False) -> None:
    """A run's records; it closes with a summary line (preempted: None writes none, a run still going)."""
    rows = [{"step": 0, "split": "sharding"}]
    for i, (a, b) in enumerate(zip(click, conversion), start=1):
        rows.append({"step": 10 * i, "split": "train", "loss": 0.5})
        rows.append({"step": 10 * i, "split": "eval", "ne": {"click": a, "conversion": b},
                     "auc": {"click": 0.9, "conversion": 0.95}, "calibration": {"click": 1.0, "conversion": 1.0},
                     "bayes_ne": {"click": 0.5, "conversion": 0.4}})
    if preempted is not None:
        rows.append({"step": 10 * len(click), "split": "summary", "preempted": preempted})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_gaps_per_examples_and_the_final_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_run(tmp_path / "run_s0.jsonl", [0.55, 0.51], [0.48, 0.404])
    write_run(tmp_path / "run_s1.jsonl", [0.56, 0.515], [0.50, 0.412])
    group = parse_group(f"mine=64={tmp_path}/run_s*.jsonl")
    assert group.gaps("click") == {640: pytest.approx([10.0, 12.0]), 1280: pytest.approx([2.0, 3.0])}
    assert group.gaps("conversion")[1280] == pytest.approx([1.0, 3.0])

    assert main([f"mine=64={tmp_path}/run_s*.jsonl", "--out", str(tmp_path / "gap.png")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| mine"))
    # final evals: click NE 0.5125 ± 0.0035 (2.5 ± 0.71 % above 0.5), conversion 2.0 ± 1.41 %
    assert row.startswith("| mine | 2 | 0.00M | 0.5125 ± 0.0035 | 2.50 ± 0.71 % | 0.4080 ± 0.0057 | 2.00 ± 1.41 % |")
    assert (tmp_path / "gap.png").stat().st_size > 0


def test_a_resumed_run_counts_its_repeated_eval_once(tmp_path: Path) -> None:
    """A run resumed from a checkpoint before its last eval appends that eval again: the later
    record (the resumed run's) replaces the earlier, and the seeds still line up per step."""
    write_run(tmp_path / "run_s0.jsonl", [0.55, 0.51], [0.48, 0.404])
    write_run(tmp_path / "run_s1.jsonl", [0.56, 0.515], [0.50, 0.412])
    lines = (tmp_path / "run_s1.jsonl").read_text().splitlines()
    first_eval = json.loads(lines[2])
    repeat = {**first_eval, "ne": {"click": 0.57, "conversion": 0.50}}
    (tmp_path / "run_s1.jsonl").write_text("\n".join(lines[:4] + [json.dumps(repeat)] + lines[4:]) + "\n")
    group = parse_group(f"mine=64={tmp_path}/run_s*.jsonl")
    assert [len(seed) for seed in group.evals] == [2, 2]
    assert group.gaps("click") == {640: pytest.approx([10.0, 14.0]), 1280: pytest.approx([2.0, 3.0])}


def test_unfinished_runs_are_marked_in_the_table_and_warned_about(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A run without a closing summary (still going, or preempted and not resumed) is reported at
    its last eval, which is not where it was going: the seeds cell and a warning say so."""
    write_run(tmp_path / "run_s0.jsonl", [0.55, 0.51], [0.48, 0.404])
    write_run(tmp_path / "run_s1.jsonl", [0.56, 0.515], [0.50, 0.412], preempted=True)
    write_run(tmp_path / "run_s2.jsonl", [0.56, 0.515], [0.50, 0.412], preempted=None)
    group = parse_group(f"mine=64={tmp_path}/run_s*.jsonl")
    assert group.unfinished == [str(tmp_path / "run_s1.jsonl"), str(tmp_path / "run_s2.jsonl")]
    assert main([f"mine=64={tmp_path}/run_s*.jsonl", "--out", str(tmp_path / "gap.png")]) == 0
    out, err = capsys.readouterr()
    assert next(line for line in out.splitlines() if line.startswith("| mine")).startswith("| mine | 3 (2 unfinished) |")
    assert err.count("has no closing summary") == 2 and "run_s1.jsonl" in err and "run_s0.jsonl" not in err


def test_errors_name_the_group_and_the_rule(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="expected LABEL=BATCH_SIZE=GLOB"):
        parse_group("mine=lots=x.jsonl")
    with pytest.raises(SystemExit, match="group 'mine': no file matches"):
        parse_group(f"mine=64={tmp_path}/none_*.jsonl")
    (tmp_path / "movielens.jsonl").write_text(json.dumps({"step": 5, "split": "eval", "ne": {"like": 0.8}}) + "\n")
    with pytest.raises(SystemExit, match="no eval record with a Bayes NE"):
        parse_group(f"mine=64={tmp_path}/movielens.jsonl")
