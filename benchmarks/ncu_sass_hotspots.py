"""Where a kernel's warps stall, instruction by instruction, from Nsight Compute's source page.

    ncu --section WarpStateStats --section SourceCounters -o rep python -m benchmarks.tlx_ncu_probe ...
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python -m benchmarks.ncu_sass_hotspots sass.csv [--top 25]

Prints a markdown table: the SASS instructions with the most warp-stall samples, each with its
share of all samples and its two largest stall reasons, then the samples summed by instruction
kind (opcode) and by stall reason.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_sass(path: str) -> list[dict[str, str]]:
    """The rows of an `ncu --page source --csv --print-source sass` export (its first line names the
    kernel, the second is the header)."""
    with open(path, newline="") as f:
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(hotspots(read_sass(args.csv), args.top))


if __name__ == "__main__":
    main()
