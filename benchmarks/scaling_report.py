"""Multi-GPU scaling table and plot from the `scale` stage of benchmarks/gpu_e2e.sh.

    python -m benchmarks.scaling_report docs/benchmarks/scaling_h200_runs.log --name scaling_h200

The input holds one line per run, `nproc=N batch=B rc=0 {summary record of metrics.jsonl}` (what
the stage prints). Writes `<name>.{csv,md,png}` next to the input:

- weak scaling: runs whose per-GPU batch equals the 1-GPU run's; efficiency = examples/s at N
  / (N x examples/s at N=1);
- agreement: runs with the same global batch and number of steps (the same examples in the same
  order, split over N ranks); eval metrics side by side, with the largest difference.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"nproc=(\d+) batch=(\d+) rc=(\d+) (\{.*\})\s*$")


@dataclass(frozen=True)
class Run:
    nproc: int
    batch: int
    steps: int
    examples_per_sec: float
    ne: dict[str, float]
    auc: dict[str, float]
    calibration: dict[str, float]

    @property
    def per_gpu_batch(self) -> int:
        return self.batch // self.nproc


def read_runs(path: Path) -> list[Run]:
    runs = []
    for line in path.read_text().splitlines():
        match = LINE.match(line)
        if not match or match.group(3) != "0":
            continue
        summary = json.loads(match.group(4))
        runs.append(Run(int(match.group(1)), int(match.group(2)), summary["step"], summary["train_examples_per_sec"],
                        summary["ne"], summary["auc"], summary["calibration"]))
    return runs


def weak_scaling(runs: list[Run]) -> list[tuple[Run, float]]:
    """(run, efficiency) for every run at the 1-GPU run's per-GPU batch, by N."""
    base = min((r for r in runs if r.nproc == 1), key=lambda r: r.batch)
    same = {r.nproc: r for r in runs if r.per_gpu_batch == base.batch}
    return [(r, r.examples_per_sec / (r.nproc * base.examples_per_sec)) for _, r in sorted(same.items())]


def agreement_groups(runs: list[Run]) -> list[list[Run]]:
    groups: dict[tuple[int, int], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.batch, r.steps), []).append(r)
    return [sorted(g, key=lambda r: r.nproc) for g in groups.values() if len({r.nproc for r in g}) > 1]


def markdown(runs: list[Run], source: Path) -> str:
    tasks = list(runs[0].ne)
    lines = ["| N GPUs | global batch | per-GPU batch | steps | examples/s | weak-scaling efficiency |",
             "|--:|--:|--:|--:|--:|--:|"]
    for r, eff in weak_scaling(runs):
        lines.append(f"| {r.nproc} | {r.batch} | {r.per_gpu_batch} | {r.steps} | {r.examples_per_sec:.0f} | {100 * eff:.1f} % |")
    for group in agreement_groups(runs):
        lines += ["", f"Same global batch {group[0].batch}, {group[0].steps} steps: eval metrics after the last step",
                  "", "| N GPUs | per-GPU batch | examples/s | " + " | ".join(
                      f"NE {t} | AUC {t} | calibration {t}" for t in tasks) + " |",
                  "|--:|--:|--:|" + "--:|" * (3 * len(tasks))]
        for r in group:
            cells = " | ".join(f"{r.ne[t]:.4f} | {r.auc[t]:.4f} | {r.calibration[t]:.3f}" for t in tasks)
            lines.append(f"| {r.nproc} | {r.per_gpu_batch} | {r.examples_per_sec:.0f} | {cells} |")
        spread = " | ".join(
            f"{100 * (max(r.ne[t] for r in group) / min(r.ne[t] for r in group) - 1):.2f} % | "
            f"{max(r.auc[t] for r in group) - min(r.auc[t] for r in group):.4f} | -" for t in tasks)
        lines.append(f"| largest difference | | | {spread} |")
    return "\n".join(lines) + f"\n\nSource: `{source}` (one summary record per run).\n"


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = weak_scaling(runs)
    n = [r.nproc for r, _ in points]
    base = points[0][0].examples_per_sec
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(n, [r.examples_per_sec for r, _ in points], "o-", label="measured")
    ax.plot(n, [k * base for k in n], "--", color="gray", label="linear")
    for (r, eff), k in zip(points, n):
        ax.annotate(f"{100 * eff:.0f} %", (k, r.examples_per_sec), textcoords="offset points", xytext=(6, -12))
    ax.set_xlabel("GPUs (H200)")
    ax.set_ylabel("examples/s")
    ax.set_xticks(n)
    ax.set_title(f"GEM weak scaling, {points[0][0].per_gpu_batch} examples per GPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path)
    parser.add_argument("--name", default="scaling_h200")
    args = parser.parse_args(argv)
    runs = read_runs(args.runs)
    if not any(r.nproc == 1 for r in runs):
        raise SystemExit(f"{args.runs}: no successful 1-GPU run to scale against")
    out = args.runs.parent / args.name
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["nproc", "global_batch", "steps", "examples_per_sec", "ne", "auc", "calibration"])
        for r in runs:
            writer.writerow([r.nproc, r.batch, r.steps, f"{r.examples_per_sec:.1f}", json.dumps(r.ne),
                             json.dumps(r.auc), json.dumps(r.calibration)])
    table = markdown(runs, args.runs)
    out.with_suffix(".md").write_text(table)
    plot(runs, out.with_suffix(".png"))
    print(table)


if __name__ == "__main__":
    main()
