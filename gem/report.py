"""Aggregate Hydra multirun outputs into a markdown table and plots.

    python -m gem.report multirun/2025-11-29/15-20-00 [more multirun or job dirs ...] \\
        [--out docs/quality.md] [--plots docs/quality] [--baseline arm=dlrm]

Every directory below the given ones that holds `metrics.jsonl` and `.hydra/overrides.yaml` is a job
(one training run). Jobs are grouped

- by **dataset**: the `data` config choice Hydra records in `.hydra/hydra.yaml` (`synthetic`,
  `movielens`, ...), else `data.name` from `.hydra/config.yaml`;
- by **variant**: the job's overrides minus the seeds (keys ending in `seed`), so runs that differ only
  in their seed are pooled and nothing else is. A variant is labelled by the overrides that differ
  between the variants of its dataset, `+experiment/arm=gem_pma` shown as `arm=gem_pma`.

For each group the final eval (the run's `summary` line) gives NE / AUC / calibration per task as
mean ± sample std over the seeds, and, where the data knows it (synthetic), the gap to the
Bayes-optimal NE, `100 (NE - Bayes NE) / Bayes NE` per run. Runs without a summary line (still
running, crashed) are listed and left out. With `--baseline LABEL` each variant also gets its NE
difference to that variant (negative: better than the baseline) and whether the difference is larger
than the seed std of both.

The generated markdown (tables, the sweep commands from each `multirun.yaml`, date, machine) goes
between `<!-- gem.report:begin -->` and `<!-- gem.report:end -->` in `--out`; text outside the markers
is kept, so a hand-written analysis survives a regeneration. Plots: `<plots>_ne.png` (final NE per
variant with error bars) and `<plots>_curves.png` (eval NE vs step, mean ± std over seeds).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BEGIN, END = "<!-- gem.report:begin -->", "<!-- gem.report:end -->"
METRICS = ("ne", "auc", "calibration")


# ------------------------------------------------------------------------------------- loading


@dataclass
class Run:
    """One job directory: its identity (dataset, non-seed overrides, seed) and what it logged."""

    path: Path
    dataset: str
    overrides: tuple[str, ...]  # without the seeds, as given (e.g. "+experiment/arm=gem_pma")
    seed: str
    evals: list[dict[str, Any]]
    summary: dict[str, Any] | None  # None: the run did not finish


def _override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _is_seed(override: str) -> bool:
    return _override_key(override).endswith("seed")


def _read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of one metrics.jsonl, in file order."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_summary(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's closing summary, or None while it is unfinished (or failed). A preempted run writes
    a summary too, at its stop; it is final only once a resume has finished the run."""
    summaries = [r for r in records if r.get("split") == "summary"]
    return summaries[-1] if summaries and not summaries[-1].get("preempted") else None


def evals_by_step(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's eval records in step order, one per step. metrics.jsonl appends, so a run resumed from
    a checkpoint older than its last eval repeats that eval; the later record is the resumed run's."""
    latest = {r["step"]: r for r in records if r.get("split") == "eval"}
    return [latest[step] for step in sorted(latest)]


def load_run(job: Path) -> Run:
    overrides = [str(o) for o in _read_yaml(job / ".hydra" / "overrides.yaml") or []]
    hydra_cfg = _read_yaml(job / ".hydra" / "hydra.yaml") or {}
    config = _read_yaml(job / ".hydra" / "config.yaml") or {}
    choices = (hydra_cfg.get("hydra") or {}).get("runtime", {}).get("choices", {})
    dataset = choices.get("data") or (config.get("data") or {}).get("name") or "unknown"
    seeds = [o.lstrip("+") for o in overrides if _is_seed(o)]
    seed = " ".join(seeds) or f"trainer.seed={(config.get('trainer') or {}).get('seed', '?')}"
    records = read_records(job / "metrics.jsonl")
    evals = evals_by_step(records)
    return Run(job, str(dataset), tuple(o for o in overrides if not _is_seed(o)), seed, evals,
               final_summary(records))


def find_runs(roots: list[Path]) -> list[Run]:
    """Every job below `roots`, in the order of the roots, then of the job number / path."""
    def order(path: Path) -> tuple:
        return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts)

    runs, seen = [], set()
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist")
        jobs = sorted((m.parent for m in root.rglob("metrics.jsonl") if (m.parent / ".hydra" / "overrides.yaml").exists()),
                      key=order)
        for job in jobs:
            if job.resolve() not in seen:
                seen.add(job.resolve())
                runs.append(load_run(job))
    return runs


# --------------------------------------------------------------------------------- aggregation


@dataclass
class Group:
    dataset: str
    overrides: tuple[str, ...]
    label: str = ""
    runs: list[Run] = field(default_factory=list)

    def finished(self) -> list[Run]:
        return [r for r in self.runs if r.summary is not None]


def _pretty(override: str) -> str:
    key, _, value = override.lstrip("+~").partition("=")
    return f"{key.rsplit('/', 1)[-1]}={value}"


def group_runs(runs: list[Run]) -> dict[str, list[Group]]:
    """dataset -> its variants, in order of first appearance; labels from the differing overrides."""
    datasets: dict[str, dict[tuple[str, ...], Group]] = {}
    for run in runs:
        groups = datasets.setdefault(run.dataset, {})
        groups.setdefault(run.overrides, Group(run.dataset, run.overrides)).runs.append(run)
    out = {}
    for dataset, groups in datasets.items():
        common = set.intersection(*(set(key) for key in groups)) if len(groups) > 1 else set()
        for key, group in groups.items():
            group.label = " ".join(_pretty(o) for o in key if o not in common) or "default"
        out[dataset] = list(groups.values())
    return out


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (NaN std for one value)."""
    values = [math.nan if v is None else float(v) for v in values]
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else math.nan


def bayes_gap(summary: dict[str, Any], task: str) -> float | None:
    """100 (NE - Bayes NE) / Bayes NE of one run, or None where the data has no Bayes NE."""
    bayes = (summary.get("bayes_ne") or {}).get(task)
    ne = summary["ne"].get(task)
    if bayes is None or ne is None:
        return None
    return 100.0 * (ne - bayes) / bayes


def aggregate(group: Group) -> dict[str, dict[str, tuple[float, float]]]:
    """metric -> task -> (mean, std) over the finished runs; metrics ne, auc, calibration, bayes_gap."""
    runs = group.finished()
    if not runs:
        return {}
    tasks = list(runs[0].summary["ne"])
    out: dict[str, dict[str, tuple[float, float]]] = {m: {} for m in METRICS}
    for metric in METRICS:
        for task in tasks:
            out[metric][task] = mean_std([r.summary[metric].get(task) for r in runs])
    gaps = {task: [bayes_gap(r.summary, task) for r in runs] for task in tasks}
    if all(g is not None for values in gaps.values() for g in values):
        out["bayes_gap"] = {task: mean_std(values) for task, values in gaps.items()}
    return out


def compare(group: Group, baseline: Group) -> dict[str, tuple[float, bool]]:
    """task -> (mean NE of group - mean NE of baseline, |difference| > the seed std of both)."""
    mine, theirs = aggregate(group)["ne"], aggregate(baseline)["ne"]
    out = {}
    for task, (mean, std) in mine.items():
        base_mean, base_std = theirs[task]
        diff = mean - base_mean
        stds = [s for s in (std, base_std) if not math.isnan(s)]
        out[task] = (diff, bool(stds) and abs(diff) > max(stds))
    return out


# ------------------------------------------------------------------------------------ markdown


def fmt_mean_std(mean: float, std: float, digits: int = 4) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.{digits}f}" if math.isnan(std) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        import torch
        torch_version = f", torch {torch.__version__}"
    except ImportError:
        torch_version = ""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores ({cpu}){torch_version}, Python {platform.python_version()}"


def sweep_commands(runs: list[Run]) -> list[str]:
    """`python train.py -m ...` for each multirun.yaml above the jobs (else each job's overrides)."""
    commands = []
    for run in runs:
        multirun = next((p / "multirun.yaml" for p in run.path.parents if (p / "multirun.yaml").exists()), None)
        if multirun is not None:
            overrides = ((_read_yaml(multirun) or {}).get("hydra") or {}).get("overrides", {})
            given = [*overrides.get("task", []), *(o for o in overrides.get("hydra", []) if not str(o).startswith("hydra.mode="))]
            command = "python train.py -m " + " ".join(shlex.quote(str(o)) for o in given)
            where = multirun.parent
        else:
            command = "python train.py " + " ".join(shlex.quote(o) for o in (*run.overrides, run.seed))
            where = run.path
        line = f"{command}   # -> {where}"
        if line not in commands:
            commands.append(line)
    return commands


def markdown(datasets: dict[str, list[Group]], runs: list[Run], baseline: str | None, plots: list[str]) -> str:
    lines = [f"Generated by `python -m gem.report` on {datetime.date.today().isoformat()} on {machine()}.", ""]
    for dataset, groups in datasets.items():
        lines += [f"### {dataset}", ""]
        done = [g for g in groups if g.finished()]
        if not done:
            lines += ["No finished runs.", ""]
            continue
        tasks = list(done[0].finished()[0].summary["ne"])
        has_gap = all("bayes_gap" in aggregate(g) for g in done)
        base = next((g for g in done if g.label == baseline), None)
        stats = {id(g): aggregate(g) for g in done}
        for task in tasks:
            header = ["variant", "NE", "AUC", "calibration"] + (["gap to Bayes NE (%)"] if has_gap else [])
            header += [f"ΔNE vs `{baseline}`"] if base is not None else []
            lines += [f"**{task}** (final eval, mean ± std over seeds)", "",
                      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for group in done:
                st = stats[id(group)]
                row = [f"`{group.label}`", fmt_mean_std(*st["ne"][task]), fmt_mean_std(*st["auc"][task]),
                       fmt_mean_std(*st["calibration"][task], digits=3)]
                if has_gap:
                    row.append(fmt_mean_std(*st["bayes_gap"][task], digits=2))
                if base is not None:
                    diff, beyond = compare(group, base)[task]
                    row.append("—" if group is base else f"{diff:+.4f}{' (> seed std)' if beyond else ''}")
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
        header = ["variant", "seeds", "examples per run", "train ex/s (median)", "wall per run (min)"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for group in done:
            runs_done = group.finished()
            s = [r.summary for r in runs_done]
            examples = sorted({r.summary["step"] * _batch(r) for r in runs_done})
            rates = [x["train_examples_per_sec"] for x in s if x.get("train_examples_per_sec")]
            lines.append("| " + " | ".join([
                f"`{group.label}`", ", ".join(r.seed for r in runs_done), " / ".join(f"{e:,}" for e in examples),
                f"{statistics.median(rates):,.0f}" if rates else "n/a",
                f"{statistics.fmean(x['wall_time_s'] for x in s) / 60:.1f}"]) + " |")
        common = set.intersection(*(set(g.overrides) for g in groups))
        if common and len(groups) > 1:
            lines += ["", "Common overrides: " + " ".join(f"`{o}`" for o in sorted(common)) + "."]
        if has_gap:
            summary = done[0].finished()[0].summary
            lines += ["", "Bayes-optimal NE on this eval split: "
                      + ", ".join(f"{t} {v:.4f}" for t, v in summary["bayes_ne"].items()) + "."]
            if "bayes_calibration" in summary:  # records before session 7 lack it
                lines[-1] += (" Its calibration there (the labels are a finite draw): "
                              + ", ".join(f"{t} {v:.3f}" for t, v in summary["bayes_calibration"].items())
                              + "; divide a calibration above by it for the calibration against the true "
                                "probabilities.")
        lines.append("")
    unfinished = [r for r in runs if r.summary is None]
    if unfinished:
        lines += ["Left out (no summary line: unfinished or failed): " + ", ".join(f"`{r.path}`" for r in unfinished) + ".", ""]
    lines += ["Commands:", "", "```bash", *sweep_commands(runs), "```", ""]
    lines += [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(lines).rstrip() + "\n"


def _batch(run: Run) -> int:
    config = _read_yaml(run.path / ".hydra" / "config.yaml") or {}
    return int((config.get("data") or {}).get("batch_size", 0))


def write_markdown(out: Path, body: str, title: str) -> None:
    """Replace the generated section of `out` (between the markers), keeping everything else."""
    block = f"{BEGIN}\n{body}{END}\n"
    if out.exists():
        text = out.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1].lstrip("\n")
            out.write_text(head + block + ("\n" + tail if tail else ""))
            return
        out.write_text(text.rstrip() + "\n\n" + block)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# {title}\n\n{block}")


# --------------------------------------------------------------------------------------- plots


def plot(datasets: dict[str, list[Group]], prefix: Path) -> list[Path]:
    """`<prefix>_ne.png`: final NE per variant (mean ± std, seeds as dots); `<prefix>_curves.png`:
    eval NE vs step, mean over seeds with a ± std band. One row per dataset, one column per task;
    the Bayes NE, where known, is in each panel's title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [(d, [g for g in gs if g.finished()]) for d, gs in datasets.items()]
    rows = [(d, gs) for d, gs in rows if gs]
    if not rows:
        return []
    ncols = max(len(gs[0].finished()[0].summary["ne"]) for _, gs in rows)
    paths = [prefix.with_name(prefix.name + "_ne.png"), prefix.with_name(prefix.name + "_curves.png")]
    prefix.parent.mkdir(parents=True, exist_ok=True)

    fig, axes = plt.subplots(len(rows), ncols, figsize=(4.8 * ncols, 3.4 * len(rows)), squeeze=False)
    for i, (dataset, groups) in enumerate(rows):
        tasks = list(groups[0].finished()[0].summary["ne"])
        for j, task in enumerate(tasks):
            ax = axes[i][j]
            stats = [aggregate(g)["ne"][task] for g in groups]
            x = np.arange(len(groups))
            ax.errorbar(x, [m for m, _ in stats], yerr=[0 if math.isnan(s) else s for _, s in stats], fmt="o", capsize=4)
            for g_idx, g in enumerate(groups):  # the individual seeds
                ax.scatter([g_idx] * len(g.finished()), [r.summary["ne"][task] for r in g.finished()], s=8, color="grey", zorder=0)
            # The Bayes NE goes in the title: a line that far below would flatten the differences.
            bayes = (groups[0].finished()[0].summary.get("bayes_ne") or {}).get(task)
            ax.set_xticks(x, [g.label for g in groups], rotation=20, ha="right", fontsize=8)
            ax.set_title(f"{dataset}: {task}" + (f" (Bayes NE {bayes:.3f})" if bayes is not None else ""), fontsize=9)
            ax.set_ylabel("final eval NE (lower is better)", fontsize=8)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(len(rows), ncols, figsize=(4.8 * ncols, 3.4 * len(rows)), squeeze=False)
    for i, (dataset, groups) in enumerate(rows):
        tasks = list(groups[0].finished()[0].summary["ne"])
        for j, task in enumerate(tasks):
            ax = axes[i][j]
            for group in groups:
                steps = sorted(set.intersection(*({e["step"] for e in r.evals} for r in group.finished())))
                curves = np.array([[next(e for e in r.evals if e["step"] == s)["ne"][task] for s in steps]
                                   for r in group.finished()], dtype=float)
                mean, std = curves.mean(0), curves.std(0, ddof=1) if len(curves) > 1 else np.zeros(len(steps))
                line, = ax.plot(steps, mean, marker=".", label=group.label)
                ax.fill_between(steps, mean - std, mean + std, color=line.get_color(), alpha=0.2)
            bayes = (groups[0].finished()[0].summary.get("bayes_ne") or {}).get(task)
            ax.set_title(f"{dataset}: {task}" + (f" (Bayes NE {bayes:.3f})" if bayes is not None else ""), fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.set_ylabel("eval NE", fontsize=8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gem.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="multirun (or job) directories")
    parser.add_argument("--out", type=Path, default=Path("docs/quality.md"), help="markdown file to (re)write")
    parser.add_argument("--plots", type=Path, default=None,
                        help="plot path prefix (default: --out without .md): <prefix>_ne.png, <prefix>_curves.png")
    parser.add_argument("--baseline", default=None, help="variant label to compare NE against, e.g. arm=dlrm")
    parser.add_argument("--title", default="Model quality")
    args = parser.parse_args(argv)

    runs = find_runs(args.dirs)
    if not runs:
        print(f"no job directories (metrics.jsonl + .hydra/overrides.yaml) under {args.dirs}", file=sys.stderr)
        return 1
    datasets = group_runs(runs)
    prefix = args.plots or args.out.with_suffix("")
    plots = plot(datasets, prefix)
    rel = [os.path.relpath(p, args.out.parent) for p in plots]
    body = markdown(datasets, runs, args.baseline, rel)
    write_markdown(args.out, body, args.title)
    print(body)
    print(f"wrote {args.out}" + "".join(f", {p}" for p in plots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
