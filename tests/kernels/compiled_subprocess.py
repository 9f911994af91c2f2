"""Running Python with the Triton interpreter off, from a test session that has it on.

Compiling a kernel for a GPUTarget needs no device, but in-process it would run through the
interpreter that the CPU test session selects when triton is first imported (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_without_interpreter(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    """`python ARGS` from the repository root, importable as from it, TRITON_INTERPRET unset."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *args], env=env, cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout)
