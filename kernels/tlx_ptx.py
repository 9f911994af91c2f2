"""PTX text for `tl.inline_asm_elementwise` blocks of the TLX Hopper kernels (strings built in Python,
so tests/kernels/test_tlx_ptx.py can interpret them on the CPU)."""

from __future__ import annotations


def _xor_permute(regs: list[str], tmp: list[str], bit0: str, bit1: str) -> list[str]:
    """PTX making regs[u] = old regs[u ^ q] for the lane's q = 2 * bit1 + bit0 (predicates): two
    levels of conditional swaps through tmp (an involution: applying it twice restores regs)."""
    a, t = regs, tmp
    return ([f"selp.b32 {t[u]}, {a[u ^ 1]}, {a[u]}, {bit0};" for u in range(4)]
            + [f"selp.b32 {a[u]}, {t[u ^ 2]}, {t[u]}, {bit1};" for u in range(4)])


def acc_store_asm(n_cols: int, cvt: str) -> tuple[str, str]:
    """PTX storing one thread's share of a [64, n_cols] fp32 wgmma accumulator (m64, 128 threads)
    as 16-bit values (`cvt`: bf16x2 / f16x2) with 16-byte stores.

    In the accumulator register 4j + 2h + k of a thread holds row r + 8h, column c + 8j + k, where
    r = 16 * warp + lane / 4 and c = 2 * (lane % 4): a row's 8 columns of block j (16 bytes) lie
    in the 4 lanes of a quad, 4 bytes each. For each 4 blocks j = 4J .. 4J + 3 and each h the quad
    transposes its 4 x 4 words (a lane's words permuted by its lane bits, three xor shuffles, the
    received words permuted back), so that lane q holds block 4J + q of its row whole and stores
    it with one `st.global.v4.b32`: a warp instruction writes 8 rows x 64 contiguous bytes.

    Operands (n = n_cols / 2 values per thread): $0..$n-1 dummy outputs; $n..$2n-1 the values;
    $2n.. the byte address of (r, c - 2 * (lane % 4) + 8 * (lane % 4)), i.e. of the row's block q;
    $3n.. the same for row r + 8; a zero address skips that row's stores."""
    if n_cols % 32 or not cvt in ("bf16x2", "f16x2"):
        raise ValueError(f"n_cols must be a multiple of 32 and cvt bf16x2 or f16x2, got {n_cols}, {cvt}")
    n = n_cols // 2
    lines = ["{", ".reg .pred %p0, %p1, %q0, %q1;", ".reg .b32 %lane, %a<4>, %t<4>, %b<4>;",
             "mov.u32 %lane, %laneid;", "and.b32 %lane, %lane, 3;",
             "setp.ne.u64 %p0, $" + str(2 * n) + ", 0;", "setp.ne.u64 %p1, $" + str(3 * n) + ", 0;",
             # %q0 / %q1: bits 0 / 1 of the lane's position in its quad
             "and.b32 %a0, %lane, 1;", "setp.ne.b32 %q0, %a0, 0;",
             "and.b32 %a0, %lane, 2;", "setp.ne.b32 %q1, %a0, 0;"]
    a = [f"%a{u}" for u in range(4)]
    t = [f"%t{u}" for u in range(4)]
    b = [f"%b{u}" for u in range(4)]
    for big in range(n_cols // 32):
        for h in range(2):
            for k in range(4):
                reg = 4 * (4 * big + k) + 2 * h  # column c + 8j of row r + 8h, j = 4 * big + k
                lines.append(f"cvt.rn.{cvt}.f32 {a[k]}, ${n + reg + 1}, ${n + reg};")
            lines += _xor_permute(a, t, "%q0", "%q1")           # a[u] = word of block 4J + (q ^ u)
            lines.append(f"mov.b32 {b[0]}, {a[0]};")
            for u in (1, 2, 3):                                  # from lane q ^ u: its a[u], the
                lines.append(f"shfl.sync.bfly.b32 {b[u]}, {a[u]}, {u}, 31, -1;")  # word q ^ u of block q
            lines += _xor_permute(b, t, "%q0", "%q1")           # b[m] = word m of block 4J + q
            lines.append(f"@%p{h} st.global.v4.b32 [${(2 + h) * n}+{64 * big}], "
                         f"{{{', '.join(b)}}};")
    lines += [f"mov.u32 ${i}, 0;" for i in range(n)] + ["}"]
    return "\n".join(lines), ",".join(["=r"] * n + ["f"] * n + ["l"] * (2 * n))
