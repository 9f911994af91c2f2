"""The forward's PTX text (kernels/tlx_ptx.py), run by a small interpreter of the instructions it
uses over one quad of threads (the 4 lanes that share a row of a wgmma m64 accumulator)."""

import re

import numpy as np
import pytest

from kernels.tlx_ptx import tree_reduce_asm

LANE_BITS = 2  # a row's 4 threads: lanes differing in bits 0 and 1


def run_quad(asm: str, inputs: np.ndarray) -> np.ndarray:
    """Outputs $0..$n-1 of `asm` for each of 4 lanes; inputs [4, n] fp32 are $n..$2n-1."""
    lanes, n = inputs.shape
    regs = [{f"${n + i}": np.float32(inputs[lane, i]) for i in range(n)} for lane in range(lanes)]
    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if line in ("{", "}") or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        args = [a.strip() for a in args.split(",")]
        if op == "shfl.sync.bfly.b32":
            dst, src, mask = args[0], args[1], int(args[2])
            vals = [r[src] for r in regs]
            for lane in range(lanes):
                regs[lane][dst] = vals[lane ^ mask]
            continue
        for r in regs:
            if op == "max.f32":
                r[args[0]] = np.maximum(r[args[1]], r[args[2]])
            elif op == "add.f32":
                r[args[0]] = np.float32(r[args[1]] + r[args[2]])
            elif op == "mov.b32":
                r[args[0]] = r[args[1]]
            else:
                raise AssertionError(f"instruction the interpreter does not know: {line}")
    return np.array([[r[f"${i}"] for i in range(n)] for r in regs])


@pytest.mark.parametrize("n", [32, 64])
@pytest.mark.parametrize("op", ["max", "add"])
def test_tree_reduce_gives_each_element_its_rows_result(n, op):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((4, n)).astype(np.float32)
    x[1, 7] = -np.inf  # masked scores
    out = run_quad(tree_reduce_asm(n, op)[0], x)
    row = (np.arange(n) >> 1) & 1  # element i belongs to row r + 8 * bit 1 of i
    for r in (0, 1):
        vals = x[:, row == r].astype(np.float64)
        want = vals.max() if op == "max" else vals.sum()
        got = out[:, row == r]
        if op == "max":
            assert (got == np.float32(want)).all()
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5)
        assert (got == got[0, 0]).all()  # every lane, every element of the row: the same value


def test_tree_reduce_is_a_tree():
    # dependency depth per row: log2(n / 2) combines, then 2 shuffle steps; instructions: n / 2 - 1
    # combines per row plus the shuffles and their combines, no more than the linear chain
    asm, constraints = tree_reduce_asm(32, "max")
    depth = {}
    for line in asm.splitlines():
        m = re.match(r"(max\.f32|shfl\.sync\.bfly\.b32) (%t\d+), ([^,]+), ([^,;]+)", line.strip())
        if m:
            srcs = [m.group(3)] + ([m.group(4)] if m.group(1) == "max.f32" else [])
            depth[m.group(2)] = 1 + max(depth.get(s.strip(), 0) for s in srcs)
    assert max(depth.values()) == 4 + 2 * 2
    assert asm.count("max.f32") == 2 * (15 + 2) and asm.count("shfl.sync") == 4
    assert constraints.count("=f") == 32 and constraints.count(",f") == 32


@pytest.mark.parametrize("n,op", [(24, "max"), (32, "min"), (2, "add")])
def test_tree_reduce_rejects_what_it_cannot_build(n, op):
    with pytest.raises(ValueError, match="op must be max or add and n a power of two"):
        tree_reduce_asm(n, op)
