"""The kernels the benchmark rows launch, compiled for sm_90 on the CPU (`benchmarks.tlx_compile_check`:
fbtriton's compiler and ptxas, no GPU): each compiles, fits the 227 KB of shared memory a block may
opt into, keeps its wgmmas pipelined (ptxas serialises every HGMMA of a kernel, each followed by a
full wait, when an accumulator is redefined in flight: run 22's first split-role pass) and spills
no more words than it does today. A change that adds a spill to a hot kernel fails here before
any device time is spent; lower a budget when a change removes spills, raise it only with the
A/B that shows the cost is worth it.

Runs under fbtriton (`.ci/tlx_tests`); the compiles run in subprocesses without TRITON_INTERPRET.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton.language.extra.tlx")

REPO = Path(__file__).resolve().parents[2]
MAX_SHARED = 232_448  # bytes of shared memory an sm_90 block may opt into

# variant name -> (spilled words stored, loaded) as compiled today (fbtriton 3.7.4), by bench row
FORWARD = {
    "fwd d128 bf16 causal=0 window=0 bcast=1 q192 G3 BN32 short": (0, 0),      # PMA q192 fill 0.1
    "fwd d128 bf16 causal=0 window=0 bcast=1 q192 G3 BN64": (0, 0),            # PMA q192 fill 0.5 / 0.9
    # PMA q128 fill 0.1 (4 / 6 before the shifted tail became its default: run 47 timed it so; 5 / 7
    # before one block body per consumer: run 51 timed it so, 2.8 % faster on the H200)
    "fwd d128 bf16 causal=0 window=0 bcast=1 q128 G2 BN32 short split": (6, 8),
    "fwd d128 bf16 causal=0 window=0 bcast=1 q128 G2 BN64": (0, 0),            # PMA q128 fill 0.5
    "fwd d128 bf16 causal=0 window=0 bcast=1 q128 G2 BN128 long": (0, 0),      # PMA q128 fill 0.9
    "fwd d128 bf16 causal=0 window=0 bcast=0 q- G2 BN128": (1, 6),             # self, dense
}
BACKWARD = {
    "bwd-pma d128 bf16 bcast=1 q128": (3, 4),            # PMA q128: the split-role pass
    "bwd-pma-shared d128 bf16 bcast=1 q192": (60, 63),   # PMA q192: the shared-role pass
    "bwd-dkdv d128 bf16 causal=0 window=0 bcast=0 q128": (1, 1),  # self, dense: dK/dV (+ fused dQ)
    "bwd-dq d128 bf16 causal=0 window=0 bcast=0 q128": (0, 0),    # deterministic dQ pass
}


def _compile(names: dict, *flags: str) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    res = subprocess.run([sys.executable, "-m", "benchmarks.tlx_compile_check", *flags, "--exact",
                          "--json", "--only", ";".join(names)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {row["name"]: row for row in map(json.loads, res.stdout.splitlines())}


@pytest.mark.parametrize("names,flags", [(FORWARD, ()), (BACKWARD, ("--bwd",))],
                         ids=["forward", "backward"])
def test_benchmark_kernels_compile_within_their_budgets(names, flags):
    built = _compile(names, *flags)
    assert sorted(built) == sorted(names)  # every one compiled (a failure exits non-zero)
    for name, (stores, loads) in names.items():
        k = built[name]
        assert k["smem"] <= MAX_SHARED, (name, k["smem"])
        assert k["hgmma"] > 0 and k["full_waits"] < k["hgmma"] // 4, (name, k)  # pipelined wgmma
        assert k["spill_stores"] <= stores and k["spill_loads"] <= loads, \
            (name, "spilled words", k["spill_stores"], k["spill_loads"], "budget", stores, loads)
