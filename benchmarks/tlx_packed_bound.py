"""What a packed key stream could give the broadcast (PMA) forward at most: the forward on a row's
key lengths A/B'd against the same call on lengths re-cut to whole K/V blocks (GPU, fbtriton).

    python -m benchmarks.tlx_packed_bound [--only "PMA q128 fill0.1"] [--variant nomath]
        [--rounds 4] [--out FILE.jsonl]

A packed stream would have each CTA walk a contiguous range of the packed keys across sequences
(broadcast Q is the same for every batch element): no padded last block per sequence and the same
number of blocks per CTA, at the price of blocks that hold a sequence boundary (two masked
softmaxes and two PV products around an epilogue) and a combine of the sequences cut at a range's
ends. Its best case is the real kernel on lengths that are whole blocks: the same batch, heads,
query and O bytes, the row's key count rounded to whole blocks of the launcher's block_n, dealt
as evenly as possible (every sequence base or base + 1 blocks, the longer ones spread by a fixed
permutation). The ratio packed / real is then the most the packed stream could gain before its
boundary blocks cost anything; where it is above the row's remaining gap, the packed stream cannot
close it. `--variant nomath` times both sides with `tlx_fwd_bound`'s no-math kernel (the K/V
stream and the ring's protocol alone).
"""

from __future__ import annotations

import argparse
import json

import torch


def packed_lengths(key_lengths: torch.Tensor, block: int, seed: int = 0) -> torch.Tensor:
    """Lengths for as many sequences as key_lengths, each a multiple of `block`, summing to their
    total rounded to whole blocks, as even as possible (base or base + 1 blocks; the longer ones
    at positions a seeded permutation picks, so no end of the batch gets them all)."""
    if block < 1:
        raise ValueError(f"block: must be >= 1, got {block}")
    if key_lengths.ndim != 1 or key_lengths.numel() == 0:
        raise ValueError(f"key_lengths: expected a non-empty 1-D tensor, got shape {tuple(key_lengths.shape)}")
    if bool((key_lengths < 0).any()):
        raise ValueError("key_lengths: must be >= 0")
    n = key_lengths.numel()
    blocks = round(int(key_lengths.sum()) / block)
    base, longer = divmod(blocks, n)
    out = torch.full((n,), base * block, dtype=torch.int64)
    picks = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:longer]
    out[picks] += block
    return out


def blocks_per_head(key_lengths: torch.Tensor, block: int) -> int:
    """K/V blocks a head's tiles walk for these lengths (one partial block per sequence's tail)."""
    return int(((key_lengths + block - 1) // block).sum())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="PMA q128 fill0.1", help="tlx_hopper_bench shapes (comma-separated substrings)")
    ap.add_argument("--variant", choices=("real", "nomath"), default="real",
                    help="the kernel both sides run: the real forward or tlx_fwd_bound's no-math one")
    ap.add_argument("--rounds", type=int, default=4, help="ABBA rounds per shape")
    ap.add_argument("--out", help="also write the rows (JSONL) here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("tlx_packed_bound needs a CUDA device (and fbtriton)")
    if args.rounds < 1:
        raise SystemExit(f"--rounds: must be >= 1, got {args.rounds}")
    from benchmarks import tlx_hopper_bench as tb
    from benchmarks.tlx_fwd_bound import launching, variant_kernel
    from kernels import tlx_hopper, tlx_hopper_fwd

    kernel = variant_kernel("nomath") if args.variant == "nomath" else tlx_hopper_fwd.jfa_fwd_kernel
    rows = []
    for sh in tb.selected_shapes(args.only):
        if sh["kind"] != "bcast":
            continue  # a packed stream needs one Q for every sequence
        x = tb.build(sh)
        params = tb.shape_params(sh, x)
        block = tlx_hopper.call_fwd_config(x["q"], x["k"], x["k_off"], params).block_n
        kl_packed = packed_lengths(x["kl"], block)
        y = tb.build_from_lengths(sh, kl_packed)

        def side(inputs, params=params):
            return launching(kernel, lambda: tlx_hopper.forward(
                inputs["q"], inputs["k"], inputs["v"], inputs["q_off"], inputs["k_off"], params))

        real, packed = side(x), side(y)
        real(), packed()
        ab, timed = tb.timed_ab(real, packed, rounds=args.rounds)
        row = dict(name=sh["name"], variant=args.variant, block_n=block,
                   keys=int(x["kl"].sum()), packed_keys=int(kl_packed.sum()),
                   blocks_per_head=blocks_per_head(x["kl"], block),
                   packed_blocks_per_head=blocks_per_head(kl_packed, block),
                   tlx_fwd_ms=ab["base"], packed_ms=ab["ab"], packed_ratio=ab["ratio"], **timed)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        tb.write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
