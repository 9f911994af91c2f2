"""benchmarks/scaling_report.py: weak-scaling efficiency and same-batch agreement from scale-stage logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.scaling_report import agreement_groups, main, read_runs, weak_scaling


def _line(nproc: int, batch: int, steps: int, rate: float, ne: float, rc: int = 0) -> str:
    summary = {"step": steps, "split": "summary", "train_examples_per_sec": rate, "ne": {"click": ne},
               "auc": {"click": 0.78}, "calibration": {"click": 1.0}}
    return f"nproc={nproc} batch={batch} rc={rc} {json.dumps(summary)}"


def test_efficiency_and_agreement(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    log.write_text("\n".join([
        _line(1, 1024, 60, 1000.0, 0.9),
        _line(4, 4096, 60, 3600.0, 0.9),
        _line(2, 2048, 250, 1800.0, 0.82),
        _line(1, 2048, 250, 1050.0, 0.80),
        _line(4, 2048, 250, 3000.0, 0.81, rc=124),  # timed out: left out
        "nproc=2 batch=1024 rc=0 ",  # no summary: left out
    ]))
    runs = read_runs(log)
    assert [(r.nproc, r.batch) for r in runs] == [(1, 1024), (4, 4096), (2, 2048), (1, 2048)]
    assert [(r.nproc, round(eff, 3)) for r, eff in weak_scaling(runs)] == [(1, 1.0), (2, 0.9), (4, 0.9)]
    groups = agreement_groups(runs)
    assert [[r.nproc for r in g] for g in groups] == [[1, 2]]
    main([str(log), "--name", "out"])
    table = (tmp_path / "out.md").read_text()
    assert "| 4 | 4096 | 1024 | 60 | 3600 | 90.0 % |" in table
    assert "| largest difference | | | 2.50 % |" in table  # 0.82 / 0.80
    assert (tmp_path / "out.png").stat().st_size > 0


def test_needs_a_one_gpu_run(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    log.write_text(_line(2, 2048, 60, 1800.0, 0.9))
    with pytest.raises(SystemExit, match="no successful 1-GPU run"):
        main([str(log)])
