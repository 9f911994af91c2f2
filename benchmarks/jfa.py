"""Benchmark jagged flash attention against the baselines a user would pick instead (GPU).

    python -m benchmarks.jfa                      # every issue workload, every method
    python -m benchmarks.jfa --quick              # one workload per family, short timing
    python -m benchmarks.jfa --workloads pma_q192 --methods triton,tlx,varlen --passes fwd
    python -m benchmarks.jfa --workloads self --merge   # add rows to the existing results

For each workload (``benchmarks.jfa_workloads``) and method (our backends ``tlx``, ``triton``,
``reference``; baselines ``varlen``, ``flex``, ``sdpa_padded`` from ``benchmarks.jfa_baselines``)
it reports forward and forward+backward median ms (``triton.testing.do_bench``: warm-up, L2
flushed between runs), valid-FLOP TFLOP/s, effective bandwidth (minimal bytes / time), the
roofline floor and the ratio to it, the speedup over the best baseline, the peak extra memory and
the max |difference| of the output from the triton backend's. A method that fails (unsupported,
out of memory, error) is recorded with its status instead of stopping the run.

Writes ``<out-dir>/<name>.{csv,md,png}`` (default ``docs/benchmarks/jfa_h200``), prints the
markdown table, and copies the files into ``$OUT`` when that variable is set.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.jfa_baselines import BASELINES, Run
from benchmarks.jfa_workloads import ISSUE_WORKLOADS, MODEL_WORKLOADS, Cost, JaggedInputs, Lengths, Workload, cost, make_inputs
from kernels import jagged_flash_attention
from kernels.jfa import BACKEND_MODULES

OUR_BACKENDS = tuple(BACKEND_MODULES)  # tlx, triton, reference
DEFAULT_METHODS = ("triton", "tlx", "varlen", "flex", "sdpa_padded")  # reference: B Python loops, opt-in
PASSES = ("fwd", "fwd+bwd")
CHECK_METHOD = "triton"  # outputs are compared with this method's


# -----------------------------------------------------------------------------------------------
# Methods
# -----------------------------------------------------------------------------------------------


def _our_backend(name: str) -> Callable[[JaggedInputs], Run]:
    def prepare(inputs: JaggedInputs) -> Run:
        def run() -> Tensor:
            if name == "tlx":  # each timed call pays its schedule builds, as the first call of a batch does
                from kernels.tlx_schedule import clear_schedule_cache

                clear_schedule_cache()
            return jagged_flash_attention(
                inputs.query, inputs.key, inputs.value, inputs.query_offset, inputs.key_offset,
                inputs.max_seq_len_q, inputs.max_seq_len_kv, causal=inputs.causal, broadcast_q=inputs.broadcast_q,
                backend=name,
            )  # fmt: skip

        return run

    return prepare


METHODS: dict[str, Callable[[JaggedInputs], Run]] = {**{n: _our_backend(n) for n in OUR_BACKENDS}, **BASELINES}


# -----------------------------------------------------------------------------------------------
# Measurement
# -----------------------------------------------------------------------------------------------


@dataclass
class Result:
    workload: str
    passes: str
    method: str
    status: str = "ok"
    ms: float = math.nan
    tflops: float = math.nan
    gbps: float = math.nan  # minimal bytes / time
    floor_ms: float = math.nan
    x_floor: float = math.nan  # ms / floor_ms
    speedup_vs_best_baseline: float = math.nan
    peak_mib: float = math.nan  # peak memory allocated by one call, beyond the inputs
    max_abs_diff: float = math.nan  # forward output vs CHECK_METHOD's


def _step(run: Run, passes: str, grad_out: Tensor | None) -> Callable[[], None]:
    if passes == "fwd":

        def forward() -> None:
            with torch.no_grad():
                run()

        return forward

    def forward_backward() -> None:
        run().backward(grad_out)

    return forward_backward


def _peak_mib(step: Callable[[], None], inputs: JaggedInputs) -> float:
    for x in inputs.leaves():
        x.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def measure(method: str, workload: Workload, inputs: JaggedInputs, passes: str, warmup_ms: int, rep_ms: int,
            check: Tensor | None) -> tuple[Result, Tensor | None]:  # fmt: skip
    """Times one method on one pass; returns the result and the forward output (for checks)."""
    import triton.testing

    result = Result(workload.name, passes, method)
    output = None
    for x in inputs.leaves():
        x.requires_grad_(passes == "fwd+bwd")
        x.grad = None
    try:
        run = METHODS[method](inputs)
        with torch.no_grad():
            output = run()  # compiles / autotunes outside the timed region
        if check is not None:
            result.max_abs_diff = (output.float() - check.float()).abs().max().item()
        step = _step(run, passes, torch.randn_like(output) if passes == "fwd+bwd" else None)
        step()
        result.ms = triton.testing.do_bench(step, warmup=warmup_ms, rep=rep_ms, grad_to_none=inputs.leaves(),
                                            return_mode="median")  # fmt: skip
        result.peak_mib = _peak_mib(step, inputs)
    except torch.cuda.OutOfMemoryError:
        result.status = "out of memory"
    except Exception as error:  # a failing method is recorded, not fatal
        result.status = _failure_status(error)
    finally:
        for x in inputs.leaves():
            x.grad = None
        torch.cuda.empty_cache()
    return result, output


def _failure_status(error: Exception) -> str:
    message = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, ValueError) and message.startswith("backend:"):  # our front door says why
        return "unsupported: " + message.split(": ", 2)[-1]
    return f"error: {type(error).__name__}: {message[:120]}"


def _add_rates(result: Result, workload_cost: Cost) -> None:
    passes_flops = workload_cost.fwd_flops if result.passes == "fwd" else workload_cost.fwd_bwd_flops
    passes_bytes = workload_cost.fwd_bytes if result.passes == "fwd" else workload_cost.fwd_bwd_bytes
    result.floor_ms = workload_cost.floor_ms(result.passes)
    if result.status == "ok":
        seconds = result.ms * 1e-3
        result.tflops = passes_flops / seconds / 1e12
        result.gbps = passes_bytes / seconds / 1e9
        result.x_floor = result.ms / result.floor_ms


def _add_speedups(results: list[Result]) -> None:
    for key in {(r.workload, r.passes) for r in results}:
        group = [r for r in results if (r.workload, r.passes) == key]
        baseline_ms = [r.ms for r in group if r.method in BASELINES and r.status == "ok"]
        if baseline_ms:
            for r in group:
                r.speedup_vs_best_baseline = min(baseline_ms) / r.ms if r.status == "ok" else math.nan


def benchmark(workloads: list[Workload], methods: list[str], passes: list[str], warmup_ms: int, rep_ms: int,
              seed: int) -> list[Result]:  # fmt: skip
    results = []
    ordered = sorted(methods, key=lambda m: m != CHECK_METHOD)  # the check output first
    for workload in workloads:
        lengths = Lengths.sample(workload, seed)
        workload_cost = cost(workload, lengths)
        inputs = make_inputs(workload, lengths, "cuda", seed)
        print(f"# {workload.name}: floor fwd {workload_cost.floor_ms('fwd'):.3f} ms, "
              f"fwd+bwd {workload_cost.floor_ms('fwd+bwd'):.3f} ms", flush=True)  # fmt: skip
        check = None
        for method in ordered:
            for passes_ in passes:
                result, output = measure(method, workload, inputs, passes_, warmup_ms, rep_ms, check)
                if method == CHECK_METHOD and result.status == "ok" and check is None:
                    check = output
                _add_rates(result, workload_cost)
                results.append(result)
                print(f"  {method:12s} {passes_:8s} {result.ms:8.3f} ms  {result.tflops:6.1f} TFLOP/s  "
                      f"{result.x_floor:5.2f}x floor  {result.status}", flush=True)  # fmt: skip
        del inputs
        torch.cuda.empty_cache()
    _add_speedups(results)
    return results


# -----------------------------------------------------------------------------------------------
# Reports
# -----------------------------------------------------------------------------------------------

COLUMNS = [f.name for f in fields(Result)]


def write_csv(results: list[Result], path: Path) -> None:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in results)


def read_csv(path: Path) -> list[Result]:
    with path.open() as file:
        return [
            Result(**{k: (v if k in ("workload", "passes", "method", "status") else float(v)) for k, v in row.items()})
            for row in csv.DictReader(file)
        ]


def _number(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def markdown(results: list[Result], header: str) -> str:
    lines = [header]
    for passes_ in PASSES:
        rows = [r for r in results if r.passes == passes_]
        if not rows:
            continue
        lines += [
            f"\n## {'Forward' if passes_ == 'fwd' else 'Forward + backward'}\n",
            "| workload | method | ms | TFLOP/s | GB/s | floor ms | x floor | vs best baseline | peak MiB "
            "| max abs diff | status |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r.workload} | {r.method} | {_number(r.ms, 3)} | {_number(r.tflops, 1)} | {_number(r.gbps, 0)} | "
                f"{_number(r.floor_ms, 3)} | {_number(r.x_floor, 2)} | {_number(r.speedup_vs_best_baseline, 2)} | "
                f"{_number(r.peak_mib, 0)} | {_number(r.max_abs_diff, 4)} | {r.status} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: list[Result], path: Path, title: str) -> None:
    """Time over the roofline floor (log scale, lower is better), per workload and method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r.workload for r in results))
    methods = list(dict.fromkeys(r.method for r in results))
    figure, axes = plt.subplots(len(PASSES), 1, figsize=(max(8, 1.6 * len(workloads)), 9), squeeze=False)
    width = 0.8 / max(len(methods), 1)
    for ax, passes_ in zip(axes[:, 0], PASSES):
        for i, method in enumerate(methods):
            by_workload = {r.workload: r.x_floor for r in results if r.passes == passes_ and r.method == method}
            heights = [by_workload.get(w, math.nan) for w in workloads]
            ax.bar([x + i * width for x in range(len(workloads))], heights, width, label=method)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(f"{passes_}: time / roofline floor")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=20, ha="right", fontsize=7)
        ax.legend(fontsize=7, ncol=len(methods))
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _header(argv: list[str]) -> str:
    import triton

    device = torch.cuda.get_device_name()
    return "\n".join([
        f"# Jagged flash attention benchmark ({device})\n",
        f"- command: `python -m benchmarks.jfa {shlex.join(argv)}`",
        f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; "
        f"torch {torch.__version__}, triton {triton.__version__}",
        "- bf16, D=128; median of `triton.testing.do_bench` (L2 flushed between runs); time is end to end per "
        "call: a PMA baseline expands Q per batch element inside the timed call, work that depends only on the "
        "batch structure (cu_seqlens, padding indices, FlexAttention block mask) is not timed",
        "- TFLOP/s counts valid FLOPs (fwd 4·H·D·visible pairs, fwd+bwd 3.5x); GB/s = minimal HBM bytes / time; "
        "floor = max(FLOPs / 788 TFLOP/s, minimal bytes / 4.3 TB/s); peak MiB = memory allocated by one call "
        "beyond its inputs; max abs diff = forward output vs the triton backend's",
    ])  # fmt: skip


def write_reports(results: list[Result], out_dir: Path, name: str, argv: list[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("csv", "md", "png")]
    header = _header(argv)
    write_csv(results, paths[0])
    paths[1].write_text(markdown(results, header))
    plot(results, paths[2], header.splitlines()[0].lstrip("# "))
    return paths


# -----------------------------------------------------------------------------------------------
# Command line
# -----------------------------------------------------------------------------------------------


def _select_workloads(patterns: list[str] | None, quick: bool) -> list[Workload]:
    """Workloads whose name contains a pattern; patterns starting with "gem_base" pick from the
    model's own shapes (MODEL_WORKLOADS), the others from the issue's."""
    if patterns:
        chosen = [w for w in ISSUE_WORKLOADS + MODEL_WORKLOADS
                  if any(p in w.name and p.startswith("gem_base") == bool(w.family) for p in patterns)]
        if not chosen:
            names = [w.name for w in ISSUE_WORKLOADS + MODEL_WORKLOADS]
            raise SystemExit(f"no workload matches {patterns}; names: {names}")
        return chosen
    if quick:  # one per family
        return [w for w in ISSUE_WORKLOADS if w.fill == 0.5]
    return list(ISSUE_WORKLOADS)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", help="substrings of workload names (default: all)")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS), help=f"comma-separated, from {list(METHODS)}")
    parser.add_argument("--passes", default=",".join(PASSES), help="comma-separated: fwd,fwd+bwd")
    parser.add_argument("--quick", action="store_true", help="short timing; one workload per family by default")
    parser.add_argument("--merge", action="store_true", help="keep rows of the existing CSV not measured now")
    parser.add_argument("--out-dir", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--name", default="jfa_h200")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.jfa needs a CUDA GPU")
    methods = [m for m in args.methods.split(",") if m]
    passes = [p for p in args.passes.split(",") if p]
    unknown = sorted(set(methods) - set(METHODS)) + sorted(set(passes) - set(PASSES))
    if unknown:
        raise SystemExit(f"unknown methods/passes: {unknown}")
    warmup_ms, rep_ms = (5, 20) if args.quick else (25, 100)

    results = benchmark(_select_workloads(args.workloads, args.quick), methods, passes, warmup_ms, rep_ms, args.seed)
    csv_path = args.out_dir / f"{args.name}.csv"
    if args.merge and csv_path.exists():
        measured = {(r.workload, r.passes, r.method) for r in results}
        results = [r for r in read_csv(csv_path) if (r.workload, r.passes, r.method) not in measured] + results
        _add_speedups(results)
    paths = write_reports(results, args.out_dir, args.name, argv)
    print(paths[1].read_text())
    if os.environ.get("OUT") and Path(os.environ["OUT"]).resolve() != args.out_dir.resolve():
        for path in paths:
            shutil.copy(path, os.environ["OUT"])
    print("wrote " + ", ".join(map(str, paths)))


if __name__ == "__main__":
    main()
