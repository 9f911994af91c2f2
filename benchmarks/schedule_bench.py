"""Device time of building the TLX persistent schedules (issue 5), per pass of each benchmark shape.

    python -m benchmarks.schedule_bench [--out results.jsonl]

For every shape of `tlx_hopper_bench` (once per shape, fill 0.5 lengths) and each schedule its forward+backward
builds (forward, dK/dV, dQ; configurations as `kernels.tlx_hopper` picks them), times
`tlx_schedule.build_schedule` with the single-program Triton builder and with the torch-ops one:
device ms from a CUDA graph replay (`triton.testing.do_bench_cudagraph`: no launch overhead) and
ms of back-to-back eager calls (`do_bench`: launch-bound when the device part is short). Outside
the model's front door nothing is cached, so `tlx_hopper_bench` pays every build on every call.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton

from benchmarks.tlx_hopper_bench import lengths, shapes
from kernels import tlx_hopper
from kernels.tlx_schedule import build_schedule


def schedule_configs(sh: dict) -> list[tuple[str, tuple, bool]]:
    """(pass, build_schedule's positional configuration after the offsets, kv_stationary)."""
    bcast = sh["kind"] == "bcast"
    q_len = sh["q"] if bcast else 0
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    fwd = tlx_hopper.fwd_config(128, bcast, q_len)
    bwd = tlx_hopper.bwd_config(128, bcast, q_len, sh["H"], n_sm)
    max_q = sh["q"]
    cdiv = triton.cdiv
    return [
        ("fwd", (sh["B"], q_len, cdiv(max_q, fwd.block_m), None, False, bcast, fwd.block_m,
                 fwd.block_n), False),
        ("dkdv", (sh["B"], q_len, cdiv(sh["max_kv"], tlx_hopper.DKDV_BLOCK_N), None, False, bcast,
                  tlx_hopper.DKDV_BLOCK_N, tlx_hopper.DKDV_STEP), True),
        ("dq", (sh["B"], q_len, cdiv(max_q, bwd.dq_block_m), None, False, bcast, bwd.dq_block_m,
                bwd.dq_block_n), False),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    unique = {(sh["kind"], sh["B"], sh["max_kv"], sh["H"], sh["q"]): sh for sh in shapes()}
    for sh in unique.values():  # the fills share their schedules' sizes
        g = torch.Generator().manual_seed(0)
        kl = lengths(sh["B"], sh["max_kv"], 0.5, g)
        k_off = torch.cat([torch.zeros(1, dtype=torch.int64), kl.cumsum(0)]).cuda().to(torch.int32)
        q_off = None if sh["kind"] == "bcast" else k_off
        for name, config, kv_stationary in schedule_configs(sh):
            row = dict(shape=sh["name"].rsplit(" fill", 1)[0], pass_=name, entries=config[0] * config[2])
            for builder, use_torch in (("triton", False), ("torch", True)):
                fn = lambda: build_schedule(q_off, k_off, *config, kv_stationary=kv_stationary,
                                            use_torch=use_torch)
                fn()
                torch.cuda.synchronize()
                row[f"{builder}_device_ms"] = triton.testing.do_bench_cudagraph(fn, rep=50)
                row[f"{builder}_eager_ms"] = triton.testing.do_bench(fn, warmup=10, rep=50)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"\n{'shape':22s} {'pass':5s} {'entries':>7s} {'triton dev':>10s} {'torch dev':>10s} "
          f"{'triton eager':>12s} {'torch eager':>11s}")
    for r in rows:
        print(f"{r['shape']:22s} {r['pass_']:5s} {r['entries']:7d} {r['triton_device_ms']:10.4f} "
              f"{r['torch_device_ms']:10.4f} {r['triton_eager_ms']:12.4f} {r['torch_eager_ms']:11.4f}")


if __name__ == "__main__":
    main()
