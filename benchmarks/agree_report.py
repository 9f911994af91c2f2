"""Eval metrics per attention backend against the seed-to-seed spread, from the `agree` stage.

    python -m benchmarks.agree_report docs/benchmarks/agree_h200_runs.log --name agree_h200

Input: one line per run, `BACKEND [seed=S] {summary record of metrics.jsonl}` (what the stage
prints; runs without a summary are listed as missing). Writes `<name>.md` next to the input: per
backend the mean (and, with several seeds, the sample std) of each task's eval NE and AUC, then
the spread of the backend means next to the largest seed std. The backends agree "within noise"
when the spread of their means is no larger than about two seed stds; with one seed per backend the
report says the noise is unknown instead.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\S+)(?: seed=(\d+))?\s*(\{.*\})?\s*$")


def read_runs(path: Path) -> tuple[dict[str, list[dict]], list[str]]:
    """backend -> summary records (one per seed), and the runs without a summary."""
    runs: dict[str, list[dict]] = defaultdict(list)
    missing = []
    for line in path.read_text().splitlines():
        match = LINE.match(line.strip())
        if not match or not line.strip():
            continue
        backend, seed, record = match.groups()
        if record is None:
            missing.append(f"{backend} seed={seed or 0}")
        else:
            runs[backend].append(json.loads(record))
    return dict(runs), missing


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def markdown(runs: dict[str, list[dict]], missing: list[str], source: Path) -> str:
    tasks = list(next(iter(runs.values()))[0]["ne"])
    lines = ["| backend | seeds | examples/s | " + " | ".join(f"NE {t} | AUC {t}" for t in tasks) + " |",
             "|---|--:|--:|" + "--:|" * (2 * len(tasks))]
    means: dict[str, dict[str, float]] = defaultdict(dict)
    seed_std: dict[str, float] = defaultdict(float)
    for backend, records in runs.items():
        cells = []
        for task in tasks:
            for metric in ("ne", "auc"):
                mean, std = _mean_std([r[metric][task] for r in records])
                means[f"{metric} {task}"][backend] = mean
                if std is not None:
                    seed_std[f"{metric} {task}"] = max(seed_std[f"{metric} {task}"], std)
                cells.append(f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else ""))
        rate = statistics.fmean(r["train_examples_per_sec"] for r in records)
        lines.append(f"| {backend} | {len(records)} | {rate:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "| metric | spread of the backend means | largest seed std | within noise (spread <= 2 std) |",
              "|---|--:|--:|---|"]
    for metric, by_backend in means.items():
        spread = max(by_backend.values()) - min(by_backend.values())
        std = seed_std.get(metric)
        verdict = "unknown: one seed per backend" if not std else ("yes" if spread <= 2 * std else "no")
        lines.append(f"| {metric} | {spread:.4f} | {std:.4f} | {verdict} |" if std else
                     f"| {metric} | {spread:.4f} | - | {verdict} |")
    if missing:
        lines += ["", "Runs without a summary (failed or timed out): " + ", ".join(missing)]
    return "\n".join(lines) + f"\n\nSource: `{source}`.\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path)
    parser.add_argument("--name", default="agree_h200")
    args = parser.parse_args(argv)
    runs, missing = read_runs(args.runs)
    if not runs:
        raise SystemExit(f"{args.runs}: no run with a summary record")
    table = markdown(runs, missing, args.runs)
    (args.runs.parent / f"{args.name}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
