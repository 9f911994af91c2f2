"""The kernels' PTX text (kernels/tlx_ptx.py), run by a small interpreter of the instructions it uses
over one quad of threads (the 4 lanes that share a row of a wgmma m64 accumulator)."""

import numpy as np
import pytest

from kernels.tlx_ptx import acc_store_asm

LANES = 4


def _to16(x: np.float32, cvt: str) -> int:
    """x rounded to nearest even in bf16 / f16, as its bit pattern."""
    if cvt == "f16x2":
        return int(np.float16(x).view(np.uint16))
    u = int(np.float32(x).view(np.uint32))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def run_quad(asm: str, operands: list[dict[str, object]]) -> dict[int, int]:
    """Runs `asm` on 4 lanes (lane ids 0..3) with operands[lane] = {"$i": value}; returns the
    32-bit words it stored, by byte address."""
    regs = [dict(ops) for ops in operands]
    memory: dict[int, int] = {}

    def val(r, name):
        return int(name) if name.lstrip("-").isdigit() else r[name]

    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if line in ("{", "}") or line.startswith(".reg"):
            continue
        pred = None
        if line.startswith("@"):
            pred, line = line.split(None, 1)
            pred = pred[1:]
        op, args = line.split(None, 1)
        if op == "shfl.sync.bfly.b32":
            dst, src, mask, _, _ = [a.strip() for a in args.split(",")]
            vals = [r[src] for r in regs]
            for lane in range(LANES):
                regs[lane][dst] = vals[lane ^ int(mask)]
            continue
        if op == "st.global.v4.b32":
            addr, words = args.split(",", 1)
            base, off = addr.strip("[] ").split("+")
            words = [w.strip(" {}") for w in words.split(",")]
            for r in regs:
                if pred is None or r[pred]:
                    for i, w in enumerate(words):
                        memory[r[base] + int(off) + 4 * i] = r[w]
            continue
        args = [a.strip() for a in args.split(",")]
        for lane, r in enumerate(regs):
            if op == "mov.u32" and args[1] == "%laneid":
                r[args[0]] = lane
            elif op in ("mov.u32", "mov.b32"):
                r[args[0]] = val(r, args[1])
            elif op == "and.b32":
                r[args[0]] = val(r, args[1]) & val(r, args[2])
            elif op in ("setp.ne.u64", "setp.ne.b32"):
                r[args[0]] = val(r, args[1]) != val(r, args[2])
            elif op == "selp.b32":
                r[args[0]] = r[args[1]] if r[args[3]] else r[args[2]]
            elif op.startswith("cvt.rn.") and op.endswith(".f32"):
                cvt = op.split(".")[2]
                r[args[0]] = (_to16(r[args[1]], cvt) << 16) | _to16(r[args[2]], cvt)
            else:
                raise AssertionError(f"instruction the interpreter does not know: {line}")
    return memory


@pytest.mark.parametrize("n_cols", [128, 64])
@pytest.mark.parametrize("cvt", ["bf16x2", "f16x2"])
@pytest.mark.parametrize("rows", [(True, True), (True, False), (False, False)])
def test_acc_store_writes_each_rows_blocks_whole(n_cols, cvt, rows):
    n = n_cols // 2
    asm, constraints = acc_store_asm(n_cols, cvt)
    assert constraints.count("=r") == n and constraints.count(",f") == n and constraints.count(",l") == 2 * n
    rng = np.random.default_rng(n_cols)
    x = rng.standard_normal((LANES, n)).astype(np.float32)
    bases = (0x10000, 0x20000)  # rows r and r + 8
    operands = []
    for lane in range(LANES):
        ops = {f"${n + i}": x[lane, i] for i in range(n)}
        for h in (0, 1):  # the address of the row's block `lane`, or 0: skip the row
            ops.update({f"${(2 + h) * n + i}": (bases[h] + 16 * lane) if rows[h] else 0 for i in range(n)})
        operands.append(ops)
    memory = run_quad(asm, operands)
    want = {}
    for h in (0, 1):
        if not rows[h]:
            continue
        for j in range(n_cols // 8):          # block j: columns 8j .. 8j + 7 of the row
            for m in range(LANES):            # its word m: columns 8j + 2m, + 1, held by lane m
                reg = 4 * j + 2 * h
                want[bases[h] + 16 * j + 4 * m] = (_to16(x[m, reg + 1], cvt) << 16) | _to16(x[m, reg], cvt)
    assert memory == want


def test_acc_store_rejects_what_it_cannot_build():
    with pytest.raises(ValueError, match="n_cols must be a multiple of 32 and cvt bf16x2 or f16x2"):
        acc_store_asm(48, "bf16x2")
    with pytest.raises(ValueError, match="got 128, f32"):
        acc_store_asm(128, "f32")
