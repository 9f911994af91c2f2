"""Timing-only variants of the fused dK/dV pass, to bound what its dQ work costs (run 19).

    python -m benchmarks.tlx_bwd_bound_variants DEST {noreduce,nodq}
    (cd DEST && PYTHONPATH=$PWD python -m benchmarks.tlx_hopper_bench --bwd --only PMA)

Copies `kernels/` and `benchmarks/` to DEST and edits DEST's `tlx_hopper_bwd.py`:
- noreduce: the per-step TMA reduce-add of the dQ partial is dropped (its staging is kept);
- nodq: also the dS^T publish, its barrier and the two dQ GEMMs (the staged partial becomes
  zeros plus the step's LSE, a value of the step, as run 19 measured it).
Both give a wrong dQ: for timing only, never for use. The edits are exact-text replacements and
fail loudly once the kernel's text has moved on.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

REDUCE_ADD = """                                tlx.async_descriptor_store(desc_dq, stage,
                                                           [q_row0 + i0, h * HEAD_DIM + cid * DQ_COLS],
                                                           store_reduce="add")
"""
DQ_GEMMS = """                                tlx.fence("async_shared")
                                tlx.local_store(ds_tiles[cid], dst)
                                tlx.fence("async_shared")
                                tlx.named_barrier_wait(DS_READY_BAR, 256)
                                k0 = _opaque(2 * slot)
                                d0 = _opaque(0)
                                dq = tlx.async_dot(
                                    tlx.local_trans(ds_tiles[d0]),
                                    tlx.local_slice(k_tiles[k0], [0, cid * DQ_COLS],
                                                    [HALF, DQ_COLS]))
                                dq = tlx.async_dot(
                                    tlx.local_trans(ds_tiles[d0 + 1]),
                                    tlx.local_slice(k_tiles[k0 + 1], [0, cid * DQ_COLS],
                                                    [HALF, DQ_COLS]), dq)
"""
DQ_ZEROS = """                                dq = tl.zeros([BLOCK_MQ, DQ_COLS], dtype=tl.float32) + lse2[:, None]
"""
DQ_WAIT = """                                dq = tlx.async_dot_wait(0, dq)
"""
VARIANTS = {
    "noreduce": [(REDUCE_ADD, "")],
    "nodq": [(REDUCE_ADD, ""), (DQ_GEMMS, DQ_ZEROS), (DQ_WAIT, "")],
}


def edit_exactly(text: str, edits: list[tuple[str, str]], variant: str, where: str) -> str:
    """text with each (old, new) of edits replaced, every old occurring exactly once (else a
    RuntimeError naming the variant, `where` and the text's first line: the kernel moved on)."""
    for old, new in edits:
        if text.count(old) != 1:
            raise RuntimeError(f"{variant}: the text to replace occurs {text.count(old)} times in "
                               f"{where} (expected once): {old.strip().splitlines()[0]!r}")
        text = text.replace(old, new)
    return text


def make_variant(dest: Path, variant: str) -> Path:
    """DEST with copies of kernels/ and benchmarks/, its dK/dV pass edited as `variant` says."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {sorted(VARIANTS)}, got {variant!r}")
    for package in ("kernels", "benchmarks"):
        shutil.copytree(REPO / package, dest / package, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    path = dest / "kernels" / "tlx_hopper_bwd.py"
    path.write_text(edit_exactly(path.read_text(), VARIANTS[variant], variant, str(path)))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("variant", choices=sorted(VARIANTS))
    args = ap.parse_args()
    print("edited", make_variant(args.dest, args.variant), args.variant)


if __name__ == "__main__":
    main()
