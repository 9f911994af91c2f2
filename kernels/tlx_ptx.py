"""PTX text for the TLX forward's `tl.inline_asm_elementwise` calls: plain Python (no Triton), so
the CPU tests can read it.

Register order of a wgmma m64 fp32 accumulator [64, C] in one thread (Triton's linear layout for
Hopper MMA v3): element i holds column 8 * (i >> 2) + 2 * (lane & 3) + (i & 1) of row
16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1). So bit 1 of i picks the thread's row (r or r + 8),
and the 4 threads sharing a row differ in lane bits 0 and 1.
"""

from __future__ import annotations


def rescale_asm(n: int) -> tuple[str, str]:
    """PTX for `_rescale_lazily` over one thread's n accumulator elements: outputs $0..$n-1 (tied to
    the inputs $n..$2n-1), their row factors $2n..$3n-1 and the thread's flag (all n equal) from
    $3n. The label takes LLVM's per-asm-instance ${:uid}."""
    muls = "\n".join(f"mul.f32 ${i}, ${i}, ${2 * n + i};" for i in range(n))
    asm = ("{\n.reg .pred %skip;\n"
           f"setp.eq.s32 %skip, ${3 * n}, 0;\n"
           "@%skip bra jfa_rescale_done_${:uid};\n"
           f"{muls}\n"
           "jfa_rescale_done_${:uid}:\n}")
    constraints = ",".join(["=f"] * n + [str(i) for i in range(n)] + ["f"] * n + ["r"] * n)
    return asm, constraints


def tree_reduce_asm(n: int, op: str) -> tuple[str, str]:
    """PTX for `_row_reduce_tree` over one thread's n elements of a [64, 2n] wgmma accumulator
    (inputs $n..$2n-1), op "max" or "add": per row, a pairwise tree over the thread's n / 2
    elements (depth log2(n / 2), where Triton's reduce chains them one after another), then two
    butterfly shuffles over the row's 4 threads; the row's result goes to each of its elements
    ($0..$n-1)."""
    if op not in ("max", "add") or n < 4 or n & (n - 1):
        raise ValueError(f"tree_reduce_asm: op must be max or add and n a power of two >= 4, "
                         f"got op={op!r}, n={n}")
    lines = ["{", f".reg .f32 %t<{2 * n}>;"]
    total = 0
    results = []
    for row in (0, 1):
        level = [f"${n + i}" for i in range(n) if (i >> 1) & 1 == row]
        while len(level) > 1:
            pairs = zip(level[0::2], level[1::2])
            level = []
            for a, b in pairs:
                lines.append(f"{op}.f32 %t{total}, {a}, {b};")
                level.append(f"%t{total}")
                total += 1
        for lane_bit in (1, 2):
            lines.append(f"shfl.sync.bfly.b32 %t{total}, {level[0]}, {lane_bit}, 0x1f, 0xffffffff;")
            lines.append(f"{op}.f32 %t{total + 1}, {level[0]}, %t{total};")
            level = [f"%t{total + 1}"]
            total += 2
        results.append(level[0])
    lines += [f"mov.b32 ${i}, {results[(i >> 1) & 1]};" for i in range(n)]
    lines.append("}")
    return "\n".join(lines), ",".join(["=f"] * n + ["f"] * n)
