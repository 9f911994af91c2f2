"""How close the tlx forward comes to its own data movement: timing-only variants of the forward
kernel, A/B against the real one in the bench's regime (GPU, fbtriton).

    python -m benchmarks.tlx_fwd_bound [--only "PMA q128 fill0.1"] [--variant nomath] [--rounds 4]
        [--out FILE.jsonl]
    python -m benchmarks.tlx_fwd_bound --kernel-file OLD.py ...   (e.g. `git show REV:kernels/tlx_hopper_fwd.py`)

A variant is the forward kernel's source with exact-text edits, imported as a module of its own
(never `kernels.tlx_hopper_fwd`) and launched by `tlx_hopper.forward` in place of the real kernel
on its side of each ABBA round (`tlx_hopper_bench`'s settle, do_bench with its L2 flush, the same
call, configuration and schedule build):
- nomath: every consumer tile takes the idle path: it waits for each K/V block and gives the slot
  back, without a wgmma or a softmax, and stores zeros for O (LSE -inf). The K/V loads, the ring's
  protocol, the O and LSE stores and the schedule are the real kernel's;
- nostore: nomath without the O and LSE stores: the K/V stream and the protocol alone.
With `--kernel-file`, the other side is instead another version of the kernel's whole source (the
same signature: a change inside the kernel, timed against the code before it); its outputs must
equal the real kernel's bit for bit (`same_output`) or the tool fails. The variants' outputs are
wrong: for timing only, never for use. An edit whose text is not in the kernel
exactly once fails loudly (the kernel moved on). The ratio nomath / real says how much of the
forward's time its math and the consumers' latency add over moving its bytes the way it does;
`benchmarks/hbm_probe.py` times the same bytes moved by the simplest kernels.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.tlx_bwd_bound_variants import edit_exactly

REPO = Path(__file__).resolve().parents[1]
KERNEL = REPO / "kernels" / "tlx_hopper_fwd.py"

IDLE_CHOICE = """            idle = False  # a compile-time False unless enabled: no branch at all
            if SKIP_IDLE_GROUPS:
                idle = m0 + ROW_OFF >= qlen
"""
IDLE_ALWAYS = """            idle = True  # tlx_fwd_bound: no math in any tile
"""
STORE_O_LSE = """        _store_o_lse(desc_o, o_tiles, out_ptr, lse_ptr, o, lse, m0 + ROW_OFF,
                     out_row0, h, qlen, total_out, tma_o, cid, H, HEAD_DIM,
                     TMA_STORE_O, BROADCAST_Q, O_TMA_ONLY, FAST_EPILOGUE, Q_ROWS)
"""
NO_MATH = [(IDLE_CHOICE, IDLE_ALWAYS)]  # the idle path keeps turns only in the ping-pong tile
VARIANTS = {"nomath": NO_MATH, "nostore": NO_MATH + [(STORE_O_LSE, "")]}


def edited_source(variant: str, text: str | None = None) -> str:
    """The forward kernel's source (or `text`) with `variant`'s edits."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {sorted(VARIANTS)}, got {variant!r}")
    text = KERNEL.read_text() if text is None else text
    return edit_exactly(text, VARIANTS[variant], variant, KERNEL.name)


def variant_kernel(variant: str, source: str | None = None):
    """`variant`'s jfa_fwd_kernel, from its edited source (or `source` as it is) in a module of its
    own (needs fbtriton)."""
    name = f"tlx_hopper_fwd_{variant}"
    path = Path(tempfile.mkdtemp(prefix="tlx_fwd_bound_")) / f"{name}.py"
    # Triton reads a kernel's source from its file
    path.write_text(edited_source(variant) if source is None else source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.jfa_fwd_kernel


def launching(kernel, fn):
    """fn, called with `tlx_hopper.forward` launching `kernel` in place of the forward kernel (the
    module attribute the launcher reads at each call), which is restored after the call."""
    from kernels import tlx_hopper_fwd

    def call():
        real = tlx_hopper_fwd.jfa_fwd_kernel
        tlx_hopper_fwd.jfa_fwd_kernel = kernel
        try:
            return fn()
        finally:
            tlx_hopper_fwd.jfa_fwd_kernel = real
    return call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="PMA q128 fill0.1", help="tlx_hopper_bench shapes (comma-separated substrings)")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="nomath")
    ap.add_argument("--kernel-file", help="the other side: this forward kernel source (instead of a variant)")
    ap.add_argument("--rounds", type=int, default=4, help="ABBA rounds per shape")
    ap.add_argument("--out", help="also write the rows (JSONL) here")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("tlx_fwd_bound needs a CUDA device (and fbtriton)")
    if args.rounds < 1:
        raise SystemExit(f"--rounds: must be >= 1, got {args.rounds}")
    from benchmarks import tlx_hopper_bench as tb
    from kernels import tlx_hopper

    variant = "file" if args.kernel_file else args.variant
    source = Path(args.kernel_file).read_text() if args.kernel_file else None
    bound = variant_kernel(variant, source)
    rows = []
    for sh in tb.selected_shapes(args.only):
        x = tb.build(sh)
        params = tb.shape_params(sh, x)

        def forward(x=x, params=params):
            return tlx_hopper.forward(x["q"], x["k"], x["v"], x["q_off"], x["k_off"], params)

        forward_bound = launching(bound, forward)
        out, lse = forward_bound()
        row = dict(name=sh["name"], variant=variant)
        if variant == "nomath":  # its O is zeros: the variant ran, not the real kernel
            row["bound_out_zeros"] = bool((out == 0).all())
        if variant == "file":  # another version of the kernel: the same values or no timing
            out_real, lse_real = forward()
            row["same_output"] = bool(torch.equal(out, out_real) and torch.equal(lse, lse_real))
            if not row["same_output"]:
                raise SystemExit(f"{sh['name']}: {args.kernel_file}'s outputs differ from the kernel's")
        ab, timed = tb.timed_ab(forward, forward_bound, rounds=args.rounds)
        row.update(tlx_fwd_ms=ab["base"], bound_ms=ab["ab"], bound_ratio=ab["ratio"], **timed)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        tb.write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
