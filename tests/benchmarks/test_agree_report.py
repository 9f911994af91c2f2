"""benchmarks/agree_report.py: backend spread against the seed-to-seed spread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.agree_report import main, read_runs


def _line(backend: str, seed: int | None, ne: float, auc: float = 0.77) -> str:
    record = {"split": "summary", "train_examples_per_sec": 1000.0, "ne": {"click": ne}, "auc": {"click": auc}}
    return f"{backend}{'' if seed is None else f' seed={seed}'} {json.dumps(record)}"


def test_within_noise_needs_the_backend_spread_below_two_seed_stds(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    # tlx seeds: 0.80, 0.82 (std 0.01414); varlen mean 0.83 -> spread 0.02 <= 0.028: yes
    log.write_text("\n".join([_line("tlx", 0, 0.80), _line("tlx", 1, 0.82), _line("varlen", 0, 0.83),
                              _line("varlen", 1, 0.83), "triton seed=0 "]))
    runs, missing = read_runs(log)
    assert {b: len(r) for b, r in runs.items()} == {"tlx": 2, "varlen": 2} and missing == ["triton seed=0"]
    main([str(log), "--name", "out"])
    table = (tmp_path / "out.md").read_text()
    assert "| ne click | 0.0200 | 0.0141 | yes |" in table
    assert "| tlx | 2 | 1000 | 0.8100 ± 0.0141 |" in table
    assert "triton seed=0" in table
    log.write_text("\n".join([_line("tlx", 0, 0.80), _line("tlx", 1, 0.802), _line("varlen", 0, 0.85)]))
    main([str(log), "--name", "out"])
    assert "| ne click | 0.0490 | 0.0014 | no |" in (tmp_path / "out.md").read_text()


def test_one_seed_per_backend_leaves_the_noise_unknown(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    log.write_text("\n".join([_line("tlx", None, 0.84), _line("varlen", None, 0.85)]))
    main([str(log), "--name", "out"])
    assert "| ne click | 0.0100 | - | unknown: one seed per backend |" in (tmp_path / "out.md").read_text()


def test_no_summary_at_all_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    log.write_text("tlx seed=0 \n")
    with pytest.raises(SystemExit, match="no run with a summary record"):
        main([str(log)])
