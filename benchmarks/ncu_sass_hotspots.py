"""Where a kernel's warps stall, instruction by instruction, from Nsight Compute's source page.

    ncu --section WarpStateStats --section SourceCounters -o rep python -m benchmarks.tlx_ncu_probe ...
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python -m benchmarks.ncu_sass_hotspots sass.csv [--top 25]

Prints a markdown table: the SASS instructions with the most warp-stall samples, each with its
share of all samples and its two largest stall reasons, then the samples summed by instruction
kind (opcode) and by stall reason.

    python -m benchmarks.ncu_sass_hotspots sass.csv --by-role

instead sums the samples per warp role of a warp-specialised kernel: the code between two
`USETMAXREG` instructions (each role's register reallocation opens its code), one row per region
with its instructions, executions, samples and stall reasons (run 19 compared the dense B768
consumers with the TLX tutorial's this way).

    python -m benchmarks.ncu_sass_hotspots sass.csv --runs 435:2205 --per 12288

splits rows 435-2204 (a role's code, from `--by-role`'s first rows) into runs of instructions
executed equally often and gives each run's executions per unit (--per: e.g. the role's warps
times the tiles each works through, so 1.00 is once per warp and tile) and its samples, then the
instructions a warp executes per unit in all (run 39 took the PMA q128 forward's consumer apart
per tile this way: start, first block, block bodies, epilogue).
"""

from __future__ import annotations

import argparse
import csv
import gzip
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_sass(path: str) -> list[dict[str, str]]:
    """The rows of an `ncu --page source --csv --print-source sass` export (its first line names the
    kernel, the second is the header; gzipped if the name ends in .gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        lines = list(csv.reader(f))
    header_at = next(i for i, row in enumerate(lines) if SAMPLES in row)
    header = lines[header_at]
    return [dict(zip(header, row)) for row in lines[header_at + 1:] if len(row) == len(header)]


def _count(row: dict[str, str], key: str) -> int:
    value = row.get(key, "") or "0"
    return int(value.replace(",", "")) if value.replace(",", "").isdigit() else 0


def _reasons(row: dict[str, str]) -> Counter:
    return Counter({k[len("stall_"):]: _count(row, k) for k in row
                    if k.startswith("stall_") and "Not Issued" not in k})


def hotspots(rows: list[dict[str, str]], top: int) -> str:
    total = sum(_count(r, SAMPLES) for r in rows) or 1
    out = [f"{total:,} stall samples over {len(rows):,} SASS instructions", "",
           "| samples | share | address | instruction | top stall reasons |", "|--:|--:|---|---|---|"]
    for r in sorted(rows, key=lambda r: -_count(r, SAMPLES))[:top]:
        n = _count(r, SAMPLES)
        why = ", ".join(f"{k} {v / max(n, 1):.0%}" for k, v in _reasons(r).most_common(2) if v)
        out.append(f"| {n:,} | {n / total:.1%} | {r['Address'][-5:]} | `{r['Source'].strip()}` | {why} |")
    by_op, by_reason = Counter(), Counter()
    for r in rows:
        opcode = r["Source"].split()
        opcode = [t for t in opcode if not t.startswith("@")]
        by_op[opcode[0].split(".")[0] if opcode else "?"] += _count(r, SAMPLES)
        by_reason.update(_reasons(r))
    out += ["", "| opcode | share |", "|---|--:|"]
    out += [f"| {op} | {n / total:.1%} |" for op, n in by_op.most_common(12)]
    out += ["", "| stall reason | share |", "|---|--:|"]
    out += [f"| {k} | {n / total:.1%} |" for k, n in by_reason.most_common(10) if n]
    return "\n".join(out)


REASONS = 6  # stall reasons shown per role


def roles(rows: list[dict[str, str]]) -> str:
    """Samples per code region, a new region at each `USETMAXREG` (the warp roles' entries) and
    after each unpredicated `EXIT`; regions with no executions are left out."""
    regions: list[dict] = []

    def start(row_index: int, label: str) -> None:
        regions.append(dict(first=row_index, label=label, n=0, executed=0, samples=0, reasons=Counter()))

    start(0, "entry")
    for i, r in enumerate(rows):
        source = r["Source"].strip()
        if "USETMAXREG" in source:
            start(i, source.split(",")[0])
        region = regions[-1]
        region["n"] += 1
        region["executed"] += _count(r, "Instructions Executed")
        region["samples"] += _count(r, SAMPLES)
        region["reasons"].update(_reasons(r))
        if source == "EXIT":
            start(i + 1, "after EXIT")
    total = sum(g["samples"] for g in regions) or 1
    out = [f"{total:,} stall samples", "",
           "| first row | entry | instructions | executed | samples | share | top stall reasons (samples) |",
           "|--:|---|--:|--:|--:|--:|---|"]
    for g in regions:
        if g["executed"] == 0:
            continue
        why = ", ".join(f"{k} {v:,}" for k, v in g["reasons"].most_common(REASONS) if v)
        out.append(f"| {g['first']} | `{g['label']}` | {g['n']:,} | {g['executed']:,} | {g['samples']:,} "
                   f"| {g['samples'] / total:.1%} | {why} |")
    return "\n".join(out)


def runs(rows: list[dict[str, str]], first: int, last: int, per: float, min_share: float = 0.01) -> str:
    """Rows first .. last-1 as runs of consecutive instructions with equal execution counts (per
    unit, to two decimals); runs of three or more instructions or with min_share of the range's
    samples are listed, the rest only counted in the total."""
    last = min(last, len(rows))
    found: list[dict] = []
    for i in range(first, last):
        r = rows[i]
        rate = round(_count(r, "Instructions Executed") / per, 2)
        if not found or found[-1]["rate"] != rate:
            found.append(dict(first=i, rate=rate, n=0, samples=0, source=r["Source"].strip()))
        found[-1]["n"] += 1
        found[-1]["samples"] += _count(r, SAMPLES)
    total = sum(g["samples"] for g in found) or 1
    out = [f"rows {first}-{last - 1}: {sum(g['rate'] * g['n'] for g in found):,.0f} instructions "
           f"executed per unit, {total:,} stall samples", "",
           "| rows | instructions | per unit | samples | share | first instruction |",
           "|---|--:|--:|--:|--:|---|"]
    for g in found:
        if g["n"] >= 3 or g["samples"] >= min_share * total:
            out.append(f"| {g['first']}-{g['first'] + g['n'] - 1} | {g['n']:,} | {g['rate']:.2f} | "
                       f"{g['samples']:,} | {g['samples'] / total:.1%} | `{g['source']}` |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--by-role", action="store_true",
                    help="samples per warp role (code between USETMAXREG instructions) instead")
    ap.add_argument("--runs", metavar="FIRST:LAST",
                    help="rows FIRST..LAST-1 as runs of equally often executed instructions instead")
    ap.add_argument("--per", type=float, default=1.0,
                    help="with --runs: executions per unit (e.g. warps x tiles)")
    args = ap.parse_args()
    rows = read_sass(args.csv)
    if args.runs:
        first, last = (int(x) for x in args.runs.split(":"))
        print(runs(rows, first, last, args.per))
    else:
        print(roles(rows) if args.by_role else hotspots(rows, args.top))


if __name__ == "__main__":
    main()
