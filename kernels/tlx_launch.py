"""Kernel launches for the tlx backend with less host time than `kernel[grid](...)`.

Triton's `JITFunction.run` binds the arguments, builds the specialisation key, looks the compiled
kernel up and then calls its launcher. On the H200 (fbtriton 3.7.4, `benchmarks.tlx_launch_probe`,
run 23) that costs 19-85 us per launch against 8-30 us for the launcher alone, and a PMA
forward+backward makes six launches: the fill-0.1 rows are host-bound.

`launch(fn, grid, *args, **kwargs)` takes the same arguments as `fn[grid](*args, **kwargs)`. It
keys the compiled kernel by what Triton specialises on: each runtime argument's
`native_specialize_impl` (the function Triton's binder calls: dtype and 16-byte alignment of a
tensor, i32/i64 and divisibility by 16 of an int, 1 as a constant, a TMA descriptor's dtype and
block), the constexpr values, the launch options and the device. The first launch of a key goes
through `fn[grid]` (compiling if needed) and keeps the kernel it returns; later ones call its
launcher directly. Launch hooks (profilers such as proton) and the interpreter take Triton's own
path every time. `VERIFY = True` (the GPU tests) checks every direct launch's kernel against the
one Triton itself would pick.
"""

from __future__ import annotations

from typing import Any

from triton import knobs
from triton.backends.compiler import BaseBackend
from triton.runtime import driver
from triton.runtime.jit import JITFunction

try:  # the C function Triton's generated binder calls (triton >= 3.4, fbtriton)
    from triton._C.libtriton import native_specialize_impl
except ImportError:  # pragma: no cover - an older Triton: every launch takes Triton's path
    native_specialize_impl = None

DIRECT = True   # False: every launch through `fn[grid]` (benchmarks.tlx_launch_probe compares)
VERIFY = False  # tests: assert that each direct launch runs the kernel Triton's run would pick

# fn -> (parameter names, their set, whether each is constexpr)
_SIGNATURES: dict[JITFunction, tuple[tuple[str, ...], frozenset[str], tuple[bool, ...]]] = {}
# launch key -> compiled kernel
_KERNELS: dict[tuple, Any] = {}


def _signature(fn: JITFunction):
    sig = _SIGNATURES.get(fn)
    if sig is None:
        names = tuple(fn.arg_names)
        sig = _SIGNATURES[fn] = (names, frozenset(names), tuple(p.is_constexpr for p in fn.params))
    return sig


def launch_key(fn: JITFunction, device: int, args: tuple, kwargs: dict) -> tuple:
    """(fn, device, launch options, per-parameter specialisation) of a launch; raises KeyError
    naming a parameter given neither positionally nor by keyword."""
    names, name_set, constexpr = _signature(fn)
    values = args + tuple(kwargs[name] for name in names[len(args):])
    options = tuple(sorted((k, v) for k, v in kwargs.items() if k not in name_set))
    spec = tuple(v if is_const else native_specialize_impl(BaseBackend, v, False, True, True)
                 for v, is_const in zip(values, constexpr))
    return (fn, device, options, spec), values


def launch(fn: JITFunction, grid: tuple[int, ...], *args, **kwargs) -> None:
    """`fn[grid](*args, **kwargs)`, through the compiled kernel's launcher once it is known."""
    if (not DIRECT or native_specialize_impl is None or not isinstance(fn, JITFunction)
            or knobs.runtime.launch_enter_hook or knobs.runtime.launch_exit_hook):
        fn[grid](*args, **kwargs)
        return
    device = driver.active.get_current_device()
    key, values = launch_key(fn, device, args, kwargs)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = fn[grid](*args, **kwargs)
        _KERNELS[key] = kernel.result() if hasattr(kernel, "result") else kernel
        return
    if VERIFY:
        picked = fn.run(*args, grid=grid, warmup=True, **kwargs)
        picked = picked.result() if hasattr(picked, "result") else picked
        if picked is not kernel:
            raise AssertionError(f"tlx_launch: {fn.__name__}: the cached kernel is not the one Triton "
                                 f"picks for these arguments (key {key[2:]})")
    grid = tuple(grid) + (1, 1)
    kernel.run(grid[0], grid[1], grid[2], driver.active.get_current_stream(device), kernel.function,
               kernel.packed_metadata, None, None, None, *values)


def clear() -> None:
    """Forget the compiled kernels (a test that recompiles with other knobs)."""
    _KERNELS.clear()

