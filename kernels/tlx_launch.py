"""Kernel launches for the tlx backend with less host time than `kernel[grid](...)`.

Triton's `JITFunction.run` binds the arguments, builds the specialisation key, looks the compiled
kernel up and then calls its launcher. On the H200 (fbtriton 3.7.4, `benchmarks.tlx_launch_probe`,
run 23) that costs 19-85 us per launch against 8-30 us for the launcher alone, and a PMA
forward+backward makes six launches: the fill-0.1 rows are host-bound. Through `launch` a launch
costs 16-38 us there (forward 212 -> 155 us of host time, backward 316 -> 228 us).

`launch(fn, grid, *args, **kwargs)` takes the same arguments as `fn[grid](*args, **kwargs)`. It
keys the compiled kernel by what Triton specialises on: the runtime arguments'
`native_specialize_impl` (the function Triton's binder calls: dtype and 16-byte alignment of a
tensor, i32/i64 and divisibility by 16 of an int, 1 as a constant), a TMA descriptor's dtype and
block, the constexpr values, the launch options, the call site and the device. The first launch
of a key goes through `fn[grid]` (compiling if needed) and keeps the kernel it returns; later ones
call its launcher directly. Launch hooks (profilers such as proton) and the interpreter take
Triton's own path every time. Like Triton's own C fast path, it assumes that the debug and
instrumentation knobs (which Triton adds to its key) do not change after the first launch.
`VERIFY = True` (the GPU tests) checks every direct launch's kernel against the one Triton itself
would pick.
"""

from __future__ import annotations

import operator
from typing import Any

from triton import knobs
from triton.backends.compiler import BaseBackend
from triton.runtime import driver
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

try:  # the C function Triton's generated binder calls (triton >= 3.4, fbtriton)
    from triton._C.libtriton import native_specialize_impl
except ImportError:  # pragma: no cover - an older Triton: every launch takes Triton's path
    native_specialize_impl = None

DIRECT = True   # False: every launch through `fn[grid]` (benchmarks.tlx_launch_probe compares)
VERIFY = False  # tests: assert that each direct launch runs the kernel Triton's run would pick

# (id(fn), #positional arguments, keyword names): a call site's getters, built on its first launch
_SITES: dict[tuple, tuple] = {}
# launch key -> compiled kernel
_KERNELS: dict[tuple, Any] = {}


def _getter(keys):
    """container -> tuple of container[k] for k in keys (a C-speed itemgetter, always a tuple)."""
    keys = tuple(keys)
    if not keys:
        return lambda container: ()
    if len(keys) == 1:
        k = keys[0]
        return lambda container: (container[k],)
    return operator.itemgetter(*keys)


def _desc_spec(value) -> tuple:
    """A TMA descriptor's specialisation (Triton's `tensordesc<dtype[block]>`) read in Python:
    `native_specialize_impl` takes ~2 us per descriptor; anything else goes to it."""
    if type(value) is TensorDescriptor:
        return (value.base.dtype, *value.block_shape)
    return native_specialize_impl(BaseBackend, value, False, True, True)


def _site(fn: JITFunction, args: tuple, kwargs: dict) -> tuple:
    """A call site's (key, keyword parameters' getter, options' getter, constexpr getter, getter of
    the runtime values that held TMA descriptors on its first launch, getter of the others)."""
    kw_names = tuple(kwargs)
    site_key = (id(fn), len(args), kw_names)
    site = _SITES.get(site_key)
    if site is None:
        names = tuple(fn.arg_names)
        for name in names[len(args):]:
            if name not in kw_names:
                raise KeyError(name)
        values = args + tuple(kwargs[name] for name in names[len(args):])
        runtime = [i for i, p in enumerate(fn.params) if not p.is_constexpr]
        descs = [i for i in runtime if type(values[i]) is TensorDescriptor]
        site = _SITES[site_key] = (
            site_key, _getter(names[len(args):]), _getter(sorted(k for k in kw_names if k not in names)),
            _getter(i for i, p in enumerate(fn.params) if p.is_constexpr),
            _getter(descs), _getter(i for i in runtime if i not in descs))
    return site


def launch_key(fn: JITFunction, device: int, args: tuple, kwargs: dict) -> tuple:
    """(call site, device, launch options, constexpr values, the runtime values' specialisation)
    of a launch, and every parameter's value in order; raises KeyError naming a parameter given
    neither positionally nor by keyword. Per launch this is a few C calls and one Python call per
    TMA descriptor: the other runtime values go to `native_specialize_impl` as one tuple, and a
    JITFunction is never hashed (its __hash__ is Python)."""
    site_key, kw_values, options, const_values, desc_values, other_values = _site(fn, args, kwargs)
    values = args + kw_values(kwargs)
    spec = (tuple(map(_desc_spec, desc_values(values))),
            native_specialize_impl(BaseBackend, other_values(values), False, True, True))
    return (site_key, device, options(kwargs), const_values(values), spec), values


def trailing_constexprs(fn: JITFunction, values: dict[str, Any]) -> tuple:
    """values (constexpr name -> value) in fn's signature order, for a launcher that computes them
    once per configuration and passes them positionally after the runtime arguments (no keyword
    dict built and unpacked per launch); a RuntimeError if fn's last parameters are not exactly
    those names."""
    names = fn.arg_names[-len(values):]
    if sorted(names) != sorted(values):
        raise RuntimeError(f"{fn.__name__}'s last parameters {names} are not the constexprs "
                           f"passed, {sorted(values)}")
    return tuple(values[name] for name in names)


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
