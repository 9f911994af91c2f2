"""How fast this GPU's HBM streams a PMA row's bytes, by access order: the ceiling the TLX forward's
bandwidth is judged against (the issue's floors assume 4.3 TB/s).

    python -m benchmarks.hbm_probe [--only SUBSTR[,...]] [--out results.md]

For each `tlx_hopper_bench` PMA shape (its inputs, seed 0) it times, with the bench's settle and
do_bench, plain Triton kernels that read exactly the bytes the forward must read (every real K and V
row of every head) and write what it must write (O: q_len rows per batch element and head), in the
orders a persistent forward could read them:

- `flat`: K and V as two flat arrays, each program a contiguous 16 KB stretch of each (no jagged
  structure);
- `elem-major`: one program per (batch element, head), the heads of an element adjacent in launch
  order, so the programs running together read whole 1 KB rows between them (what the forward's
  resident schedule approximates: its CTAs of different heads walk the same element order);
- `head-major`: one program per (head, batch element), the programs running together read one
  head's 256 B slice of many elements' rows;
- `elem-all-heads`: one program per batch element reading every head of its rows;
- `chunks of one head, 64 rows` / `chunks of all heads, 16 rows` (H = 4; only where H is a power of
  two): one program per (element, head, 64 rows) or per (element, 16 rows), the same 16 KB of K and
  of V (and of O) each, as 256 B slices or as whole 1 KB rows: the access pattern's cost at equal
  parallelism.

Each order is timed reading only, and reading plus writing O (`+O`). Beside them, the TLX forward
on the same inputs, its bytes counted as the bench counts them. TB/s = bytes / median time.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.tlx_hopper_bench import build, selected_shapes, settle  # noqa: E402
from kernels.triton_common import sequence_bounds  # noqa: E402

BLOCK_ROWS = 64
FLAT_BLOCK = 8192  # elements per program of the flat read: 16 KB of bf16 per tensor


@triton.jit
def _flat_read_kernel(k_ptr, v_ptr, n, sink_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.sum(tl.abs(tl.load(k_ptr + offs, mask=m, other=0).to(tl.float32)), 0)
    s += tl.sum(tl.abs(tl.load(v_ptr + offs, mask=m, other=0).to(tl.float32)), 0)
    tl.store(sink_ptr + tl.program_id(0), s)


@triton.jit
def _jagged_read_kernel(k_ptr, v_ptr, k_off, o_ptr, sink_ptr, B, q_len,
                        H: tl.constexpr, HEADS: tl.constexpr, D: tl.constexpr,
                        BLOCK: tl.constexpr, HEAD_MAJOR: tl.constexpr, WRITE_O: tl.constexpr):
    """One program per (element, group of HEADS heads): read its K/V rows, optionally write O."""
    pid = tl.program_id(0)
    n_groups: tl.constexpr = H // HEADS
    if HEAD_MAJOR:
        hg = pid // B
        b = pid % B
    else:
        b = pid // n_groups
        hg = pid % n_groups
    start, n = sequence_bounds(k_off, b)
    offs_d = tl.arange(0, D)
    acc = tl.zeros([D], dtype=tl.float32)
    for r in range(0, n, BLOCK):  # software-pipelined by the launch's num_stages
        pos = r + tl.arange(0, BLOCK)
        rows = start + pos
        m = (pos < n)[:, None]
        for hh in tl.static_range(HEADS):  # the heads of a row are adjacent 2*D-byte runs
            offs = rows[:, None] * (H * D) + (hg * HEADS + hh) * D + offs_d[None, :]
            kk = tl.load(k_ptr + offs, mask=m, other=0).to(tl.float32)
            vv = tl.load(v_ptr + offs, mask=m, other=0).to(tl.float32)
            acc += tl.sum(tl.abs(kk) + tl.abs(vv), 0)  # every load live, few registers
    if WRITE_O:
        o = (tl.zeros([BLOCK, D], dtype=tl.float32) + acc[None, :]).to(o_ptr.dtype.element_ty)
        for i in range(0, q_len, BLOCK):
            pos = i + tl.arange(0, BLOCK)  # q_len need not be a multiple of BLOCK
            rows = b.to(tl.int64) * q_len + pos
            for hh in tl.static_range(HEADS):
                col = (hg * HEADS + hh) * D + offs_d
                tl.store(o_ptr + rows[:, None] * (H * D) + col[None, :], o,
                         mask=(pos < q_len)[:, None])
    else:
        tl.store(sink_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _chunk_kernel(k_ptr, v_ptr, k_off, o_ptr, sink_ptr, q_len, n_chunks, H: tl.constexpr,
                  HEADS: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr, WRITE_O: tl.constexpr):
    """One program per (element, group of HEADS heads, chunk of ROWS rows), chunks fastest: the
    [ROWS, HEADS * D] stretch of K and V (HEADS * D contiguous elements per row) and, with WRITE_O,
    the same stretch of O's rows; ROWS * HEADS fixed, so every program moves the same bytes."""
    pid = tl.program_id(0)
    n_groups: tl.constexpr = H // HEADS
    c = pid % n_chunks
    hg = (pid // n_chunks) % n_groups
    b = pid // (n_chunks * n_groups)
    start, n = sequence_bounds(k_off, b)
    pos = c * ROWS + tl.arange(0, ROWS)
    cols = hg * HEADS * D + tl.arange(0, HEADS * D)
    acc = tl.zeros([HEADS * D], dtype=tl.float32)
    if c * ROWS < n:
        offs = (start + pos)[:, None].to(tl.int64) * (H * D) + cols[None, :]
        m = (pos < n)[:, None]
        kk = tl.load(k_ptr + offs, mask=m, other=0).to(tl.float32)
        vv = tl.load(v_ptr + offs, mask=m, other=0).to(tl.float32)
        acc = tl.sum(tl.abs(kk) + tl.abs(vv), 0)
    if WRITE_O:
        if c * ROWS < q_len:
            o = (tl.zeros([ROWS, HEADS * D], dtype=tl.float32) + acc[None, :]).to(o_ptr.dtype.element_ty)
            rows = b.to(tl.int64) * q_len + pos
            tl.store(o_ptr + rows[:, None] * (H * D) + cols[None, :], o, mask=(pos < q_len)[:, None])
    else:
        tl.store(sink_ptr + pid, tl.sum(acc, 0))


def _time(fn) -> float:
    settle(fn)
    return triton.testing.do_bench(fn, warmup=25, rep=200)


def probe(sh: dict) -> list[tuple[str, float, float]]:
    """[(method, ms, bytes)] for one PMA shape."""
    x = build(sh)
    k, v, k_off, q = x["k"], x["v"], x["k_off"], x["q"]
    B, H, D, q_len = sh["B"], sh["H"], k.shape[-1], sh["q"]
    kv_bytes = 2 * k.numel() * k.element_size()
    o_bytes = B * q_len * H * D * k.element_size()
    out = torch.empty(B * q_len, H, D, device="cuda", dtype=k.dtype)
    sink = torch.empty(max(B * H, triton.cdiv(k.numel(), FLAT_BLOCK)), device="cuda")
    rows = []

    n = k.numel()

    def flat():
        grid = (triton.cdiv(n, FLAT_BLOCK),)
        _flat_read_kernel[grid](k, v, n, sink, BLOCK=FLAT_BLOCK, num_warps=8)

    sink.zero_()
    flat()
    want = k.float().abs().sum() + v.float().abs().sum()
    torch.testing.assert_close(sink.sum(), want, rtol=1e-4, atol=0)
    rows.append(("flat", _time(flat), kv_bytes))
    for name, heads, head_major in (("elem-major", 1, False), ("head-major", 1, True),
                                    ("elem-all-heads", H, False)):
        for write_o in (False, True):
            def fn(heads=heads, head_major=head_major, write_o=write_o):
                _jagged_read_kernel[(B * (H // heads),)](
                    k, v, k_off, out, sink, B, q_len, H=H, HEADS=heads, D=D, BLOCK=BLOCK_ROWS,
                    HEAD_MAJOR=head_major, WRITE_O=write_o, num_warps=4 if heads == 1 else 8,
                    num_stages=4)

            if not write_o:  # every K/V element read once: the sums agree with torch's
                sink.zero_()
                fn()
                torch.testing.assert_close(sink.sum(), want, rtol=1e-4, atol=0)
            nbytes = kv_bytes + (o_bytes if write_o else 0)
            rows.append((name + (" +O" if write_o else ""), _time(fn), nbytes))

    # the same bytes per program, as 256 B slices of one head or as whole rows of every head: what
    # the access pattern alone costs (session 43; tl.arange needs H a power of two, so q192's H = 3
    # has no such rows)
    longest = int((k_off[1:] - k_off[:-1]).max())
    for heads, rows_per in ((1, 64), (H, 64 // H)) if H & (H - 1) == 0 else ():
        n_chunks = triton.cdiv(max(longest, q_len), rows_per)
        chunk_sink = torch.zeros(B * (H // heads) * n_chunks, device="cuda")
        for write_o in (False, True):
            def fn(heads=heads, rows_per=rows_per, n_chunks=n_chunks, write_o=write_o):
                _chunk_kernel[(chunk_sink.numel(),)](
                    k, v, k_off, out, chunk_sink, q_len, n_chunks, H=H, HEADS=heads, D=D,
                    ROWS=rows_per, WRITE_O=write_o, num_warps=4)

            if not write_o:
                fn()
                torch.testing.assert_close(chunk_sink.sum(), want, rtol=1e-4, atol=0)
            nbytes = kv_bytes + (o_bytes if write_o else 0)
            name = f"chunks of {'one head' if heads == 1 else 'all heads'}, {rows_per} rows"
            rows.append((name + (" +O" if write_o else ""), _time(fn), nbytes))

    from kernels import tlx_hopper
    from kernels.common import JFAParams
    params = JFAParams(max_seq_len_q=q_len, max_seq_len_kv=sh["max_kv"], sm_scale=D ** -0.5,
                       broadcast_q=True)
    fwd = lambda: tlx_hopper.forward(q, k, v, None, k_off, params)
    rows.append(("tlx forward (bench bytes)", _time(fwd), x["fwd_bytes"]))
    return rows


def rows_over_slices(table: str) -> dict[str, float]:
    """Per shape of a probe table (its markdown), the time of one head's 256 B slices over the
    time of whole rows at equal parallelism, O written (the `chunks` pair's `+O` rows): above 1,
    HBM streams whole rows faster, what a forward requesting several heads' rows together could
    gain on its K/V reads."""
    times: dict[str, dict[str, float]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[2].startswith("chunks of") and cells[2].endswith(" +O"):
            times.setdefault(cells[1], {})["slices" if "one head" in cells[2] else "rows"] = float(cells[3])
    return {shape: t["slices"] / t["rows"] for shape, t in times.items() if len(t) == 2}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="PMA",
                    help="tlx_hopper_bench shape name substrings (PMA shapes only)")
    ap.add_argument("--out", default="", help="write the markdown table here too")
    ap.add_argument("--rows-over-slices", default="", metavar="TABLE",
                    help="print `rows_over_slices` of a table this probe wrote (one line per shape: "
                         "name, ratio) and exit")
    args = ap.parse_args()
    if args.rows_over_slices:
        with open(args.rows_over_slices) as f:
            for shape, ratio in rows_over_slices(f.read()).items():
                print(f"{shape}\t{ratio:.3f}")
        return
    lines = [f"GPU: {torch.cuda.get_device_name()}; command: python -m benchmarks.hbm_probe "
             f"--only {args.only!r}", "",
             "| shape | method | ms | GB | TB/s |", "|---|---|--:|--:|--:|"]
    for sh in selected_shapes(args.only):
        if sh["kind"] != "bcast":
            continue
        for method, ms, nbytes in probe(sh):
            lines.append(f"| {sh['name']} | {method} | {ms:.4f} | {nbytes / 1e9:.3f} | "
                         f"{nbytes / ms / 1e9:.2f} |")
            print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
