"""Compiles the Triton JFA kernels for sm_90 and sm_80 ahead of time, without a GPU.

The interpreter runs kernels as Python and misses what only the compiler sees (type errors,
unsupported constructs, loops the software pipeliner rejects). Compiling for a GPUTarget needs no
device, so CPU runs catch those too. Each compile runs in a subprocess without TRITON_INTERPRET
(the test session has the interpreter on). Also checked on sm_90: the bf16 forward, dK/dV and dQ
kernels use wgmma and pipelined (async-copy) loads, the properties the H200 performance rests on.

Run directly to print the summary: ``python tests/kernels/test_triton_aot_compile.py 90``.
"""

from __future__ import annotations

import json
import sys

import pytest

# (name, dtype, head_dim, masking and broadcast_q on): bf16 at the benchmark's head dim, plain and
# with every option; fp32 (IEEE dots) at a head dim that is not a power of 2
VARIANTS = [
    ("bf16_d128", "bf16", 128, False),
    ("bf16_d128_all_options", "bf16", 128, True),
    ("fp32_d48", "fp32", 48, True),
]


def _signature(kernel, constants: dict, dtype: str) -> tuple[dict, dict]:  # type: ignore[no-untyped-def]
    """Argument types as the launcher passes them, and the 16-byte alignment the JIT would assume
    for tensors and strides of contiguous [rows, heads, head_dim] inputs."""
    float32_pointers = {"lse_ptr", "delta_ptr"} | ({"dq_ptr"} if constants.get("BROADCAST_Q") else set())  # partials
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constants:
            signature[name] = "constexpr"
        elif name.endswith("offset_ptr"):
            signature[name] = "*i64"
        elif name.endswith("_ptr"):
            signature[name] = "*fp32" if name in float32_pointers else f"*{dtype}"
        elif name in ("qk_scale", "sm_scale"):
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
        if name not in constants and (name.endswith("_ptr") or name.startswith("stride")):
            attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, attrs


def compile_kernels(arch: int) -> dict[str, dict[str, bool]]:
    """Compiles every kernel for ``sm_<arch>``; per kernel: whether its PTX has wgmma and async copies."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels import triton_bwd, triton_fwd

    summary = {}
    for variant, dtype, head_dim, options in VARIANTS:
        blocks = 32 if dtype == "fp32" else 64
        shared = dict(HEAD_DIM=head_dim, BLOCK_D=triton.next_power_of_2(head_dim), GROUP_SIZE=2, IS_CAUSAL=options,
                      HAS_WINDOW=options, BROADCAST_Q=options, DOT_PRECISION="ieee" if dtype == "fp32" else "tf32",
                      BLOCK_M=blocks, BLOCK_N=blocks)  # fmt: skip
        kernels = {
            "fwd": (triton_fwd._jfa_fwd_kernel.fn, shared),
            "dkdv": (triton_bwd._jfa_bwd_dkdv_kernel.fn, shared),
            "dq": (triton_bwd._jfa_bwd_dq_kernel.fn, shared),
            "delta": (triton_bwd._jfa_bwd_delta_kernel, dict(HEAD_DIM=head_dim, BLOCK_D=shared["BLOCK_D"],
                                                             BLOCK_ROWS=64)),  # fmt: skip
        }
        for name, (kernel, constants) in kernels.items():
            signature, attrs = _signature(kernel, constants, dtype)
            source = ASTSource(kernel, signature, constants, attrs)
            options = dict(num_warps=4, num_stages=3)
            ptx = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options).asm["ptx"]
            summary[f"{variant}/{name}"] = {"wgmma": "wgmma.mma_async" in ptx, "async_copies": "cp.async" in ptx}
    return summary


@pytest.mark.parametrize("arch", [90, 80])
def test_kernels_compile_for_gpu_targets(arch: int) -> None:
    pytest.importorskip("triton.backends.nvidia")
    from tests.kernels.compiled_subprocess import run_without_interpreter

    result = run_without_interpreter([__file__, str(arch)], timeout=540)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(summary) == 4 * len(VARIANTS)
    if arch == 90:
        for kernel in ("fwd", "dkdv", "dq"):
            assert summary[f"bf16_d128/{kernel}"] == {"wgmma": True, "async_copies": True}, summary


if __name__ == "__main__":
    print(json.dumps(compile_kernels(int(sys.argv[1]))))
