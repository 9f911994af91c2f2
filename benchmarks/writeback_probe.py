"""How much of a forward's steady-state time is the write-back of the previous call's output.

    python -m benchmarks.writeback_probe [--only SUBSTR[,...]] [--calls N]
        [--fwd-config FIELD=VALUE[,...]]

Nsight Compute times one launch after flushing L2, so the O rows that launch writes and leaves
dirty in L2 (up to its 50 MB) reach HBM after the kernel ends and outside its time; the bench's
calls run back to back, and each pays for the previous call's dirty lines being evicted while it
streams its own K/V. For each `tlx_hopper_bench` shape (seed 0) this times the TLX forward (its
schedule build included) with CUDA events, N calls each:

- `back-to-back`: the calls as the bench runs them, after the bench's settle (the mean over the N
  calls enqueued by Python: host-limited where a call's host time exceeds its device time);
- `after clean L2`: each call after reading a buffer of twice the L2 (the dirty lines written back
  and L2 filled with clean lines), as an isolated launch sees the GPU;
- `after dirty L2`: each call after writing that buffer instead (L2 full of dirty lines, and the
  write-back the call pays is the flush's, not its own).

If `back-to-back` sits near `after dirty L2` and above `after clean L2`, the gap between Nsight
Compute's kernel time and the bench's is the deferred write-back, not the kernel's own pace.
`--fwd-config` times the forward with those FwdConfig fields replaced (as the bench's
`--fwd-config`): a candidate meant to change what the call pays for L2's state (run 44: the L2
eviction policies, measured and removed).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.tlx_hopper_bench import (build, override_configs, selected_shapes, settle,
                                         shape_params)
from kernels import tlx_hopper


# GPU cycles (~1 ms) spun between a call's preparation and its start event: the host enqueues the
# call meanwhile, so the time is the call's device time and not the host's launch path (~0.2 ms
# for a PMA forward); the spin touches no memory, so L2 stays as the preparation left it
HOST_SLACK_CYCLES = 2_000_000


def _events_ms(fn, before, calls: int) -> float:
    """Median ms of fn over `calls` calls, each after `before()` (timed on the device alone)."""
    times = []
    for _ in range(calls):
        before()
        torch.cuda._sleep(HOST_SLACK_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def read_through(scratch: torch.Tensor, sink: torch.Tensor) -> None:
    """Read every element of scratch (L2's dirty lines written back, clean ones left)."""
    torch.sum(scratch, dim=0, keepdim=True, out=sink)


def write_through(scratch: torch.Tensor) -> None:
    """Write every element of scratch (L2 left full of dirty lines)."""
    scratch.fill_(1.0)


def probe(sh: dict, calls: int) -> dict:
    x = build(sh)
    params = shape_params(sh, x)
    fwd = lambda: tlx_hopper.forward(x["q"], x["k"], x["v"], x["q_off"], x["k_off"], params)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    scratch = torch.empty(2 * l2 // 4, device="cuda", dtype=torch.float32)
    sink = torch.empty(1, device="cuda", dtype=torch.float32)
    settle(fwd)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fwd()
    end.record()
    end.synchronize()
    back_to_back = start.elapsed_time(end) / calls
    clean = _events_ms(fwd, lambda: read_through(scratch, sink), calls)
    dirty = _events_ms(fwd, lambda: write_through(scratch), calls)
    return {"name": sh["name"], "back_to_back_ms": back_to_back, "after_clean_l2_ms": clean,
            "after_dirty_l2_ms": dirty}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="PMA", help="comma-separated substrings of shape names")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="time the forward with these FwdConfig fields replaced")
    args = ap.parse_args()
    override_configs(args.fwd_config, "")
    print("| shape | back-to-back ms | after clean L2 ms | after dirty L2 ms |")
    print("|---|--:|--:|--:|")
    for sh in selected_shapes(args.only):
        r = probe(sh, args.calls)
        print(f"| {r['name']} | {r['back_to_back_ms']:.4f} | {r['after_clean_l2_ms']:.4f} | "
              f"{r['after_dirty_l2_ms']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
