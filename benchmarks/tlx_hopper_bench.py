"""Time the TLX Hopper JFA kernels against varlen_attn and the fbtriton TLX tutorial (H200).

    python -m benchmarks.tlx_hopper_bench [--out results.json] [--bwd] [--only SUBSTR[,...]]
        [--ab FIELD=VALUE[,FIELD=VALUE...]] [--ab-bwd FIELD=VALUE[,...]] [--graph]
        [--baseline-rounds N] [--ab-schedule-fields N] [--ab-schedule-warps N]

--ab also times, in the same process and on the same inputs, the forward with those `FwdConfig`
fields changed from `fwd_config`'s choice (e.g. `--ab num_buf_kv=5`; `--ab tma_store_o=False` is run
10's A/B), as tlx_fwd_ab_ms, and with --bwd forward+backward with that forward as tlx_fwdbwd_ab_ms;
ab_fwd_identical says whether both forwards gave bit-identical O and LSE. (Runs 4-10 used a
hard-coded `--ab`; their records name the columns tlx_fwd_prev_cfg_ms / tlx_fwdbwd_prev_cfg_ms.)
--ab-bwd likewise changes `BwdConfig` fields of `bwd_config`'s choice (with --bwd): forward+backward
as tlx_fwdbwd_abbwd_ms, and ab_bwd_grad_rel, the largest relative difference (norm) of dq, dk, dv
against the default configuration's (a different tiling sums in another order: ~1e-3 is bf16
rounding, not an error). Every A/B times the default and the candidate in ABBA order over
--ab-rounds rounds (2): the *_ab_ms / *_abbwd_ms columns are the candidate's medians, *_base_ms the
default's over the same rounds, *_ratio the median of the rounds' candidate/default ratios. Both
sides pass their configuration to the launcher (from run 24 on; before, only the candidate did,
skipping the default side's choice of it: a few us of host time, visible on the host-bound fill-0.1
rows).

--ab-schedule-fields N likewise times the tlx forward (and forward+backward with --bwd) with its
schedules built ranking at most N classes per counting-sort pass against the default build
(`tlx_schedule.schedule_fields` classes): tlx_fwd_absched_ms / tlx_fwdbwd_absched_ms, their
*_base_ms and *_ratio (N = 1 is the build before session 35: a ratio above 1, the default faster).
--ab-schedule-warps N: the candidate's builds run with N warps (alone or with --ab-schedule-fields).
--ab-schedule-cached times the tlx forward with its schedule built once and found in the cache
(what a model's later layers of one batch get: `tlx_schedule.cached_schedule`) against building it
every call (the plain call, as the tables time it; the cached side inside the front door's
versioned-offsets promise): tlx_fwd_abcached_ms, *_base_ms, *_ratio (what the build costs a call).

--baseline-rounds N (N >= 2) times the tlx call and each baseline (varlen forward, forward+backward,
the tutorial) in ABBA order over N rounds instead of once each: *_ms are the medians over the
rounds, varlen_fwd_ms_per_tlx / varlen_fwdbwd_ms_per_tlx / tutorial_fwd_ms_per_tlx the medians of
the rounds' baseline/tlx ratios, and tlx_fwd_vs_tutorial_ms the tlx forward's median over the
tutorial's rounds.

--graph adds the tlx forward (and forward+backward) and varlen's forward replayed from a CUDA
graph (*_graph_ms): the device time with the gaps between kernels but without the host's launch
path, which do_bench's window includes whenever the host issues a call more slowly than the GPU
runs the L2 flush before it. A diagnostic: the issue's targets are eager calls.

Each row also records, per timing in call order, the cudaMalloc calls inside its window
(`timed_mallocs`) and the host µs per call of the timed function ([10th percentile, median],
`timed_host_us`), each timing's median (`timed_ms`), the L2 flush's device µs (`flush_us`) and per
timing its median µs less the host's median µs per call (`timed_host_margin_us`): a margin below
zero marks a host-bound sample, one that timed the host rather than the device (the summary
table's `margin` column: the row's smallest). Run 52 (H200, PMA q128 fill 0.1 forward): at host
medians of 70-84 µs per call the forward timed 81.8-86.7 µs; in phases where the host took 84-143
µs per call it timed 83-138 µs, 0-48 µs under the host's median (most 5-17): do_bench's window
followed the host. Runs 44-51's `timed_host_slack_us` (flush + call - host) read 48-78 µs in
those samples and so did not flag them.

Every timed call first runs back to back for --settle-ms (300) ms, so tlx, varlen and the tutorial
are all timed at the clocks of a sustained load (the H200 holds its 700 W limit by lowering the SM
clock; see `settle`). --settle-ms 0 is runs 1-16's method.

Shapes are the issue's (bf16, D=128): PMA B=1024 max_kv=1000 H=3 q_len=192 and PMA B=768
max_kv=1024 H=4 q_len=128 at fill 0.1/0.5/0.9; jagged self-attention B=768 max=1024 H=4 at fill
0.5/1.0; dense B=768 H=4 N=1024 and B=4 H=32 N=4096 (against the tutorial
`hopper_fa_ws_pipelined_pingpong_persistent`). fill = mean length / max, lengths uniform in
[(2f-1)max, max] for f >= 0.5, else in [1, 2f max]. Times are medians of triton.testing.do_bench,
end to end per call: the tlx forward includes building its schedule; varlen_attn gets Q expanded
per batch ahead of time (not timed: `varlen_*`, stricter than the issue) and, on broadcast rows,
also as issue 5's baseline was measured, expanded inside the call with its gradient summed back
(`issue_varlen_*`, each paired with its own tlx timing `tlx_*_vs_issue_ms`); its forward+backward
resets the inputs' .grad before each call (until run 13 they accumulated: an in-place add over
dq, dk and dv inside every timed call, 0.8 ms of the 9.1 ms self fill-0.5 baseline). FLOPs: fwd
4*H*D*sum(visible pairs); fwd+bwd 3.5x that.
Floor = max(FLOPs / 788 TFLOP/s, min bytes / 4.3 TB/s); min bytes reads q (once), k, v and writes
out (+ lse): backward adds reading do, out and writing dq, dk, dv.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import importlib.util
import json
import math
import os
import statistics
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.jfa_baselines import expand_query  # noqa: E402  (the path above)

AB_OVERRIDES: dict = {}  # --ab: FwdConfig fields of the alternative forward
AB_BWD_OVERRIDES: dict = {}  # --ab-bwd: BwdConfig fields of the alternative backward
AB_SCHEDULE: dict = {}  # --ab-schedule-fields / -warps: the alternative's builds (fields, num_warps)
AB_CACHED = False  # --ab-schedule-cached: the forward with its schedule cached against built per call
PEAK_FLOPS = 788e12
PEAK_BYTES = 4.3e12


def lengths(B, max_len, fill, g):
    if fill >= 0.5:
        lo = int(round((2 * fill - 1) * max_len))
        return torch.randint(max(lo, 1), max_len + 1, (B,), generator=g)
    return torch.randint(1, max(int(round(2 * fill * max_len)), 1) + 1, (B,), generator=g)


def shapes():
    S = []
    for f in (0.1, 0.5, 0.9):
        S.append(dict(name=f"PMA q192 fill{f}", kind="bcast", B=1024, max_kv=1000, H=3, q=192, fill=f))
    for f in (0.1, 0.5, 0.9):
        S.append(dict(name=f"PMA q128 fill{f}", kind="bcast", B=768, max_kv=1024, H=4, q=128, fill=f))
    for f in (0.5, 1.0):
        S.append(dict(name=f"self B768 fill{f}", kind="self", B=768, max_kv=1024, H=4, q=1024, fill=f))
    S.append(dict(name="dense B4 H32 N4096", kind="self", B=4, max_kv=4096, H=32, q=4096, fill=1.0))
    return S


def selected_shapes(only: str) -> list[dict]:
    """The shapes whose name contains one of the comma-separated substrings of `only` (all if
    empty)."""
    return [sh for sh in shapes() if any(part in sh["name"] for part in only.split(","))]


def build(sh, dtype=torch.bfloat16, d=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    return build_from_lengths(sh, lengths(sh["B"], sh["max_kv"], sh["fill"], g), dtype, d, seed)


def build_from_lengths(sh, kl, dtype=torch.bfloat16, d=128, seed=0):
    """Shape sh's inputs (on the GPU) for the key lengths kl (int64, one per batch element)."""
    k_off = torch.cat([torch.zeros(1, dtype=torch.int64), kl.cumsum(0)]).cuda().to(torch.int32)
    tk = int(kl.sum())
    H = sh["H"]
    gd = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *shape: torch.randn(*shape, generator=gd, device="cuda", dtype=dtype)
    k = rnd(tk, H, d)
    v = rnd(tk, H, d)
    if sh["kind"] == "bcast":
        q = rnd(sh["q"], H, d)
        q_off = None
        pairs = sh["q"] * int(kl.sum())
        total_out = sh["B"] * sh["q"]
        q_bytes = q.numel() * 2
    else:
        q = rnd(tk, H, d)
        q_off = k_off
        pairs = int((kl.double() ** 2).sum())
        total_out = tk
        q_bytes = q.numel() * 2
    flops = 4 * H * d * pairs
    kv_bytes = 2 * k.numel() * 2
    out_bytes = total_out * H * d * 2 + total_out * H * 4
    fwd_bytes = q_bytes + kv_bytes + out_bytes
    bwd_bytes = fwd_bytes + 2 * total_out * H * d * 2 + q_bytes + kv_bytes  # + do, out; dq dk dv
    return dict(q=q, k=k, v=v, q_off=q_off, k_off=k_off, kl=kl, flops=flops, fwd_bytes=fwd_bytes,
                bwd_bytes=bwd_bytes, total_out=total_out)


def shape_params(sh, x):
    """The JFAParams of shape sh's call on its inputs x (`build`): scale 1/sqrt(head dim)."""
    from kernels.common import JFAParams

    return JFAParams(max_seq_len_q=sh["q"], max_seq_len_kv=sh["max_kv"],
                     sm_scale=1 / math.sqrt(x["q"].shape[-1]), broadcast_q=sh["kind"] == "bcast")


# ms each measurement first runs its call back to back (`--settle-ms`), so every method is timed in
# the power state of a sustained load. The H200 holds 700 W by lowering its SM clock (1,980 MHz
# idle-to-burst, 1,500-1,800 MHz sustained on the self/dense rows, run 17); do_bench's 25 ms
# warm-up is too short for that, so a call timed right after an idle gap (a compile) ran at
# burst clocks: runs 1-16 took the first sample of every device call 5-9 % faster on self fill 1.0.
SETTLE_MS = 300.0


def settle(fn, grads=None, ms: float | None = None) -> None:
    """Run fn back to back for ms (default SETTLE_MS) of wall time, then wait for the GPU."""
    ms = SETTLE_MS if ms is None else ms
    end, calls = time.perf_counter() + ms / 1e3, 0
    while time.perf_counter() < end:
        for g in grads or ():
            g.grad = None
        fn()
        calls += 1
        if calls % 4 == 0:
            torch.cuda.synchronize()  # at most 4 calls queued: the loop's wall time is GPU time
    torch.cuda.synchronize()


# cudaMalloc calls inside each `bench` window of the current row, in call order (the caching
# allocator frees and re-mallocs when no cached block fits; each is a device sync in the timing)
TIMED_MALLOCS: list[int] = []
# host µs per call of fn inside each `bench`, in call order: [10th percentile, median]. The
# percentile is the host's own cost of a call; the median also holds the waits of a launch queue
# that is full (the GPU then bounds the loop). do_bench's window holds the host's time whenever a
# call's host cost exceeds the device's time per iteration (its L2 flush plus the call): the
# fill-0.1 rows' "host-stalled" samples (runs 41-44) are told apart by this record.
TIMED_HOST_US: list[list[float]] = []
# each `bench`'s median ms, in call order (beside TIMED_HOST_US)
TIMED_MS: list[float] = []
@functools.cache
def flush_us() -> float:
    """Median device µs of do_bench's L2 flush (zeroing its 256 MB; measured once per process),
    the part of a do_bench iteration outside the timed window: the host may spend that long, plus
    the call's device time, per iteration before the window waits for it."""
    from triton.runtime import driver

    cache = driver.active.get_empty_cache_for_benchmark()
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        driver.active.clear_cache(cache)
        end.record()
        torch.cuda.synchronize()
        times.append(1e3 * start.elapsed_time(end))
    return round(statistics.median(times), 1)


def host_margin_us(timed_ms: list[float], timed_host_us: list[list[float]]) -> list[float]:
    """Per timing: its median µs less the host's median µs per call. Below zero the host, not the
    device, set the timing (run 52: the window then followed the host's median call)."""
    return [round(1e3 * ms - host[1], 1) for ms, host in zip(timed_ms, timed_host_us)]


def clear_timed() -> None:
    """Start a row's records of its `bench` timings."""
    TIMED_MALLOCS.clear()
    TIMED_HOST_US.clear()
    TIMED_MS.clear()


def timed_record() -> dict:
    """A row's records of its `bench` timings since `clear_timed`, in call order (the module
    docstring says what each holds)."""
    return dict(timed_mallocs=list(TIMED_MALLOCS), timed_host_us=list(TIMED_HOST_US),
                timed_ms=list(TIMED_MS), flush_us=flush_us(),
                timed_host_margin_us=host_margin_us(TIMED_MS, TIMED_HOST_US))


def host_timed(fn, record: list[float]):
    """fn, appending the host seconds of each call to record."""
    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        record.append(time.perf_counter() - start)
        return result
    return timed


def bench(fn, grads=None):
    """Median ms of fn after `settle`; grads: leaf tensors whose .grad is reset before each call, so
    a backward writes fresh gradients instead of adding into the previous call's (a training
    step's cost)."""
    settle(fn, grads)
    mallocs = torch.cuda.memory_stats().get("num_device_alloc", 0)
    host_s: list[float] = []
    ms = triton.testing.do_bench(host_timed(fn, host_s), warmup=25, rep=100, grad_to_none=grads,
                                 return_mode="median")
    TIMED_MALLOCS.append(torch.cuda.memory_stats().get("num_device_alloc", 0) - mallocs)
    TIMED_HOST_US.append(host_percentiles_us(host_s))
    TIMED_MS.append(ms)
    return ms


def host_percentiles_us(seconds: list[float]) -> list[float]:
    """[10th percentile, median] of host seconds per call, in µs rounded to 0.1."""
    ordered = sorted(seconds)
    return [round(1e6 * ordered[len(ordered) // 10], 1), round(1e6 * statistics.median(ordered), 1)]


# A/B rounds (`--ab-rounds`): round r times the default then the candidate for even r, the reverse
# for odd r (ABBA), so a drift of the GPU's clock over the row cancels instead of favouring the
# second timing (run 17: the same configuration timed twice in a row came out up to 6 % apart)
AB_ROUNDS = 2


def ab_rounds(first_a: float, fn_a, fn_b, grads_b=None, rounds: int | None = None) -> dict[str, float]:
    """Times of the default fn_a (its first, first_a, already taken) and the candidate fn_b in ABBA
    order: the candidate's median ms ("ab"), the default's median over the same rounds ("base")
    and the median of the rounds' candidate/default ratios ("ratio"). grads_b: fn_b's leaf
    tensors (`bench`; the tlx calls, fn_a, write fresh gradients)."""
    rounds = AB_ROUNDS if rounds is None else rounds
    a, b = [first_a], []
    for r in range(rounds):
        if r % 2 == 0:
            if r:
                a.append(bench(fn_a))
            b.append(bench(fn_b, grads_b))
        else:
            b.append(bench(fn_b, grads_b))
            a.append(bench(fn_a))
    return {"ab": statistics.median(b), "base": statistics.median(a),
            "ratio": statistics.median(y / x for x, y in zip(a, b))}


def timed_ab(fn_a, fn_b, rounds: int | None = None) -> tuple[dict[str, float], dict]:
    """One row's A/B: `ab_rounds` of the default fn_a (its first timing taken here) against fn_b,
    and the records of the row's timings (`timed_record`, counted from this call)."""
    clear_timed()
    ab = ab_rounds(bench(fn_a), fn_a, fn_b, rounds=rounds)
    return ab, timed_record()


def write_rows(path: str, rows: list[dict]) -> None:
    """rows as JSONL at path (a tool's --out)."""
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


# Baseline rounds (`--baseline-rounds`): 1 times each baseline once, then the tlx call (runs 1-18);
# N >= 2 times the tlx call and the baseline in ABBA order over N rounds, so the ratio of the two
# is taken at the same clocks: on the self/dense rows the clock moves by up to 9 % within a call
# (run 17) while the goals there are ratios within a few % of 1.5x and 95 %
BASELINE_ROUNDS = 1


def against_baseline(fn_tlx, fn_base, grads_base=None) -> tuple[float, float, float | None]:
    """(tlx ms, baseline ms, median of the rounds' baseline/tlx ratios): with BASELINE_ROUNDS 1 one
    timing each, baseline first, and no ratio; else medians over ABBA rounds."""
    if BASELINE_ROUNDS == 1:
        base = bench(fn_base, grads_base)
        return bench(fn_tlx), base, None
    pair = ab_rounds(bench(fn_tlx), fn_tlx, fn_base, rounds=BASELINE_ROUNDS, grads_b=grads_base)
    return pair["base"], pair["ab"], pair["ratio"]


def put_pair(row: dict, key: str, key_base: str, timed: tuple) -> None:
    """`against_baseline`'s result into the row: the ratio, when taken, as key_base + "_per_tlx"."""
    row[key], row[key_base] = timed[0], timed[1]
    if timed[2] is not None:
        row[key_base + "_per_tlx"] = timed[2]


def put_ab(row: dict, key: str, fn_base, fn_alt) -> None:
    """An A/B of fn_alt against fn_base (`ab_rounds`) into row as KEY_ms (the candidate's median),
    KEY_base_ms and KEY_ratio."""
    ab = ab_rounds(bench(fn_base), fn_base, fn_alt)
    row.update({f"{key}_ms": ab["ab"], f"{key}_base_ms": ab["base"], f"{key}_ratio": ab["ratio"]})


def graph_bench(fn):
    """`bench` of fn replayed from a CUDA graph: its kernels and the gaps between them on the device,
    without the host's launch path (do_bench's timed window otherwise also holds the host time the
    GPU spends waiting for the call's first and next launches)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # compiled and warm before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return bench(graph.replay)


def with_schedule(fn, overrides: dict):
    """fn with every schedule it builds through `build_schedule(**overrides)`, "fields" capped at
    what each build's size allows (an empty dict: the default); both sides of an A/B go through
    here, so both pay the same wrapper."""
    from kernels import tlx_schedule

    real = tlx_schedule.build_schedule

    def changed(*args, **kwargs):
        kwargs.update(overrides)
        if "fields" in overrides:
            block = tlx_schedule.schedule_block(args[2] * args[4])  # B * num_mb entries
            kwargs["fields"] = min(overrides["fields"], tlx_schedule.schedule_fields(block))
        return real(*args, **kwargs)

    def call():
        tlx_schedule.build_schedule = changed if overrides else real
        try:
            return fn()
        finally:
            tlx_schedule.build_schedule = real
    return call


def built_and_cached(fn):
    """(fn as the tables call it, outside the front door's versioned-offsets promise: its schedules
    built on every call; fn inside the promise, finding them cached after its first call) for
    --ab-schedule-cached. Run 47's built side cleared the cache inside the promise before each
    call instead: 0.142-0.192 ms against the plain call's ~0.115 (q128 fill 0.1, H100), so it
    timed what a cleared cache costs, not the build."""
    from kernels.common import versioned_offsets

    def cached():
        with versioned_offsets():
            return fn()
    return fn, cached


def tutorial_module():
    import triton.language.extra.tlx as tlx

    path = os.path.join(os.path.dirname(tlx.__file__), "tutorials",
                        "hopper_fa_ws_pipelined_pingpong_persistent.py")
    spec = importlib.util.spec_from_file_location("tlx_tut_pp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def issue_varlen(varlen_attn, q, k, v, B, cu_q, k_off, max_q, max_k, scale):
    """Issue 5's baseline for a broadcast row, as `benchmarks/jfa_baselines.varlen` runs it (the
    H200 harness run whose numbers the issue quotes: `docs/benchmarks/jfa_h200_part2.csv`): the
    shared query expanded per batch element inside the call, so a forward+backward also sums its
    gradient back over the batch, as a training step on a learned query pays. The `varlen_*`
    columns expand it ahead of time, untimed: a stricter bar than the issue's."""
    return lambda: varlen_attn(expand_query(q, B), k, v, cu_q, k_off, max_q, max_k, scale=scale)


def run_shape(sh, do_bwd, tut, graphs=False):
    from kernels import tlx_hopper
    from torch.nn.attention.varlen import varlen_attn

    clear_timed()
    x = build(sh)
    q, k, v, q_off, k_off, kl = x["q"], x["k"], x["v"], x["q_off"], x["k_off"], x["kl"]
    B, H, d = sh["B"], sh["H"], q.shape[-1]
    scale = 1 / math.sqrt(d)
    bcast = sh["kind"] == "bcast"
    params = shape_params(sh, x)
    row = dict(name=sh["name"], flops=x["flops"],
               floor_fwd_ms=1e3 * max(x["flops"] / PEAK_FLOPS, x["fwd_bytes"] / PEAK_BYTES),
               floor_fwdbwd_ms=1e3 * max(3.5 * x["flops"] / PEAK_FLOPS, x["bwd_bytes"] / PEAK_BYTES))
    # varlen_attn baseline (Q expanded per batch ahead of time)
    if bcast:
        qv = q.repeat(B, 1, 1)
        cu_q = (torch.arange(B + 1, device="cuda", dtype=torch.int32) * sh["q"])
        max_q = sh["q"]
    else:
        qv, cu_q, max_q = q, k_off, int(kl.max())
    max_k = int(kl.max())
    varlen_fwd = lambda: varlen_attn(qv, k, v, cu_q, k_off, max_q, max_k, scale=scale)
    o_ref = varlen_fwd()
    # tlx forward, end to end (schedule build included)
    fwd = lambda: tlx_hopper.forward(q, k, v, q_off, k_off, params)
    out, lse = fwd()
    row["tlx_vs_varlen_rel"] = ((out.float() - o_ref.float()).norm() / o_ref.float().norm()).item()
    put_pair(row, "tlx_fwd_ms", "varlen_fwd_ms", against_baseline(fwd, varlen_fwd))
    if bcast:
        issue_fwd = issue_varlen(varlen_attn, q, k, v, B, cu_q, k_off, max_q, max_k, scale)
        put_pair(row, "tlx_fwd_vs_issue_ms", "issue_varlen_fwd_ms", against_baseline(fwd, issue_fwd))
    if graphs:
        row["tlx_fwd_graph_ms"] = graph_bench(fwd)
        row["varlen_fwd_graph_ms"] = graph_bench(
            lambda: varlen_attn(qv, k, v, cu_q, k_off, max_q, max_k, scale=scale))
    alt = None
    if AB_OVERRIDES:  # A/B: the same forward with some FwdConfig fields changed
        # both sides pass their config: the call's own choice costs host time that the fill-0.1
        # rows would otherwise charge to the default side only (run 23)
        base = tlx_hopper.call_fwd_config(q, k, k_off, params)
        alt = dataclasses.replace(base, **AB_OVERRIDES)
        fwd_base = lambda: tlx_hopper.forward(q, k, v, q_off, k_off, params, config=base)
        fwd_alt = lambda: tlx_hopper.forward(q, k, v, q_off, k_off, params, config=alt)
        out_alt, lse_alt = fwd_alt()
        row["ab_fwd_identical"] = bool(torch.equal(out_alt, out) and torch.equal(lse_alt, lse))
        # a candidate that is not bit-identical is still checked against the baseline's O
        row["ab_vs_varlen_rel"] = ((out_alt.float() - o_ref.float()).norm() / o_ref.float().norm()).item()
        put_ab(row, "tlx_fwd_ab", fwd_base, fwd_alt)
    if AB_SCHEDULE:
        fwd_base, fwd_alt = (with_schedule(fwd, o) for o in ({}, AB_SCHEDULE))
        out_alt, lse_alt = fwd_alt()
        row["absched_fwd_identical"] = bool(torch.equal(out_alt, out) and torch.equal(lse_alt, lse))
        put_ab(row, "tlx_fwd_absched", fwd_base, fwd_alt)
    if AB_CACHED:
        fwd_built, fwd_cached = built_and_cached(fwd)
        out_alt, lse_alt = fwd_cached()  # builds the schedule the timed calls find
        row["abcached_fwd_identical"] = bool(torch.equal(out_alt, out) and torch.equal(lse_alt, lse))
        put_ab(row, "tlx_fwd_abcached", fwd_built, fwd_cached)
    if do_bwd:
        qg, kg, vg = (t.clone().requires_grad_() for t in (qv, k, v))
        o = varlen_attn(qg, kg, vg, cu_q, k_off, max_q, max_k, scale=scale)
        do = torch.randn_like(o)

        def varlen_fb():
            o = varlen_attn(qg, kg, vg, cu_q, k_off, max_q, max_k, scale=scale)
            o.backward(do)
        dov = do[: x["total_out"]].contiguous()

        def tlx_fb_with(fwd_cfg=None, bwd_cfg=None):
            """The tlx forward+backward with these configurations (None: the launcher's choice)."""
            def fb():
                o, l = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=fwd_cfg)
                tlx_hopper.backward(dov, q, k, v, o, l, q_off, k_off, params, config=bwd_cfg)
            return fb

        tlx_fb = tlx_fb_with()
        put_pair(row, "tlx_fwdbwd_ms", "varlen_fwdbwd_ms",
                 against_baseline(tlx_fb, varlen_fb, [qg, kg, vg]))
        if bcast:
            q_leaf = q.clone().requires_grad_()
            issue_call = issue_varlen(varlen_attn, q_leaf, kg, vg, B, cu_q, k_off, max_q, max_k,
                                      scale)
            put_pair(row, "tlx_fwdbwd_vs_issue_ms", "issue_varlen_fwdbwd_ms",
                     against_baseline(tlx_fb, lambda: issue_call().backward(do), [q_leaf, kg, vg]))
        if graphs:
            row["tlx_fwdbwd_graph_ms"] = graph_bench(tlx_fb)
        if AB_BWD_OVERRIDES:  # A/B: the same backward with some BwdConfig fields changed
            n_sm = torch.cuda.get_device_properties(q.device).multi_processor_count
            base_bwd = tlx_hopper.bwd_config(d, bcast, sh["q"] if bcast else 0, H, n_sm,
                                             tlx_hopper.call_tile_window(k, params))
            alt_bwd = dataclasses.replace(base_bwd, **AB_BWD_OVERRIDES)
            o, l = tlx_hopper.forward(q, k, v, q_off, k_off, params)
            grads = tlx_hopper.backward(dov, q, k, v, o, l, q_off, k_off, params)
            grads_alt = tlx_hopper.backward(dov, q, k, v, o, l, q_off, k_off, params, config=alt_bwd)
            row["ab_bwd_grad_rel"] = max(((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()
                                         for a, b in zip(grads_alt, grads))
            fb_base, fb_alt = tlx_fb_with(bwd_cfg=base_bwd), tlx_fb_with(bwd_cfg=alt_bwd)
            put_ab(row, "tlx_fwdbwd_abbwd", fb_base, fb_alt)
        if AB_SCHEDULE:
            fb_base, fb_alt = (with_schedule(tlx_fb, o) for o in ({}, AB_SCHEDULE))
            put_ab(row, "tlx_fwdbwd_absched", fb_base, fb_alt)
        if alt is not None:
            fb_base, fb_alt = tlx_fb_with(fwd_cfg=base), tlx_fb_with(fwd_cfg=alt)
            put_ab(row, "tlx_fwdbwd_ab", fb_base, fb_alt)
    if tut is not None and sh["fill"] == 1.0:
        Z, N = B, sh["max_kv"]
        qd = q.view(Z, N, H, d).transpose(1, 2).contiguous()
        kd = k.view(Z, N, H, d).transpose(1, 2).contiguous()
        vd = v.view(Z, N, H, d).transpose(1, 2).contiguous()
        tut.attention(qd, kd, vd, scale)
        tut_fwd = lambda: tut.attention(qd, kd, vd, scale)
        if BASELINE_ROUNDS == 1:
            row["tutorial_fwd_ms"] = bench(tut_fwd)
        else:  # the tlx forward's median over these rounds is the one to compare with the tutorial's
            put_pair(row, "tlx_fwd_vs_tutorial_ms", "tutorial_fwd_ms", against_baseline(fwd, tut_fwd))
    for key in ("tlx_fwd_ms", "varlen_fwd_ms", "tutorial_fwd_ms"):
        if key in row:
            row[key.replace("_ms", "_tflops")] = x["flops"] / row[key] / 1e9
    row["tlx_fwd_GBps"] = x["fwd_bytes"] / row["tlx_fwd_ms"] / 1e6
    row.update(timed_record())
    return row


def parse_overrides(spec: str, config_cls: type, option: str = "--ab") -> dict:
    """'num_buf_kv=5,tma_store_o=False' -> {'num_buf_kv': 5, 'tma_store_o': False}, checked
    against the fields of `config_cls` (FwdConfig or BwdConfig)."""
    fields = {f.name for f in dataclasses.fields(config_cls)}
    out = {}
    for item in filter(None, spec.split(",")):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in fields:
            raise SystemExit(f"{option}: expected FIELD=VALUE with FIELD one of {sorted(fields)}, got {item!r}")
        out[name.strip()] = ast.literal_eval(value.strip())
    return out


def override_configs(fwd_spec: str, bwd_spec: str) -> None:
    """Every later tlx call in this process runs with `tlx_hopper`'s default configurations changed
    as given ('FIELD=VALUE,...'; the launchers look `fwd_config` / `bwd_config` up at call time):
    the GPU test script checks an A/B's candidate on every case before it is merged, jfa_profile
    splits its time by kernel."""
    from kernels import tlx_hopper

    fwd = parse_overrides(fwd_spec, tlx_hopper.FwdConfig, "--fwd-config")
    bwd = parse_overrides(bwd_spec, tlx_hopper.BwdConfig, "--bwd-config")
    if fwd:
        default_fwd = tlx_hopper.fwd_config
        tlx_hopper.fwd_config = lambda *a, **kw: dataclasses.replace(default_fwd(*a, **kw), **fwd)
    if bwd:
        default_bwd = tlx_hopper.bwd_config
        tlx_hopper.bwd_config = lambda *a, **kw: dataclasses.replace(default_bwd(*a, **kw), **bwd)


def main():
    global SETTLE_MS, AB_ROUNDS, BASELINE_ROUNDS, AB_CACHED
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--graph", action="store_true",
                    help="also time the tlx calls (and varlen's forward) replayed from a CUDA graph: "
                         "*_graph_ms, how much of the call is the host's launch path")
    ap.add_argument("--only", default="", metavar="SUBSTR[,...]",
                    help="the shapes whose name contains one of these substrings")
    ap.add_argument("--ab-rounds", type=int, default=AB_ROUNDS,
                    help="A/B timings in ABBA order, this many rounds (1: runs 1-17's single A then B)")
    ap.add_argument("--baseline-rounds", type=int, default=BASELINE_ROUNDS,
                    help="time the tlx call and each baseline in ABBA order, this many rounds "
                         "(1: each once, runs 1-18)")
    ap.add_argument("--settle-ms", type=float, default=SETTLE_MS,
                    help="run each timed call back to back this long first (sustained-load clocks; "
                         "0: runs 1-16's method)")
    ap.add_argument("--ab", default="", metavar="FIELD=VALUE[,...]",
                    help="also time the forward with these FwdConfig fields changed")
    ap.add_argument("--ab-bwd", default="", metavar="FIELD=VALUE[,...]",
                    help="with --bwd: also time forward+backward with these BwdConfig fields changed")
    ap.add_argument("--bwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="every tlx backward with these BwdConfig fields changed from the launcher's "
                         "choice (the base an --ab-bwd candidate changes further)")
    ap.add_argument("--ab-schedule-fields", type=int, metavar="N",
                    help="also time the tlx calls with schedules built ranking at most N classes "
                         "per counting-sort pass (1: the build before session 35)")
    ap.add_argument("--ab-schedule-warps", type=int, metavar="N",
                    help="also time the tlx calls with schedules built by N warps")
    ap.add_argument("--ab-schedule-cached", action="store_true",
                    help="also time the tlx forward with its schedule cached against built per call")
    args = ap.parse_args()
    for option, key, value in (("--ab-schedule-fields", "fields", args.ab_schedule_fields),
                               ("--ab-schedule-warps", "num_warps", args.ab_schedule_warps)):
        if value is not None and value < 1:
            raise SystemExit(f"{option}: must be >= 1, got {value}")
        if value is not None:
            AB_SCHEDULE[key] = value
    override_configs("", args.bwd_config)
    SETTLE_MS = args.settle_ms
    if args.ab_rounds < 1:
        raise SystemExit(f"--ab-rounds: must be >= 1, got {args.ab_rounds}")
    AB_ROUNDS = args.ab_rounds
    AB_CACHED = args.ab_schedule_cached
    if args.baseline_rounds < 1:
        raise SystemExit(f"--baseline-rounds: must be >= 1, got {args.baseline_rounds}")
    BASELINE_ROUNDS = args.baseline_rounds
    from kernels.tlx_hopper import BwdConfig, FwdConfig

    AB_OVERRIDES.update(parse_overrides(args.ab, FwdConfig))
    AB_BWD_OVERRIDES.update(parse_overrides(args.ab_bwd, BwdConfig, "--ab-bwd"))
    if AB_BWD_OVERRIDES and not args.bwd:
        raise SystemExit("--ab-bwd needs --bwd")
    torch.manual_seed(0)
    try:
        tut = tutorial_module()
    except Exception as exc:
        print("tutorial unavailable:", exc)
        tut = None
    rows = []
    for sh in selected_shapes(args.only):
        started = time.time()
        try:
            row = run_shape(sh, args.bwd, tut, args.graph)
        except Exception as exc:
            row = dict(name=sh["name"], error=f"{type(exc).__name__}: {str(exc)[:300]}")
        # wall-clock span of the row (Unix s), to line its times up with a GPU clock/power log
        row.update(t_start=round(started, 2), t_end=round(time.time(), 2))
        print(json.dumps(row), flush=True)
        rows.append(row)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
        torch.cuda.empty_cache()
    print(f"\n{'shape':24s} {'floor':>7s} {'tlx':>7s} {'varlen':>7s} {'tut':>7s} {'x vs varlen':>11s} "
          f"{'x issue':>7s} {'TF/s':>6s} {'GB/s':>6s} {'fb tlx':>7s} {'fb varlen':>9s} {'fb issue':>8s} "
          f"{'ab':>7s} {'fb ab':>7s} {'fb abbwd':>8s} {'margin':>6s}")
    for r in rows:
        if "error" in r:
            print(f"{r['name']:24s} ERROR {r['error']}")
            continue
        g = lambda k: f"{r[k]:7.3f}" if k in r else "      -"
        # the issue's baseline / tlx: its paired rounds' median where taken
        x = lambda base, tlx: (f"{r.get(base + '_per_tlx') or r[base] / r[tlx]:7.2f}"  # noqa: E731
                               if base in r else "      -")
        print(f"{r['name']:24s} {r['floor_fwd_ms']:7.3f} {g('tlx_fwd_ms')} {g('varlen_fwd_ms')} "
              f"{g('tutorial_fwd_ms')} {r['varlen_fwd_ms'] / r['tlx_fwd_ms']:11.2f} "
              f"{x('issue_varlen_fwd_ms', 'tlx_fwd_vs_issue_ms')} {r['tlx_fwd_tflops']:6.0f} "
              f"{r['tlx_fwd_GBps']:6.0f} {g('tlx_fwdbwd_ms')} {g('varlen_fwdbwd_ms')} "
              f"{x('issue_varlen_fwdbwd_ms', 'tlx_fwdbwd_vs_issue_ms'):>8s} "
              f"{g('tlx_fwd_ab_ms')} {g('tlx_fwdbwd_ab_ms')} {g('tlx_fwdbwd_abbwd_ms'):>8s} "
              f"{min(r['timed_host_margin_us'], default=float('nan')):6.0f}")


if __name__ == "__main__":
    main()
