"""End-to-end training throughput of the GEM model per attention backend and sequence fill.

    python -m benchmarks.train_throughput                                   # issue-6 grid on one GPU
    python -m benchmarks.train_throughput --backends tlx,varlen --fills 0.5 --steps 20
    python -m benchmarks.train_throughput --device cpu --preset tiny        # a CPU smoke run

For every (attention.backend, data.seq.fill) it builds the real trainer (DMP-sharded embeddings,
fused optimizer, bf16 autocast on GPU), runs warm-up steps, then times `--steps` steps one by one
with device events and reports the median examples/s; a few more steps run under torch.profiler to
split device time into embeddings (FBGEMM TBE kernels), attention (JFA / FlashAttention / SDPA
kernels) and the rest; peak memory; and MFU = analytic training FLOPs (`gem.models.gem.gem_flops`)
per second / 788 TFLOP/s (the bf16 matmul rate measured on the H200). Writes
`docs/benchmarks/train_throughput_<name>.{csv,md,png}` and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gc
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import torch
from hydra import compose, initialize_config_dir

from data import Batch
from gem.config import register_resolvers
from gem.models.gem import GEM, gem_flops
from gem.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
PEAK_FLOPS = 788e12  # bf16 matmul rate measured on the H200 (8192^3 on random data)

# base: the representative ads-ranking config of issue 6 (conf/experiment/gpu_base.yaml).
PRESETS = {
    "base": ["+experiment=gpu_base"],
    "tiny": ["model=gem_tiny", "data.batch_size=64", "data.seq.max_len=32", "data.eval_examples=64"],
}
EMBEDDING_KERNELS = ("embedding", "tbe", "split_embedding", "bounds_check")
ATTENTION_KERNELS = ("jfa", "flash", "fmha", "attention", "sdpa", "attn")


@dataclass
class Row:
    backend: str
    fill: float
    status: str
    examples_per_sec: float = float("nan")
    step_ms: float = float("nan")
    embeddings_pct: float = float("nan")
    attention_pct: float = float("nan")
    rest_pct: float = float("nan")
    peak_gib: float = float("nan")
    tflops: float = float("nan")
    mfu_pct: float = float("nan")
    eval_ne: float = float("nan")  # first task's eval NE after warmup + steps + profile steps


def _category(kernel_name: str) -> str:
    name = kernel_name.lower()
    if any(k in name for k in EMBEDDING_KERNELS):
        return "embeddings"
    if any(k in name for k in ATTENTION_KERNELS):
        return "attention"
    return "rest"


class _RecordingStream:
    """Yields the trainer's host batches and keeps each one's sequence lengths: the k-th step trains
    the k-th batch drawn, with or without a prefetching pipeline, so FLOPs can be matched to steps."""

    def __init__(self, batches: Iterator[Batch]) -> None:
        self.batches, self.lengths = batches, []

    def __iter__(self) -> "_RecordingStream":
        return self

    def __next__(self) -> Batch:
        batch = next(self.batches)
        self.lengths.append(batch.sequence.lengths()[: batch.batch_size])
        return batch


def _profile_split(trainer: Trainer, batches, steps: int) -> dict[str, float]:
    """Share of device (or, on CPU, self CPU) time per category over `steps` steps."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    on_gpu = trainer.device.type == "cuda"
    if on_gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.advance(batches)
        if on_gpu:
            torch.cuda.synchronize()
    totals = {"embeddings": 0.0, "attention": 0.0, "rest": 0.0}
    for event in prof.key_averages():
        if on_gpu and event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        time_us = event.self_device_time_total if on_gpu else event.self_cpu_time_total
        totals[_category(event.key)] += time_us
    whole = sum(totals.values()) or 1.0
    return {k: 100.0 * v / whole for k, v in totals.items()}


def _timed_step(trainer: Trainer, batches) -> float:
    """Seconds of one training step: device events on GPU, the host clock on CPU. Without a
    pipeline the batch is fetched and its copy enqueued before the clock starts; a pipeline fetches
    inside its step (batch i+2), which is part of what it costs."""
    if trainer.pipeline is None:
        batch = next(batches).to(trainer.device, non_blocking=True)
        step = lambda: trainer.train_step(batch)  # noqa: E731
    else:
        step = lambda: trainer.advance(batches)  # noqa: E731
    if trainer.device.type != "cuda":
        start = time.perf_counter()
        step()
        return time.perf_counter() - start
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def measure(overrides: list[str], backend: str, fill: float, warmup: int, steps: int, profile_steps: int) -> Row:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[*overrides, f"attention.backend={backend}",
                                                       f"data.seq.fill={fill}", "trainer.progress=false",
                                                       "trainer.tensorboard=false", "trainer.resume=none"])
    built = time.perf_counter()
    trainer = Trainer(cfg, Path("/tmp/gem_throughput"))
    try:
        print(f"[{backend} fill {fill}] built in {time.perf_counter() - built:.0f}s", file=sys.stderr, flush=True)
        assert isinstance(trainer.model.module, GEM), "the throughput benchmark is for GEM models"
        batches = _RecordingStream(trainer.train_stream())
        on_gpu = trainer.device.type == "cuda"
        for _ in range(warmup):
            trainer.advance(batches)
        if on_gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        times, flops = [], []
        for step in range(warmup, warmup + steps):
            times.append(_timed_step(trainer, batches))
            flops.append(gem_flops(trainer.model.module, batches.lengths[step]).train)
        step_s = statistics.median(times)
        split = _profile_split(trainer, batches, profile_steps)
        tflops = statistics.median(f / t for f, t in zip(flops, times)) / 1e12
        # Same seed, same batches, same number of steps for every backend: NE must agree within noise.
        eval_ne = next(iter(trainer.evaluate()["ne"].values()))
        return Row(backend, fill, "ok", trainer.global_batch_size / step_s, step_s * 1e3, split["embeddings"],
                   split["attention"], split["rest"],
                   torch.cuda.max_memory_allocated() / 2**30 if on_gpu else float("nan"),
                   tflops, 100.0 * tflops * 1e12 / PEAK_FLOPS, eval_ne)
    except Exception as error:  # noqa: BLE001 - a backend that cannot run is a result, not a crash
        return Row(backend, fill, f"error: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
    finally:
        trainer.close()
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def run_header(argv: list[str]) -> tuple[str, list[str]]:
    """(device name, the command and date lines) of this process's measurements."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    return device, [f"- command: `python -m benchmarks.train_throughput {shlex.join(argv)}`",
                    f"- date: {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; torch {torch.__version__}"]


def merged_header(md_paths: list[Path], argv: list[str]) -> tuple[str, list[str]]:
    """The device and every source run's command and date lines, for tables merged from `md_paths`."""
    texts = [path.read_text().splitlines() for path in md_paths]
    device = texts[0][0].split("(", 1)[1].rstrip(")")
    sources = [line for text in texts for line in text if line.startswith(("- command:", "- date:"))]
    return device, [f"- merged by `python -m benchmarks.train_throughput {shlex.join(argv)}` from:", *sources]


def write_reports(rows: list[Row], out_dir: Path, name: str, device: str, header: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"train_throughput_{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    lines = [f"# GEM training throughput ({device})\n", *header,
             "- examples/s: median over timed steps; split: share of profiled device time; MFU against 788 TFLOP/s\n",
             "| backend | fill | examples/s | step ms | embeddings % | attention % | rest % | peak GiB | TFLOP/s | MFU % | eval NE | status |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        lines.append(f"| {r.backend} | {r.fill} | {r.examples_per_sec:.0f} | {r.step_ms:.1f} | {r.embeddings_pct:.1f} | "
                     f"{r.attention_pct:.1f} | {r.rest_pct:.1f} | {r.peak_gib:.1f} | {r.tflops:.1f} | {r.mfu_pct:.1f} | "
                     f"{r.eval_ne:.4f} | {r.status} |")
    (out_dir / f"train_throughput_{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fills = sorted({r.fill for r in rows})
    backends = sorted({r.backend for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(backends), 1)
    for i, backend in enumerate(backends):
        values = [next((r.examples_per_sec for r in rows if r.backend == backend and r.fill == f), 0) for f in fills]
        ax.bar([x + i * width for x in range(len(fills))], values, width, label=backend)
    ax.set_xticks([x + width * (len(backends) - 1) / 2 for x in range(len(fills))], [f"fill {f}" for f in fills])
    ax.set_ylabel("examples/s")
    ax.set_title(f"GEM training throughput, {device}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / f"train_throughput_{name}.png", dpi=120)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tlx,triton,varlen,sdpa_padded")
    parser.add_argument("--fills", default="0.1,0.5,0.9")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="base")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--name", default="h200")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="CSV",
                        help="only combine the tables of earlier runs (e.g. one per GPU) into --name")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. model.sequence.num_layers=2")
    args = parser.parse_args(argv)
    if args.merge:
        rows = [Row(**{k: v if k in ("backend", "status") else float(v) for k, v in r.items()})
                for path in args.merge for r in csv.DictReader(open(path))]
        order = args.backends.split(",")
        rows.sort(key=lambda r: (r.fill, order.index(r.backend) if r.backend in order else len(order)))
        write_reports(rows, args.out_dir, args.name, *merged_header([p.with_suffix(".md") for p in args.merge], argv))
        return
    register_resolvers()
    overrides = [*PRESETS[args.preset], f"trainer.device={args.device}", *args.overrides]
    rows = []
    for fill in args.fills.split(","):
        for backend in args.backends.split(","):
            rows.append(measure(overrides, backend, float(fill), args.warmup, args.steps, args.profile_steps))
            write_reports(rows, args.out_dir, args.name, *run_header(argv))  # after every row: a killed run keeps its rows


if __name__ == "__main__":
    main()
