"""gem.report on fabricated multirun directories (grouping, mean ± std, Bayes gap, unfinished runs,
the markdown section and the plots), the quality presets compose, and one real tiny sweep."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from gem import report
from gem.config import typed
from gem.models import CONFIGS

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
ARMS = sorted(p.stem for p in (CONF / "experiment" / "arm").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (CONF / "experiment").glob("quality_*.yaml"))


def fake_job(job: Path, overrides: list[str], data: str, evals: list[dict], summary: dict | None,
             batch_size: int = 100) -> None:
    """A job directory as train.py + Hydra leave it (only the parts the report reads)."""
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": {"data": data}}}}))
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": {"batch_size": batch_size}, "trainer": {"seed": 0}}))
    lines = [{"step": 5, "split": "train", "loss": 0.7}]
    lines += [{"split": "eval", **e} for e in evals]
    if summary is not None:
        lines.append({"split": "summary", "train_examples_per_sec": 1000.0, "wall_time_s": 60.0, **summary})
    (job / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def metrics(step: int, ne: dict, bayes: dict | None = None) -> dict:
    out = {"step": step, "ne": ne, "auc": {t: 0.5 + (1 - v) / 2 for t, v in ne.items()},
           "calibration": {t: 1.0 for t in ne}}
    if bayes is not None:
        out["bayes_ne"] = bayes
        out["bayes_calibration"] = {t: 1.02 for t in bayes}
    return out


BAYES = {"click": 0.6, "conversion": 0.5}
# (arm, seed) -> final click NE on synthetic; conversion NE is click NE - 0.1
SYNTH = {("gem_pma", 0): 0.61, ("gem_pma", 1): 0.62, ("gem_pma", 2): 0.66,
         ("dlrm", 0): 0.70, ("dlrm", 1): 0.71, ("dlrm", 2): 0.72}


@pytest.fixture
def sweeps(tmp_path: Path) -> tuple[Path, Path]:
    """A synthetic sweep (2 arms x 3 seeds, plus one unfinished job) and a MovieLens sweep."""
    synth = tmp_path / "multirun" / "2025-01-01" / "10-00-00"
    synth.mkdir(parents=True)
    (synth / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {
        "hydra": ["hydra.sweep.dir=multirun/x", "hydra.mode=MULTIRUN"],
        "task": ["+experiment=quality_synthetic", "+experiment/arm=gem_pma,dlrm", "trainer.seed=0,1,2"]}}}))
    num = 0
    for arm in ("gem_pma", "dlrm"):
        for seed in range(3):
            final = SYNTH[(arm, seed)]
            ne = {"click": final, "conversion": final - 0.1}
            first = {t: v + 0.2 for t, v in ne.items()}
            fake_job(synth / str(num), ["+experiment=quality_synthetic", f"+experiment/arm={arm}", f"trainer.seed={seed}"],
                     "synthetic", [metrics(10, first, BAYES), metrics(20, ne, BAYES)],
                     {"step": 20, **metrics(20, ne, BAYES)})
            num += 1
    fake_job(synth / str(num), ["+experiment=quality_synthetic", "+experiment/arm=dlrm", "trainer.seed=3"],
             "synthetic", [metrics(10, {"click": 0.9, "conversion": 0.9}, BAYES)], None)  # still running

    ml = tmp_path / "multirun" / "2025-01-01" / "11-00-00"
    for num, (arm, seed, like) in enumerate([("gem_pma", 0, 0.80), ("gem_pma", 1, 0.82), ("no_seq", 0, 0.90), ("no_seq", 1, 0.90)]):
        ne = {"like": like, "love": like + 0.05}
        fake_job(ml / str(num), ["+experiment=quality_movielens", f"+experiment/arm={arm}", f"trainer.seed={seed}"],
                 "movielens", [metrics(7, ne)], {"step": 7, **metrics(7, ne)}, batch_size=256)
    return synth, ml


def test_groups_by_dataset_and_variant_pooling_only_seeds(sweeps) -> None:
    runs = report.find_runs(list(sweeps))
    assert len(runs) == 11
    datasets = report.group_runs(runs)
    assert list(datasets) == ["synthetic", "movielens"]
    synthetic = datasets["synthetic"]
    assert [g.label for g in synthetic] == ["arm=gem_pma", "arm=dlrm"]  # common overrides left out of labels
    assert [len(g.runs) for g in synthetic] == [3, 4] and [len(g.finished()) for g in synthetic] == [3, 3]
    assert [r.seed for r in synthetic[0].runs] == ["trainer.seed=0", "trainer.seed=1", "trainer.seed=2"]
    assert [g.label for g in datasets["movielens"]] == ["arm=gem_pma", "arm=no_seq"]


def test_mean_std_and_bayes_gap(sweeps) -> None:
    gem = report.group_runs(report.find_runs(list(sweeps)))["synthetic"][0]
    stats = report.aggregate(gem)
    clicks = [0.61, 0.62, 0.66]
    mean, std = stats["ne"]["click"]
    assert mean == pytest.approx(statistics.fmean(clicks)) and std == pytest.approx(statistics.stdev(clicks))
    assert stats["ne"]["conversion"][0] == pytest.approx(statistics.fmean(clicks) - 0.1)
    gaps = [100 * (c - 0.6) / 0.6 for c in clicks]
    assert stats["bayes_gap"]["click"][0] == pytest.approx(statistics.fmean(gaps))
    assert stats["bayes_gap"]["click"][1] == pytest.approx(statistics.stdev(gaps))
    assert stats["calibration"]["click"] == (1.0, 0.0)


def test_no_bayes_gap_without_bayes_ne_and_single_seed_std_is_nan(sweeps, tmp_path: Path) -> None:
    ml = report.group_runs(report.find_runs([sweeps[1]]))["movielens"]
    assert "bayes_gap" not in report.aggregate(ml[0])
    job = tmp_path / "one"
    fake_job(job, ["model=dlrm"], "synthetic", [metrics(1, {"click": 0.7})], {"step": 1, **metrics(1, {"click": 0.7})})
    (group,) = report.group_runs(report.find_runs([job]))["synthetic"]
    assert group.label == "model=dlrm"
    mean, std = report.aggregate(group)["ne"]["click"]
    assert mean == 0.7 and math.isnan(std)


def test_compare_against_a_baseline(sweeps) -> None:
    gem, dlrm = report.group_runs(report.find_runs(list(sweeps)))["synthetic"]
    diff, beyond = report.compare(gem, dlrm)["click"]
    assert diff == pytest.approx(statistics.fmean([0.61, 0.62, 0.66]) - 0.71)
    assert beyond  # 0.08 > both stds (0.026, 0.01)
    ml_gem, no_seq = report.group_runs(report.find_runs([sweeps[1]]))["movielens"]
    diff, beyond = report.compare(ml_gem, no_seq)["like"]
    assert diff == pytest.approx(-0.09) and beyond  # no_seq's std is 0, gem's 0.014
    tight = report.Group("x", ())
    tight.runs = ml_gem.runs[:1]  # one seed each: no std to beat
    lone = report.Group("x", ())
    lone.runs = no_seq.runs[:1]
    assert report.compare(tight, lone)["like"] == (pytest.approx(-0.1), False)


def test_markdown_and_plots_are_written_and_regenerated_in_place(sweeps, tmp_path: Path) -> None:
    out = tmp_path / "docs" / "quality.md"
    assert report.main([*map(str, sweeps), "--out", str(out), "--baseline", "arm=dlrm"]) == 0
    text = out.read_text()
    assert text.startswith("# Model quality") and report.BEGIN in text and report.END in text
    assert "| `arm=gem_pma` | 0.6300 ± 0.0265 |" in text  # click NE, synthetic
    assert "gap to Bayes NE (%)" in text and "Bayes-optimal NE on this eval split: click 0.6000" in text
    assert "Its calibration there (the labels are a finite draw): click 1.020, conversion 1.020;" in text
    assert "-0.0800 (> seed std)" in text
    assert ("python train.py -m +experiment=quality_synthetic +experiment/arm=gem_pma,dlrm trainer.seed=0,1,2 "
            f"hydra.sweep.dir=multirun/x   # -> {sweeps[0]}") in text
    assert "Left out (no summary line" in text and str(sweeps[0] / "6") in text
    assert "### movielens" in text and "| `arm=no_seq` | 0.9000 ± 0.0000 |" in text
    assert "2,000" in text  # examples per run: 20 steps x 100
    for name in ("quality_ne.png", "quality_curves.png"):
        assert (out.parent / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text

    # Hand-written text around the generated section survives a regeneration.
    out.write_text("# Quality\n\nAnalysis above.\n\n" + text[text.index(report.BEGIN):] + "\nAnalysis below.\n")
    assert report.main([str(sweeps[0]), "--out", str(out)]) == 0
    again = out.read_text()
    assert again.startswith("# Quality\n\nAnalysis above.\n\n" + report.BEGIN)
    assert again.rstrip().endswith("Analysis below.") and again.count(report.BEGIN) == 1
    assert "### movielens" not in again


def test_a_resumed_job_keeps_one_eval_per_step(tmp_path: Path) -> None:
    """Resumed from a checkpoint older than its last eval, a run appends that eval again: the report
    keeps the later record, so every step appears once and the curves line up across seeds."""
    job = tmp_path / "multirun" / "0"
    fake_job(job, ["trainer.seed=0"], "synthetic",
             [metrics(10, {"click": 0.7}), metrics(20, {"click": 0.66}), metrics(20, {"click": 0.65}),
              metrics(30, {"click": 0.62})], {"step": 30, "ne": {"click": 0.62}})
    (run,) = report.find_runs([tmp_path / "multirun"])
    assert [e["step"] for e in run.evals] == [10, 20, 30]
    assert run.evals[1]["ne"]["click"] == 0.65


def test_a_preempted_job_is_unfinished_until_a_resume_finishes_it(tmp_path: Path) -> None:
    job = tmp_path / "multirun" / "0"
    fake_job(job, ["trainer.seed=0"], "synthetic", [metrics(10, {"click": 0.7})],
             {"step": 17, "ne": {"click": 0.69}, "preempted": True})
    (run,) = report.find_runs([tmp_path / "multirun"])
    assert run.summary is None
    with (job / "metrics.jsonl").open("a") as f:  # resumed and finished
        f.write(json.dumps({"split": "summary", "step": 30, "ne": {"click": 0.62}, "preempted": False}) + "\n")
    (run,) = report.find_runs([tmp_path / "multirun"])
    assert run.summary["step"] == 30


def test_no_jobs_is_an_error(tmp_path: Path) -> None:
    assert report.main([str(tmp_path), "--out", str(tmp_path / "q.md")]) == 1
    with pytest.raises(FileNotFoundError):
        report.find_runs([tmp_path / "missing"])


@pytest.mark.parametrize("arm", ARMS)
@pytest.mark.parametrize("dataset", DATASETS)
def test_quality_presets_compose_and_validate(dataset: str, arm: str) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=[f"+experiment={dataset}", f"+experiment/arm={arm}"])
    model = typed(CONFIGS[cfg.model.name], cfg.model, "model")
    expected = {"gem_pma": ("gem", 2), "gem_no_pma": ("gem", 0), "dlrm": ("dlrm", None), "no_seq": ("dlrm", None)}[arm]
    assert (cfg.model.name, getattr(getattr(model, "summary", None), "pma_queries", None)) == expected
    assert getattr(model, "use_sequence", True) == (arm != "no_seq")
    assert cfg.data.name == {"quality_synthetic": "synthetic", "quality_synthetic_small": "synthetic",
                             "quality_movielens": "parquet"}[dataset]
    if dataset == "quality_synthetic_small":  # the base preset's budget on a smaller planted world
        assert cfg.trainer.max_steps == 3000 and cfg.data.seq.max_len == 32
        assert (cfg.data.vocab.seq_item, cfg.data.vocab.ad_id, cfg.data.signal.dim) == (50, 50, 8)


def test_tiny_sweep_through_train_py_and_the_report(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-m", "+experiment=quality_synthetic", "+experiment/arm=dlrm,no_seq",
         "trainer.seed=0,1", "trainer.max_steps=6", "trainer.eval_every=3", "data.batch_size=64",
         "data.eval_examples=256", f"hydra.sweep.dir={sweep}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "quality.md"
    assert report.main([str(sweep), "--out", str(out), "--baseline", "arm=dlrm"]) == 0
    (groups,) = report.group_runs(report.find_runs([sweep])).values()
    assert [g.label for g in groups] == ["arm=dlrm", "arm=no_seq"]
    assert all(len(g.finished()) == 2 and len(g.runs[0].evals) == 2 for g in groups)
    assert "python train.py -m +experiment=quality_synthetic +experiment/arm=dlrm,no_seq trainer.seed=0,1" in out.read_text()
