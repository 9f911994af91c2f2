"""Device time of building the TLX persistent schedules (issue 5), per pass of each benchmark shape.

    python -m benchmarks.schedule_bench [--out results.jsonl] [--warps N[,N...]]

For every shape of `tlx_hopper_bench` (once per shape, fill 0.5 lengths), runs one forward+backward
of `kernels.tlx_hopper`, records the schedules its launchers ask for (the forward's, then the
backward's: dK/dV (kv-stationary), the split-role pass's or the dq pass's; the arguments of their
`cached_schedule` calls), and times `tlx_schedule.build_schedule` on each with
the single-program Triton builder (its counting sort ranking `schedule_fields` classes per pass:
"triton"; one class per pass, as before session 35: "one_class") and with the torch-ops one:
device ms from a CUDA graph replay
(`triton.testing.do_bench_cudagraph`: no launch overhead) and ms of back-to-back eager calls
(`do_bench`: launch-bound when the device part is short). Outside the model's front door nothing is
cached, so `tlx_hopper_bench` pays every build on every call. --warps also times the default
build with each of these warp counts ("w<N>" columns, device ms; printed after the table).
"""

from __future__ import annotations

import argparse
import json

import torch
import triton

from benchmarks.tlx_hopper_bench import build, shapes, write_rows
from kernels import tlx_hopper, tlx_schedule
from kernels.common import JFAParams


def launcher_schedules(sh: dict) -> list[tuple[str, tuple, dict]]:
    """(pass, args, kwargs) of every `cached_schedule` call of one tlx forward+backward on `sh`."""
    x = build(dict(sh, fill=0.5))
    q, k, v, q_off, k_off = x["q"], x["k"], x["v"], x["q_off"], x["k_off"]
    params = JFAParams(max_seq_len_q=sh["q"], max_seq_len_kv=sh["max_kv"],
                       sm_scale=q.shape[-1] ** -0.5, broadcast_q=sh["kind"] == "bcast")
    calls = []
    real = tlx_hopper.cached_schedule

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    tlx_hopper.cached_schedule = record  # the launchers' module global
    try:
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
        n_fwd = len(calls)
        tlx_hopper.backward(torch.randn_like(out), q, k, v, out, lse, q_off, k_off, params)
    finally:
        tlx_hopper.cached_schedule = real
    if n_fwd != 1 or len(calls) < 2:
        raise RuntimeError(f"{sh['name']}: expected one forward schedule and backward ones, saw "
                           f"{n_fwd} and {len(calls) - n_fwd}")
    return [("fwd" if i == 0 else "dkdv" if kwargs.get("kv_stationary") else "bwd", args, kwargs)
            for i, (args, kwargs) in enumerate(calls)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--warps", default="", metavar="N[,N...]",
                    help="also time the default build with these warp counts")
    args = ap.parse_args()
    warps = [int(w) for w in args.warps.split(",") if w]
    rows = []
    unique = {(sh["kind"], sh["B"], sh["max_kv"], sh["H"], sh["q"]): sh for sh in shapes()}
    for sh in unique.values():  # the fills share their schedules' sizes
        for name, sched_args, sched_kwargs in launcher_schedules(sh):
            B, num_mb = sched_args[2], sched_args[4]
            row = dict(shape=sh["name"].rsplit(" fill", 1)[0], pass_=name, entries=B * num_mb)
            for builder, how in (("triton", {}), ("one_class", dict(fields=1)),
                                 ("torch", dict(use_torch=True)),
                                 *((f"w{w}", dict(num_warps=w)) for w in warps)):
                fn = lambda: tlx_schedule.build_schedule(*sched_args, **sched_kwargs, **how)
                fn()
                torch.cuda.synchronize()
                row[f"{builder}_device_ms"] = triton.testing.do_bench_cudagraph(fn, rep=50)
                row[f"{builder}_eager_ms"] = triton.testing.do_bench(fn, warmup=10, rep=50)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        write_rows(args.out, rows)
    print(f"\n{'shape':22s} {'pass':5s} {'entries':>7s} {'triton dev':>10s} {'1-class dev':>11s} "
          f"{'torch dev':>10s} {'triton eager':>12s} {'1-class eager':>13s} {'torch eager':>11s}")
    for r in rows:
        print(f"{r['shape']:22s} {r['pass_']:5s} {r['entries']:7d} {r['triton_device_ms']:10.4f} "
              f"{r['one_class_device_ms']:11.4f} {r['torch_device_ms']:10.4f} "
              f"{r['triton_eager_ms']:12.4f} {r['one_class_eager_ms']:13.4f} {r['torch_eager_ms']:11.4f}")
    if warps:
        print(f"\n{'shape':22s} {'pass':5s} {'entries':>7s} "
              + " ".join(f"{f'w{w} dev':>9s}" for w in warps))
        for r in rows:
            print(f"{r['shape']:22s} {r['pass_']:5s} {r['entries']:7d} "
                  + " ".join(f"{r[f'w{w}_device_ms']:9.4f}" for w in warps))


if __name__ == "__main__":
    main()
