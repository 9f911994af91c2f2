"""Where the tlx backend's host time per call goes, launch by launch (GPU, fbtriton).

    python -m benchmarks.tlx_launch_probe [--calls 200] [--q-len 128] [--batch 768] [--heads 4]

The PMA fill-0.1 rows are host-bound: the device finishes a forward in ~0.12 ms while Python
issues it. This records every Triton launch of one forward+backward and times, per launch, host
microseconds of:
- `jit`: Triton's own launch (`kernel[grid](...)`: binding, specialisation key, cache lookup,
  launcher);
- `tlx_launch`: the backend's launch (`kernels.tlx_launch.launch`: its key, then the launcher);
- `launcher alone`: the compiled kernel's launcher with the same arguments (`CompiledKernel.run`);
plus the whole `tlx_hopper.forward` / `backward` calls, one host TMA descriptor and the calls'
other host steps, so the gap between the calls and the sum of their launches is visible
(`--cprofile`: their top Python functions). Medians of --calls, the GPU synced
every 16 calls so the launch queue never fills.

--cpu-proxy (no GPU; fbtriton for the kernels' signatures) times the same forward and backward
on CPU tensors with everything of the host path but Triton's launcher itself: the device
queries answer as an H200 would (sm_90, 132 SMs, 50 MiB L2) and each launch stops after
`tlx_launch`'s key and kernel lookup. Python's share of the host time, measurable on a
development machine; the GPU host's CPU is slower, and the launcher (~8-14 us a launch there,
run 41) comes on top.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_us(fn, calls: int, sync=None) -> float:
    """Median host µs of fn over calls, `sync` (default: the GPU's) before, every 16 calls and
    after, so the launch queue never fills."""
    if sync is None:
        import torch

        sync = torch.cuda.synchronize
    times = []
    sync()
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if i % 16 == 15:
            sync()
    sync()
    return 1e6 * statistics.median(times)


def cpu_proxy(args) -> int:
    """--cpu-proxy: the forward's and backward's host path up to the launcher, on the CPU."""
    from unittest import mock

    import torch

    from benchmarks.tlx_hopper_bench import lengths
    from kernels import tlx_hopper, tlx_launch, tlx_schedule
    from kernels.common import JFAParams

    def key_only(fn, grid, *a, **kw):
        key, _ = tlx_launch.launch_key(fn, 0, a, kw)
        tlx_launch._KERNELS.get(key)

    g = torch.Generator().manual_seed(0)
    lens = lengths(args.batch, args.max_kv, args.fill, g)
    k_off = torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(torch.int32)
    q = torch.randn(args.q_len, args.heads, 128, generator=g).to(torch.bfloat16)
    k = torch.randn(int(lens.sum()), args.heads, 128, generator=g).to(torch.bfloat16)
    v, do = torch.randn_like(k), torch.randn(args.batch * args.q_len, args.heads, 128).to(torch.bfloat16)
    params = JFAParams(max_seq_len_q=args.q_len, max_seq_len_kv=args.max_kv, sm_scale=None,
                       broadcast_q=True)
    with mock.patch.multiple(tlx_hopper, supports=lambda *a: None, _num_sms=lambda i: 132,
                             _l2_bytes=lambda i: 50 * 2**20, launch=key_only), \
            mock.patch.object(tlx_schedule, "launch", key_only):
        out, lse = tlx_hopper.forward(q, k, v, None, k_off, params)
        calls = {
            "forward": lambda: tlx_hopper.forward(q, k, v, None, k_off, params),
            "backward": lambda: tlx_hopper.backward(do, q, k, v, out, lse, None, k_off, params),
        }
        print(f"CPU proxy, PMA q{args.q_len} B{args.batch} H{args.heads} fill {args.fill}: host us "
              f"before the launcher, median of {args.calls} calls (best of 3 rounds)")
        for name, fn in calls.items():
            for _ in range(args.calls // 10 + 1):
                fn()
            best = min(_median_us(fn, args.calls, sync=lambda: None) for _ in range(3))
            print(f"tlx_hopper.{name}: {best:.1f} us")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--q-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=768)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--max-kv", type=int, default=1024)
    parser.add_argument("--fill", type=float, default=0.1)
    parser.add_argument("--cprofile", action="store_true", help="also the calls' top Python functions")
    parser.add_argument("--cpu-proxy", action="store_true",
                        help="no GPU: the host path up to Triton's launcher, on the CPU (needs fbtriton)")
    args = parser.parse_args(argv)
    if args.cpu_proxy:
        return cpu_proxy(args)
    import torch
    from triton.runtime import driver

    from benchmarks.tlx_hopper_bench import lengths
    from kernels import tlx_hopper, tlx_launch, tlx_schedule
    from kernels.common import JFAParams

    if not torch.cuda.is_available():
        raise SystemExit("tlx_launch_probe needs a CUDA device (and fbtriton)")
    g = torch.Generator().manual_seed(0)
    lens = lengths(args.batch, args.max_kv, args.fill, g)
    k_off = torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to("cuda", torch.int32)
    q = torch.randn(args.q_len, args.heads, 128, generator=g).to("cuda", torch.bfloat16)
    k = torch.randn(int(lens.sum()), args.heads, 128, generator=g).to("cuda", torch.bfloat16)
    v = torch.randn_like(k)
    do = torch.randn(args.batch * args.q_len, args.heads, 128, generator=g).to("cuda", torch.bfloat16)
    params = JFAParams(max_seq_len_q=args.q_len, max_seq_len_kv=args.max_kv, sm_scale=None, causal=False,
                       window_size=None, broadcast_q=True, deterministic=False)
    out, lse = tlx_hopper.forward(q, k, v, None, k_off, params)

    def forward():
        tlx_hopper.forward(q, k, v, None, k_off, params)

    def backward():
        tlx_hopper.backward(do, q, k, v, out, lse, None, k_off, params)

    forward()
    backward()  # compiles everything once
    torch.cuda.synchronize()

    launches = []

    def recording_launch(fn, grid, *a, **kw):
        launches.append((fn, grid, a, kw))
        tlx_launch.launch(fn, grid, *a, **kw)

    for module in (tlx_hopper, tlx_schedule):
        module.launch = recording_launch
    try:
        forward()
        backward()
    finally:
        for module in (tlx_hopper, tlx_schedule):
            module.launch = tlx_launch.launch
    torch.cuda.synchronize()

    print(f"shape: PMA q{args.q_len} B{args.batch} H{args.heads} max_kv {args.max_kv} fill {args.fill}, "
          f"{int(lens.sum())} keys; median host us over {args.calls} calls")
    print("| launch | jit us | tlx_launch us | launcher alone us |")
    print("|---|--:|--:|--:|")
    totals = [0.0, 0.0, 0.0]
    for fn, grid, a, kw in launches:
        key, values = tlx_launch.launch_key(fn, driver.active.get_current_device(), a, kw)
        kernel = tlx_launch._KERNELS[key]
        grid3 = tuple(grid) + (1,) * (3 - len(grid))

        def jit_launch(fn=fn, a=a, kw=kw, grid=grid):
            fn[grid](*a, **kw)

        def fast_launch(fn=fn, a=a, kw=kw, grid=grid):
            tlx_launch.launch(fn, grid, *a, **kw)

        def launcher_alone(kernel=kernel, values=values, grid3=grid3):
            stream = driver.active.get_current_stream(driver.active.get_current_device())
            kernel.run(*grid3, stream, kernel.function, kernel.packed_metadata, None, None, None, *values)

        times = [_median_us(f, args.calls) for f in (jit_launch, fast_launch, launcher_alone)]
        totals = [t + u for t, u in zip(totals, times)]
        print(f"| {fn.__name__} ({len(values)} args) | " + " | ".join(f"{t:.1f}" for t in times) + " |")
    print("| sum of launches | " + " | ".join(f"{t:.1f}" for t in totals) + " |")
    tlx_launch.DIRECT = False
    print(f"JIT launches: tlx_hopper.forward {_median_us(forward, args.calls):.1f} us; "
          f"tlx_hopper.backward {_median_us(backward, args.calls):.1f} us")
    tlx_launch.DIRECT = True
    print(f"tlx_launch: tlx_hopper.forward {_median_us(forward, args.calls):.1f} us; "
          f"tlx_hopper.backward {_median_us(backward, args.calls):.1f} us")
    print(f"one host TMA descriptor (K, box 64 rows): "
          f"{_median_us(lambda: tlx_hopper._descriptor(k, k.shape[0], 64), args.calls):.1f} us")
    pieces = {
        "supports": lambda: tlx_hopper.supports(q, k, v, params),
        "torch.empty (out)": lambda: torch.empty_like(do),
        "call_fwd_config": lambda: tlx_hopper.call_fwd_config(q, k, k_off, params),
        "torch.cuda.get_device_capability": lambda: torch.cuda.get_device_capability(q.device),
    }
    print("; ".join(f"{name}: {_median_us(fn, args.calls):.1f} us" for name, fn in pieces.items()))
    if args.cprofile:
        import cProfile
        import io
        import pstats

        for name, fn in (("forward", forward), ("backward", backward)):
            prof = cProfile.Profile()
            prof.enable()
            for i in range(args.calls):
                fn()
                if i % 16 == 15:
                    torch.cuda.synchronize()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            print(f"\n## cProfile of {args.calls} {name} calls, by own time\n```\n{text.getvalue()}```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
