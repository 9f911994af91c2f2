"""Where one attention call's time goes (GPU): host time to enqueue it, device time per kernel.

    python -m benchmarks.jfa_profile --workloads fill0.1 --methods tlx,triton,varlen [--bwd-config F=V]

For each workload, method and pass it prints:

- `wall ms`: median time per call with calls back to back (`triton.testing.do_bench`), what the
  benchmark tables report;
- `host ms`: time for the call to return without synchronising, averaged over calls issued back to
  back: validation, scheduling, descriptor set-up and launches, everything the CPU does;
- `device ms`: the sum of the call's kernels' device time (torch.profiler), and each kernel's share.

`host ms` close to or above `device ms` means the call is launch-bound: the GPU idles between
calls, and a faster kernel would not show in `wall ms` (measured on the H200 for the fill-0.1 PMA
rows: docs/kernels/tlx_hopper.md). `--host-profile` then prints, per row, the Python functions that
take the host time (cProfile, by own time), to aim a launch-path change.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.jfa import METHODS, PASSES, _select_workloads, _step
from benchmarks.jfa_workloads import Lengths, make_inputs


def host_ms(step: Callable[[], None], calls: int) -> float:
    """Mean host time per call, calls issued back to back (few enough not to fill the launch queue)."""
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return 1e3 * statistics.median(times)


def kernel_ms(step: Callable[[], None], calls: int) -> dict[str, float]:
    """Device ms per call of every kernel the step launches, by kernel name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.self_device_time_total > 0:
            per_kernel[event.key] += event.self_device_time_total / 1e3 / calls
    return dict(per_kernel)


def runtime_calls(step: Callable[[], None], calls: int) -> str:
    """The CUDA runtime/driver API calls a step makes (torch.profiler's CPU side): count and host ms
    per call, largest first. A synchronising call (cudaStreamSynchronize, cudaMemcpy to the host,
    cudaFree) inside an attention call makes its host time wait for the GPU; one
    cudaDeviceSynchronize per `calls` steps is the loop's own."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    rows = [(event.cpu_time_total / 1e3 / calls, event.count / calls, event.key) for event in prof.key_averages()
            if event.key.startswith("cu") and event.device_type == torch.autograd.DeviceType.CPU]
    return "\n".join(f"    {ms:7.3f} ms, {count:5.1f} calls  {key}" for ms, count, key in sorted(rows, reverse=True))


def host_profile(step: Callable[[], None], calls: int, top: int = 12) -> str:
    """The `top` functions by own host time, then by cumulative time, over `calls` calls (cProfile)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        step()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, nc, own, cum, callers)
    lines = []
    for title, column in (("by own time", 2), ("by cumulative time", 3)):
        lines.append(f"    -- {title}")
        for (file, line, name), (_, ncalls, own, cum, _) in sorted(stats.items(), key=lambda item: -item[1][column])[:top]:
            lines.append(f"    {1e3 * own / calls:7.3f} ms own, {1e3 * cum / calls:7.3f} ms cum, {ncalls / calls:5.1f} calls"
                         f"  {Path(file).name}:{line} {name}")
    return "\n".join(lines)


def profile(method: str, inputs, passes: str, calls: int, with_host_profile: bool = False,
            top_kernels: int = 4, with_runtime_calls: bool = False) -> str:
    import triton.testing

    for x in inputs.leaves():
        x.requires_grad_(passes == "fwd+bwd")
        x.grad = None
    run = METHODS[method](inputs)
    with torch.no_grad():
        output = run()  # compile and autotune first
    call = _step(run, passes, torch.randn_like(output) if passes == "fwd+bwd" else None)

    def step() -> None:  # fresh input gradients per call: a backward must not add into the last one's
        for x in inputs.leaves():
            x.grad = None
        call()

    step()
    wall = triton.testing.do_bench(step, warmup=25, rep=100, return_mode="median")
    host = host_ms(step, calls)
    kernels = kernel_ms(step, calls)
    device = sum(kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:top_kernels]
    shares = ", ".join(f"{name[:48]} {ms:.3f}" for name, ms in top)
    row = f"| {method} | {passes} | {wall:.3f} | {host:.3f} | {device:.3f} | {len(kernels)} | {shares} |"
    if with_runtime_calls:
        row += "\n" + runtime_calls(step, calls)
    return row + ("\n" + host_profile(step, calls) if with_host_profile else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", help="substrings of workload names (default: the fill-0.1 rows)")
    parser.add_argument("--methods", default="tlx,triton,varlen")
    parser.add_argument("--passes", default=",".join(PASSES))
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host-profile", action="store_true", help="also print each row's top host functions")
    parser.add_argument("--runtime-calls", action="store_true",
                        help="also print each row's CUDA runtime/driver API calls (syncs, mallocs, launches)")
    parser.add_argument("--top-kernels", type=int, default=4, help="kernels listed per row, largest first")
    parser.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                        help="tlx: FwdConfig fields changed in every forward (an A/B's candidate)")
    parser.add_argument("--bwd-config", default="", metavar="FIELD=VALUE[,...]",
                        help="tlx: BwdConfig fields changed in every backward")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.jfa_profile needs a CUDA GPU")
    if args.fwd_config or args.bwd_config:
        from benchmarks.tlx_hopper_bench import override_configs

        override_configs(args.fwd_config, args.bwd_config)
    print("| method | pass | wall ms | host ms | device ms | kernels | largest kernels (device ms per call) |")
    print("|---|---|--:|--:|--:|--:|---|")
    for workload in _select_workloads(args.workloads or ["fill0.1"], quick=False):
        print(f"| **{workload.name}** | | | | | | |", flush=True)
        inputs = make_inputs(workload, Lengths.sample(workload, args.seed), "cuda", args.seed)
        for method in args.methods.split(","):
            for passes in args.passes.split(","):
                try:
                    print(profile(method, inputs, passes, args.calls, args.host_profile, args.top_kernels,
                                          args.runtime_calls), flush=True)
                except Exception as error:  # a failing method is a row, not the end of the run
                    print(f"| {method} | {passes} | {type(error).__name__}: {str(error).splitlines()[0][:80]} | | | | |")


if __name__ == "__main__":
    main()
