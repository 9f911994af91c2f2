"""Per-CTA timeline of the tlx forward: where a persistent launch's time goes (a GPU records it,
any machine reads it).

    python -m benchmarks.tlx_timeline [--shape "PMA q128 fill0.1"] [--regime dirty] [--samples 5]
        [--fwd-config F=V[,...]] [--save FILE.pt] [--out FILE.md] [--plot FILE.png]
    python -m benchmarks.tlx_timeline --load FILE.pt [--out FILE.md] [--plot FILE.png]

Records `tlx_hopper.forward(..., timeline=[])` (`kernels/tlx_timeline.py`: the SMs' globaltimer
and cycle counter at the kernel's entry, after its PDL wait, at each tile's epilogue and at each
consumer group's end) on one `tlx_hopper_bench` shape. Each sample runs after the bench's settle,
an L2 preparation (`dirty`: a buffer of twice the L2 written, as do_bench's flush before every
timed call; `clean`: read instead; `none`: nothing, the previous sample's lines stay) and ~1 ms of
GPU spin, so the host has enqueued the call before it starts: the device's own time.

Per sample (µs from the first CTA's entry; medians over CTAs unless said):
- span: the first entry to the last group's end (the launch's time on the device);
- entries: the spread of the CTAs' entries (how long the launch took to start them all);
- ready: entry to the end of the PDL wait (the schedule build still running);
- first tile: entry to the CTA's first epilogue;
- end, tail: the CTAs' last group end, and the last one's lead over the median (load imbalance
  plus the last tiles' drain); how far a CTA's groups end apart (the imbalance between them);
- busy: the CTAs' entry-to-end time over the span, averaged; the SM clock over the tiles (their
  cycles over their globaltimer time: the power cap's clock);
- tiles: a group's tile time from its previous epilogue (its first from the PDL wait), fitted
  over all tiles as a + b * blocks (least squares), in ns and in SM cycles, and its median per
  block count.
Then the first sample's first K/V ring turns (`turn_table`): when the producer issued each turn's
K load and when each consumer group's wait for it ended (medians over the CTAs), which tells a
group waiting on loads issued late from one waiting on loads in flight.
The title gives the call's median time with the stamps and without them in the same regime: the
stamps cost the split tile a few spilled words per tile (sm_90 compile check, session 50: 5 / 9
against 5 / 7), so a difference there says how far the timeline is from the undisturbed kernel.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from kernels import tlx_timeline
from kernels.tlx_timeline import group_tiles

# the row layout's fields (kernels/tlx_timeline.py)
ENTRY, READY, GROUP_END, SM_ID = (tlx_timeline.ENTRY.value, tlx_timeline.READY.value,
                                  tlx_timeline.GROUP_END.value, tlx_timeline.SM_ID.value)
HEADER, TILE_FIELDS = tlx_timeline.HEADER.value, tlx_timeline.TILE_FIELDS.value


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line y = a + b x (b = 0 when every x is the same)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return my - b * mx, b


def summarise(timeline: tlx_timeline.Timeline) -> dict:
    """A launch's timeline (`kernels.tlx_timeline.Timeline`) as the numbers the module docstring
    lists (µs, except the tile fits' ns and cycles)."""
    buf = timeline.buffer.cpu()
    g = timeline.num_groups
    entry = buf[:, ENTRY]
    if bool((entry < 0).any()):
        raise ValueError("timeline: a CTA left no entry stamp (not a TIMELINE launch, or it failed)")
    t0 = int(entry.min())
    ends = buf[:, GROUP_END:GROUP_END + 2 * g:2]
    cta_end = ends.max(dim=1).values
    us = lambda ns: ns / 1e3  # noqa: E731
    tiles = group_tiles(buf, g, timeline.ring_turns)
    first = {}
    for t in tiles:
        first[t["cta"]] = min(first.get(t["cta"], t["end"]), t["end"])
    first = {cta: stamp - int(entry[cta]) for cta, stamp in first.items()}
    a_ns, b_ns = fit_line([t["blocks"] for t in tiles], [t["ns"] for t in tiles]) if tiles else (0.0, 0.0)
    a_cy, b_cy = fit_line([t["blocks"] for t in tiles], [t["cycles"] for t in tiles]) if tiles else (0.0, 0.0)
    by_blocks = {}
    for t in tiles:
        by_blocks.setdefault(t["blocks"], []).append(t["ns"])
    span = int(cta_end.max()) - t0
    return dict(
        ctas=buf.shape[0], sms=len(set(buf[:, SM_ID].tolist())), tiles=len(tiles),
        span_us=us(span),
        entries_us=us(int(entry.max()) - t0),
        ready_us=us(statistics.median((buf[:, READY] - entry).tolist())),
        first_tile_us=us(statistics.median(first.values())) if first else float("nan"),
        end_us=us(statistics.median((cta_end - t0).tolist())),
        tail_us=us(int(cta_end.max()) - statistics.median(cta_end.tolist())),
        # how far a CTA's groups end apart (the split tile's alternation hands group 0 more work)
        groups_apart_us=us(statistics.median((cta_end - ends.min(dim=1).values).tolist())),
        busy=statistics.fmean(((cta_end - entry) / span).tolist()) if span > 0 else float("nan"),
        # the SM clock over the tiles (cycles per globaltimer µs): the regime's clock (power cap)
        clock_mhz=1e3 * sum(t["cycles"] for t in tiles) / max(sum(t["ns"] for t in tiles), 1),
        tile_ns=(a_ns, b_ns), tile_cycles=(a_cy, b_cy),
        tile_median_ns={k: statistics.median(v) for k, v in sorted(by_blocks.items())},
    )


def table(samples: list[dict]) -> str:
    """Markdown of the samples' summaries, one column per sample."""
    rows = [("span (µs)", "span_us", "{:.2f}"), ("CTA entries spread (µs)", "entries_us", "{:.2f}"),
            ("entry to PDL wait's end (µs)", "ready_us", "{:.2f}"),
            ("entry to first epilogue (µs)", "first_tile_us", "{:.2f}"), ("CTA end (µs)", "end_us", "{:.2f}"),
            ("tail: last end - median end (µs)", "tail_us", "{:.2f}"),
            ("a CTA's groups' ends apart (µs)", "groups_apart_us", "{:.2f}"),
            ("busy (CTA time / span)", "busy", "{:.3f}"),
            ("SM clock over the tiles (MHz)", "clock_mhz", "{:.0f}")]
    head = "| | " + " | ".join(f"sample {i + 1}" for i in range(len(samples))) + " |"
    lines = [head, "|---|" + "--:|" * len(samples)]
    for label, key, fmt in rows:
        lines.append(f"| {label} | " + " | ".join(fmt.format(s[key]) for s in samples) + " |")
    lines.append("| tile = a + b * blocks (ns) | " + " | ".join(
        f"{s['tile_ns'][0]:.0f} + {s['tile_ns'][1]:.0f} b" for s in samples) + " |")
    lines.append("| tile = a + b * blocks (cycles) | " + " | ".join(
        f"{s['tile_cycles'][0]:.0f} + {s['tile_cycles'][1]:.0f} b" for s in samples) + " |")
    counts = sorted({k for s in samples for k in s["tile_median_ns"]})
    for k in counts:
        lines.append(f"| median tile of {k} blocks (ns) | " + " | ".join(
            f"{s['tile_median_ns'][k]:.0f}" if k in s["tile_median_ns"] else "" for s in samples) + " |")
    return "\n".join(lines)


def _median_us(ns: list) -> str:
    """The median of the stamped values (ns; None where not stamped) in µs, or blank."""
    kept = [v for v in ns if v is not None]
    return f"{statistics.median(kept) / 1e3:.2f}" if kept else ""


def turn_table(timeline: tlx_timeline.Timeline, turns: int = 24) -> str:
    """Markdown of a launch's first K/V ring turns (`kernels.tlx_timeline.ring_turn_stamps`), medians
    over the CTAs in µs from their PDL wait: when the producer issued each turn's K load and when
    each group's wait for it ended, with the group(s) whose tile it is (the most common owner)."""
    by_turn: dict[int, list[dict]] = {}
    for s in tlx_timeline.ring_turn_stamps(timeline.buffer.cpu(), timeline.num_groups,
                                           timeline.ring_turns):
        if s["turn"] < turns:
            by_turn.setdefault(s["turn"], []).append(s)
    g = timeline.num_groups
    head = "| turn | its tile's group | issued (µs) | " + " | ".join(
        f"group {i} waited until (µs)" for i in range(g)) + " |"
    lines = [head, "|--:|:-:|--:|" + "--:|" * g]
    for turn, stamps in sorted(by_turn.items()):
        owners = statistics.mode(s["owners"] for s in stamps)
        lines.append(f"| {turn} | {', '.join(map(str, owners))} | "
                     + _median_us([s["issued"] for s in stamps]) + " | "
                     + " | ".join(_median_us([s["seen"][i] for s in stamps]) for i in range(g)) + " |")
    return "\n".join(lines)


def epilogue_table(timeline: tlx_timeline.Timeline) -> str:
    """Markdown of the first own tile's epilogue of groups 0 and 1
    (`kernels.tlx_timeline.epilogue_stamps`), medians over the CTAs in µs from their PDL wait, and
    how far apart the CTAs issue its stores on the one globaltimer clock: a wait that ends at one
    instant in every CTA (run 49: the split tile's second group) shows as a small spread there."""
    buf = timeline.buffer.cpu()
    rows = tlx_timeline.epilogue_stamps(buf, timeline.num_groups, timeline.ring_turns)
    ready = buf[:, READY].tolist()
    lines = ["| group | last K wait ended (µs) | last PV done | O normalised | stores issued | "
             "stores issued: spread over the CTAs (µs) |", "|--:|--:|--:|--:|--:|--:|"]
    for group in sorted({r["group"] for r in rows}):
        mine = [r for r in rows if r["group"] == group]
        issued = [ready[r["cta"]] + r["stored"] for r in mine]
        lines.append(f"| {group} | " + " | ".join(_median_us([r[k] for r in mine]) for k in
                                                  ("last_wait", "pv", "normalised", "stored"))
                     + f" | {(max(issued) - min(issued)) / 1e3:.2f} |")
    return "\n".join(lines)


def plot(timeline: tlx_timeline.Timeline, path: str, title: str) -> None:
    """Each CTA a row, each group's tiles bars from its previous epilogue to its own (µs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buf = timeline.buffer.cpu()
    t0 = int(buf[:, ENTRY].min())
    fig, ax = plt.subplots(figsize=(12, max(4, buf.shape[0] / 12)))
    colours = ("tab:blue", "tab:orange", "tab:green")
    for t in group_tiles(buf, timeline.num_groups, timeline.ring_turns):
        ax.barh(t["cta"] + 0.3 * t["group"], t["ns"] / 1e3, left=(t["end"] - t["ns"] - t0) / 1e3,
                height=0.3, color=colours[t["group"]], edgecolor="white", linewidth=0.3)
    for group in range(timeline.num_groups):
        ax.barh([], [], color=colours[group], label=f"group {group}'s tiles")
    ax.scatter(((buf[:, ENTRY] - t0) / 1e3).tolist(), range(buf.shape[0]), s=4, color="grey",
               label="CTA entry")
    ax.scatter(((buf[:, READY] - t0) / 1e3).tolist(), range(buf.shape[0]), s=4, color="black",
               label="PDL wait ends")
    ax.set_xlim(left=0)
    ax.set_xlabel("µs from the first CTA's entry")
    ax.set_ylabel("CTA")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def record(shape: str, regime: str, samples: int,
           fwd_config: str) -> tuple[list[tlx_timeline.Timeline], float, float]:
    """`samples` timelines of the tlx forward on a tlx_hopper_bench shape (GPU), and the call's
    median ms with the stamps and without them (CUDA events around the call, schedule build
    included, each after the regime's preparation)."""
    from benchmarks.tlx_hopper_bench import build, override_configs, settle, shape_params, shapes
    from benchmarks.writeback_probe import HOST_SLACK_CYCLES, read_through, write_through
    from kernels import tlx_hopper

    names = [s["name"] for s in shapes()]
    if shape not in names:
        raise SystemExit(f"--shape: expected one of {names}, got {shape!r}")
    override_configs(fwd_config, "")
    sh = shapes()[names.index(shape)]
    x = build(sh)
    params = shape_params(sh, x)
    call = lambda timeline=None: tlx_hopper.forward(x["q"], x["k"], x["v"], x["q_off"], x["k_off"],  # noqa: E731
                                                    params, timeline=timeline)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    scratch = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")  # as writeback_probe's
    sink = torch.empty(1, dtype=torch.float32, device="cuda")
    prepare = {"dirty": lambda: write_through(scratch), "clean": lambda: read_through(scratch, sink),
               "none": lambda: None}[regime]
    timelines: list = []
    ms = {True: [], False: []}
    settle(call)
    for _ in range(samples):
        for stamped in (True, False):  # the stamps' cost: the same call without them, same regime
            prepare()
            torch.cuda._sleep(HOST_SLACK_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call(timelines if stamped else None)
            end.record()
            end.synchronize()
            ms[stamped].append(start.elapsed_time(end))
    return timelines, statistics.median(ms[True]), statistics.median(ms[False])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="PMA q128 fill0.1", help="a tlx_hopper_bench shape name")
    ap.add_argument("--regime", choices=("dirty", "clean", "none"), default="dirty",
                    help="L2 before each sample: written (do_bench's flush), read, or as left")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="FwdConfig fields changed from the launcher's choice")
    ap.add_argument("--save", help="the raw timelines (torch.save) for --load elsewhere")
    ap.add_argument("--load", help="read saved timelines instead of recording (no GPU)")
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--plot", help="the first sample's timeline as a PNG")
    args = ap.parse_args(argv)
    if args.load:
        saved = torch.load(args.load)
        # timelines saved before session 50 have no ring turns at their rows' end
        title = saved["title"]
        timelines = [tlx_timeline.Timeline(**{"ring_turns": 0, **t}) for t in saved["timelines"]]
    else:
        if not torch.cuda.is_available():
            raise SystemExit("tlx_timeline needs a CUDA device (and fbtriton) to record; --load reads a saved one")
        if args.samples < 1:
            raise SystemExit(f"--samples: must be >= 1, got {args.samples}")
        title = f"{args.shape}, L2 {args.regime}" + (f", {args.fwd_config}" if args.fwd_config else "")
        timelines, with_ms, without_ms = record(args.shape, args.regime, args.samples, args.fwd_config)
        title += f"; call {with_ms:.4f} ms with the stamps, {without_ms:.4f} ms without (medians)"
        if args.save:
            torch.save(dict(title=title, timelines=[
                dict(buffer=t.buffer.cpu(), num_groups=t.num_groups, ring_turns=t.ring_turns)
                for t in timelines]), args.save)
    text = f"## tlx forward timeline: {title}\n\n" + table([summarise(t) for t in timelines])
    if timelines[0].ring_turns:
        text += ("\n\nThe first K/V ring turns (sample 1; medians over the CTAs, µs from their PDL "
                 "wait):\n\n" + turn_table(timelines[0]))
        text += ("\n\nThe first own tile's epilogue per group (sample 1; medians over the CTAs, "
                 "µs from their PDL wait):\n\n" + epilogue_table(timelines[0]))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.plot:
        plot(timelines[0], args.plot, title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
