"""Issue 5's performance goals, run by run, from recorded `tlx_hopper_bench` rows.

    python -m benchmarks.tlx_goal_plot "run 8=docs/kernels/tlx_hopper_run8/bench_full.jsonl" \\
        "run 11=docs/kernels/tlx_hopper_run11/bench.jsonl" --out docs/kernels/tlx_goals.png

A run may list several record files (LABEL=PATH,PATH): rows repeated across them count by median.
A record file may be gzipped: PATH.gz is read where PATH is (the older runs' records, packed to keep
the working tree within the device transfer's limit).

For each benchmark row and run: attainment = goal time / tlx time (1 or more: the goal is met), with
the goal time from the baselines measured in that run:
- PMA forward: max(varlen / 2, 1.25 x floor); PMA forward+backward: varlen / 2; each twice where
  the row has both baselines: on `varlen_*` (Q expanded ahead of time, untimed: the stricter bar
  every run recorded) and, as "ROW (issue's varlen)", on `issue_varlen_*` (Q expanded inside the
  call and its gradient summed, as the issue's baselines were measured; recorded since session 57);
- jagged self-attention forward and forward+backward: varlen / 1.5;
- dense forward (rows with a tutorial time; "self B768 fill1.0" is the dense B768 H4 N1024 case):
  tutorial / 0.95, i.e. at least 95 % of the tutorial's TFLOP/s.
Rows timed with paired baselines (`tlx_hopper_bench --baseline-rounds`) give each ratio as the
median of its rounds' baseline/tlx ratios (`*_per_tlx`), the status tables' numbers.
Prints a markdown table (one column per run) and plots one panel per pass, one line per goal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

PMA_FWD_SPEEDUP = 2.0
PMA_FWDBWD_SPEEDUP = 2.0
SELF_SPEEDUP = 1.5
ROOFLINE_SLACK = 1.25
DENSE_FRACTION = 0.95
PASSES = ("fwd", "fwd+bwd")
ISSUE_BASELINE = " (issue's varlen)"  # the goals on `tlx_hopper_bench`'s issue_varlen_* columns


def _speedup(row: dict, base_key: str, tlx_ms: float) -> float:
    """Baseline time / tlx time: the median of the paired rounds' ratios where the row has them
    (`*_per_tlx`), else the ratio of the two recorded times."""
    return row.get(f"{base_key}_per_tlx") or row[base_key] / tlx_ms


def attainment(row: dict) -> dict[tuple[str, str], float]:
    """(goal name, pass) -> goal time / tlx time for one benchmark row (missing timings: no entry)."""
    name, out = row["name"], {}
    fwd, fwdbwd = row.get("tlx_fwd_ms"), row.get("tlx_fwdbwd_ms")
    if name.startswith("PMA"):
        # the pre-expanded varlen (every run), then the issue's own baseline where recorded
        for goal, base, fwd_ms, fwdbwd_ms in (
                (name, "varlen", fwd, fwdbwd),
                (name + ISSUE_BASELINE, "issue_varlen", row.get("tlx_fwd_vs_issue_ms"),
                 row.get("tlx_fwdbwd_vs_issue_ms"))):
            if fwd_ms and f"{base}_fwd_ms" in row:
                out[(goal, "fwd")] = max(_speedup(row, f"{base}_fwd_ms", fwd_ms) / PMA_FWD_SPEEDUP,
                                         ROOFLINE_SLACK * row["floor_fwd_ms"] / fwd_ms)
            if fwdbwd_ms and f"{base}_fwdbwd_ms" in row:
                out[(goal, "fwd+bwd")] = (_speedup(row, f"{base}_fwdbwd_ms", fwdbwd_ms)
                                          / PMA_FWDBWD_SPEEDUP)
    elif name.startswith("self"):
        if fwd:
            out[(name, "fwd")] = _speedup(row, "varlen_fwd_ms", fwd) / SELF_SPEEDUP
        if fwdbwd:
            out[(name, "fwd+bwd")] = _speedup(row, "varlen_fwdbwd_ms", fwdbwd) / SELF_SPEEDUP
    if fwd and row.get("tutorial_fwd_ms"):
        dense = "dense B768 H4 N1024" if name.startswith("self") else name
        out[(f"{dense} vs tutorial", "fwd")] = _speedup(row, "tutorial_fwd_ms", fwd) / DENSE_FRACTION
    return out


def read_records(path: str) -> list[dict]:
    """The JSON rows of a record file: PATH, gzipped if it ends in .gz, or PATH.gz where PATH is
    not."""
    file = Path(path)
    if not file.exists() and file.with_name(file.name + ".gz").exists():
        file = file.with_name(file.name + ".gz")
    text = gzip.decompress(file.read_bytes()).decode() if file.suffix == ".gz" else file.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_run(spec: str) -> tuple[str, dict[tuple[str, str], float]]:
    """LABEL=PATH[,PATH...]: one run's records; a goal measured more than once in the run (the
    repeated default-config rows of A/B calls) gets the median of its attainments."""
    label, sep, paths = spec.partition("=")
    if not sep or not label:
        raise SystemExit(f"run {spec!r}: expected LABEL=PATH[,PATH...]")
    samples: dict[tuple[str, str], list[float]] = {}
    for path in paths.split(","):
        try:
            rows = read_records(path)
        except FileNotFoundError:
            raise SystemExit(f"run {label!r}: no file {path!r}") from None
        for row in rows:
            if "error" not in row:
                for key, value in attainment(row).items():
                    samples.setdefault(key, []).append(value)
    if not samples:
        raise SystemExit(f"run {label!r}: {paths} has no benchmark row with timings")
    return label, {key: statistics.median(values) for key, values in samples.items()}


def table(runs: list[tuple[str, dict]]) -> str:
    keys = list(dict.fromkeys(k for _, goals in runs for k in goals))
    lines = ["| goal | pass | " + " | ".join(label for label, _ in runs) + " |",
             "|---|---|" + "--:|" * len(runs)]
    for key in keys:
        cells = [f"**{g[key]:.3f}**" if g.get(key, 0) >= 1 else (f"{g[key]:.3f}" if key in g else "-")
                 for _, g in runs]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[tuple[str, dict]], out: Path, marks: dict[str, str] | None = None) -> None:
    """marks: run label -> a note drawn as a dotted line just before that run in both panels (a
    change of method between runs, e.g. a fairer baseline)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(k[0] for _, goals in runs for k in goals))
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}  # one colour per goal in both panels
    fig, axes = plt.subplots(1, len(PASSES), figsize=(5 * len(PASSES) + 2.5, 4), sharey=True)
    x = range(len(runs))
    for ax, pass_ in zip(axes, PASSES):
        for name in names:
            key = (name, pass_)
            if any(key in g for _, g in runs):
                ax.plot([i for i in x if key in runs[i][1]], [g[key] for _, g in runs if key in g],
                        marker="o", markersize=4, color=colors[name], label=name)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        labels = [label for label, _ in runs]
        for label, note in (marks or {}).items():
            at = labels.index(label) - 0.5
            ax.axvline(at, color="black", linestyle=":", linewidth=1)
            ax.text(at, 0.02, f" {note}", transform=ax.get_xaxis_transform(), fontsize=7, rotation=90,
                    va="bottom", ha="right")
        # "run N" labels side by side overlap once there are a few dozen runs: numbers, upright
        ax.set_xticks(list(x), [label.removeprefix("run ") for label, _ in runs], fontsize=7,
                      rotation=90)
        ax.set_xlabel("run", fontsize=8)
        ax.set_title(f"{pass_}: goal time / tlx time (>= 1: goal met)", fontsize=9)
        ax.grid(True, alpha=0.3)
    handles = {h.get_label(): h for ax in axes for h in ax.get_lines() if not h.get_label().startswith("_")}
    fig.legend(list(handles.values()), list(handles), loc="center right", fontsize=7)
    fig.tight_layout(rect=(0, 0, 1 - 2.3 / (5 * len(PASSES) + 2.5), 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="LABEL=PATH[,PATH...]",
                        help="a run's tlx_hopper_bench records, in run order")
    parser.add_argument("--out", type=Path, required=True, help="the plot (png)")
    parser.add_argument("--mark", action="append", default=[], metavar="LABEL=NOTE",
                        help="a dotted line with NOTE before run LABEL (a change of method); repeatable")
    args = parser.parse_args(argv)
    runs = [read_run(spec) for spec in args.runs]
    marks = {}
    for spec in args.mark:
        label, sep, note = spec.partition("=")
        if not sep or label not in [name for name, _ in runs]:
            raise SystemExit(f"--mark {spec!r}: expected LABEL=NOTE with LABEL one of the runs")
        marks[label] = note
    plot(runs, args.out, marks)
    print(table(runs))
    print(f"\nplot: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
