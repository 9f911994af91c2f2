"""Gap to the Bayes NE against training examples, per task, from recorded eval records (issue 8).

The long GPU runs keep only their metrics.jsonl (docs/quality_runs/), not a Hydra run directory, so
`gem.report` cannot read them; this plots them instead, one line per group (mean over its seeds,
a band of ± one sample std), and prints the final evals as a markdown table. A run whose records
do not close with a summary (still going, preempted and not resumed, failed) is counted at its last
eval and marked "unfinished" in the seeds column, with a warning:

    python -m benchmarks.quality_gap_plot \\
        "batch 1024, sparse lr 0.05=1024=docs/quality_runs/gpu_b1024_cosine_10k_s*.jsonl" \\
        "batch 2048, sparse lr 0.4=2048=docs/quality_runs/gpu_b2048_cosine_22k_sparse0.4_s*.jsonl" \\
        --out docs/quality_small_gap.png
"""

from __future__ import annotations

import argparse
import glob
import sys
from dataclasses import dataclass
from pathlib import Path

from gem.report import bayes_gap, evals_by_step, final_summary, fmt_mean_std, mean_std, read_records

TASKS = ("click", "conversion")


@dataclass
class Group:
    label: str
    batch_size: int
    evals: list[list[dict]]  # per seed, its eval records in step order
    unfinished: list[str]    # the seeds' files without a closing summary (still running, preempted, failed)

    def gaps(self, task: str) -> dict[int, list[float]]:
        """Examples seen -> the seeds' percent gaps to the Bayes NE at that eval."""
        by_examples: dict[int, list[float]] = {}
        for records in self.evals:
            for r in records:
                by_examples.setdefault(r["step"] * self.batch_size, []).append(bayes_gap(r, task))
        return {n: g for n, g in sorted(by_examples.items()) if len(g) == len(self.evals)}


def parse_group(spec: str) -> Group:
    try:
        label, batch, pattern = spec.rsplit("=", 2)
        batch_size = int(batch)
    except ValueError:
        raise SystemExit(f"group {spec!r}: expected LABEL=BATCH_SIZE=GLOB") from None
    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit(f"group {label!r}: no file matches {pattern!r}")
    evals, unfinished = [], []
    for path in files:
        records = read_records(Path(path))
        seed_evals = [r for r in evals_by_step(records) if "bayes_ne" in r]
        if not seed_evals:
            raise SystemExit(f"{path}: no eval record with a Bayes NE (a synthetic run's metrics.jsonl?)")
        evals.append(seed_evals)
        if final_summary(records) is None:
            unfinished.append(path)
    return Group(label, batch_size, evals, unfinished)


def table(groups: list[Group]) -> str:
    lines = ["| group | seeds | examples | " + " | ".join(f"{t} NE | {t} above Bayes" for t in TASKS)
             + " | click AUC | click calibration |",
             "|---|--:|--:|" + "--:|" * (2 * len(TASKS) + 2)]
    for g in groups:
        final = [records[-1] for records in g.evals]
        cells = []
        for task in TASKS:
            cells += [fmt_mean_std(*mean_std([r["ne"][task] for r in final])),
                      fmt_mean_std(*mean_std([bayes_gap(r, task) for r in final]), 2) + " %"]
        auc = fmt_mean_std(*mean_std([r["auc"]["click"] for r in final]))
        cal = fmt_mean_std(*mean_std([r["calibration"]["click"] for r in final]), 3)
        examples = {r["step"] * g.batch_size for r in final}
        seeds = f"{len(final)} ({len(g.unfinished)} unfinished)" if g.unfinished else str(len(final))
        lines.append(f"| {g.label} | {seeds} | {'/'.join(f'{n / 1e6:.2f}M' for n in sorted(examples))} | "
                     + " | ".join(cells) + f" | {auc} | {cal} |")
    return "\n".join(lines)


def plot(groups: list[Group], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    fig, axes = plt.subplots(1, len(TASKS), figsize=(5 * len(TASKS), 3.6), sharex=True)
    for ax, task in zip(axes, TASKS):
        for g in groups:
            gaps = g.gaps(task)
            x = [n / 1e6 for n in gaps]
            stats = [mean_std(v) for v in gaps.values()]
            mean = [m for m, _ in stats]
            line, = ax.plot(x, mean, marker="o", markersize=3, label=f"{g.label} ({len(g.evals)} seed{'s' if len(g.evals) > 1 else ''})")
            ax.fill_between(x, [m - s for m, s in stats], [m + s for m, s in stats], color=line.get_color(),
                            alpha=0.2)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="goal: 1 % above Bayes")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers: the decades span little here
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xticks([1, 2, 5, 10, 20, 50])
        ax.set_yticks([0.5, 1, 2, 5, 10, 20])
        ax.set_title(f"{task}: eval NE above the Bayes NE", fontsize=9)
        ax.set_xlabel("training examples (millions)", fontsize=8)
        ax.set_ylabel("%", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("groups", nargs="+", metavar="LABEL=BATCH_SIZE=GLOB",
                        help="one line per group: its label, its batch size, its seeds' metrics.jsonl files")
    parser.add_argument("--out", type=Path, required=True, help="the plot (png)")
    args = parser.parse_args(argv)
    groups = [parse_group(spec) for spec in args.groups]
    for g in groups:
        for path in g.unfinished:  # its last eval is where it stopped, not where it was going
            print(f"warning: {g.label}: {path} has no closing summary (unfinished, preempted or failed)",
                  file=sys.stderr)
    plot(groups, args.out)
    print(table(groups))
    print(f"\nplot: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
