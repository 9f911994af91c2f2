"""Does fbtriton's C launch path take the tlx backend's launches? (GPU, fbtriton)

    TRITON_ENABLE_C_CACHE=1 TRITON_USE_C_DISPATCHER=1 python -m benchmarks.c_dispatch_probe

fbtriton 3.7.4 can skip Python's `JITFunction.run` (C cache: key + lookup in C) and launch through
`cuLaunchKernelEx` from C (C dispatcher, built per compiled kernel from its `launch_metadata`).
Run 11 measured the fill-0.1 rows with both variables set and saw the Python launcher in the
profile, without knowing why. This runs a small PMA forward+backward a few times and reports, per
Triton kernel of the backend: whether the JIT function has the C cache on, whether each compiled
kernel carries launch metadata and got a C dispatcher, whether a grid proxy was created, and every
warning Triton raised; then the host time per call, and a trial of the positional-argument launch
that fbtriton's grid proxy needs (on the schedule kernel). The last line says `dispatcher engaged:
yes` only if every launched kernel has a dispatcher.
"""

from __future__ import annotations

import argparse
import logging
import os
import warnings

from benchmarks.jfa_profile import host_ms


def _jit_functions():
    """(name, JITFunction) of every Triton kernel the tlx backend launches."""
    from triton.runtime.jit import JITFunction

    from kernels import tlx_hopper_bwd, tlx_hopper_fwd, tlx_schedule

    for module in (tlx_hopper_fwd, tlx_hopper_bwd, tlx_schedule):
        for name, value in vars(module).items():
            if isinstance(value, JITFunction):
                yield f"{module.__name__.split('.')[-1]}.{name}", value


def _compiled(fn) -> list:
    kernels = []
    for caches in fn.device_caches.values():
        for kernel in caches[0].values():
            kernels.append(kernel.result() if hasattr(kernel, "result") else kernel)
    return kernels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20)  # few: the launch queue must not fill
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("c_dispatch_probe needs a CUDA device (and fbtriton)")
    import triton
    from triton import knobs
    from triton.runtime import jit

    from kernels import tlx_hopper
    from kernels.common import JFAParams

    print(f"triton {triton.__version__}; TRITON_ENABLE_C_CACHE={os.environ.get('TRITON_ENABLE_C_CACHE', '0')} "
          f"TRITON_USE_C_DISPATCHER={os.environ.get('TRITON_USE_C_DISPATCHER', '0')} "
          f"(knob {knobs.nvidia.use_triton_dispatcher}); native_create_jit_proxy "
          f"{'present' if getattr(jit, 'native_create_jit_proxy', None) is not None else 'missing'}")

    g = torch.Generator().manual_seed(0)
    B, q_len, max_kv, H, D = 64, 128, 256, 4, 128
    lens = torch.randint(1, max_kv + 1, (B,), generator=g)
    k_off = torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to("cuda", torch.int32)
    q = torch.randn(q_len, H, D, generator=g).to("cuda", torch.bfloat16)
    k = torch.randn(int(lens.sum()), H, D, generator=g).to("cuda", torch.bfloat16)
    v = torch.randn_like(k)
    params = JFAParams(max_seq_len_q=q_len, max_seq_len_kv=max_kv, sm_scale=None, causal=False,
                       window_size=None, broadcast_q=True, deterministic=False)
    do = torch.randn(B * q_len, H, D, generator=g).to("cuda", torch.bfloat16)

    def forward():
        return tlx_hopper.forward(q, k, v, None, k_off, params)

    def forward_backward():
        out, lse = forward()
        tlx_hopper.backward(do, q, k, v, out, lse, None, k_off, params)

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(f"log {record.name}: {record.getMessage()}")
    logging.getLogger("triton").addHandler(handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            forward_backward()
        torch.cuda.synchronize()
    records += [f"warning: {w.message}" for w in caught]

    engaged = True
    for name, fn in _jit_functions():
        kernels = _compiled(fn)
        if not kernels:
            continue
        proxies = len(getattr(fn, "_jit_proxy_cache", None) or {})
        for kernel in kernels:
            has_meta = "launch_metadata" in getattr(kernel, "asm", {})
            dispatcher = getattr(kernel, "_dispatcher", None) is not None
            engaged &= dispatcher
            print(f"{name}: c_cache={getattr(fn, 'c_cache', None)} launch_metadata={has_meta} "
                  f"dispatcher={dispatcher} grid proxies={proxies}")
    for line in dict.fromkeys(records):  # each distinct message once
        print(line)
    print(f"host ms per call (median of {args.calls} issued back to back): "
          f"forward {host_ms(forward, args.calls):.3f}, forward+backward {host_ms(forward_backward, args.calls):.3f}")
    _positional_proxy_trial(k_off, B, q_len, args.calls)
    print(f"dispatcher engaged: {'yes' if engaged else 'no'}")
    return 0


def _positional_proxy_trial(k_off, B: int, q_len: int, calls: int) -> None:
    """fbtriton's grid proxy takes positional arguments only (keyword launches fall back to
    Python); its autotuner reaches it by seeding the C cache once with the launch options and then
    launching positionally. Try that on the schedule kernel: same result, and the host time of
    both launch styles."""
    import torch

    from kernels.tlx_schedule import _build_launch, _jfa_schedule_kernel as fn

    if not getattr(fn, "c_cache", False):
        print("positional proxy trial: skipped (TRITON_ENABLE_C_CACHE is off)")
        return
    # the PMA forward's build (broadcast Q, one 128-row q-block, 64-key blocks) as build_schedule
    # launches it: its constexprs in signature order and its launch options
    constexprs, options = _build_launch(B, False, False, True, False, 128, 64, False, None, None)
    meta = dict(options)  # a copy: fbtriton keeps the one it is given
    names = fn.arg_names[-len(constexprs):]
    outs = [(torch.empty(B, device="cuda", dtype=torch.int64), torch.empty(1, device="cuda", dtype=torch.int32))
            for _ in range(2)]
    scalars = (B, q_len, 1, 0)
    positional = lambda out: (k_off, k_off, *out, *scalars, *constexprs)

    def keyword_launch():
        fn[(1,)](k_off, k_off, *outs[0], *scalars, **dict(zip(names, constexprs)), **meta)

    try:
        keyword_ms = host_ms(keyword_launch, calls)
        fn._fc_options_hash = hash(tuple(sorted(meta.items()))) & 0xFFFFFFFFFFFFFFFF  # as the autotuner
        fn._fc_meta_kwargs = meta
        fn._jit_proxy_cache = {}
        fn.run(*positional(outs[1]), grid=(1,), warmup=False, **meta)  # seeds the C cache
        launcher = fn[(1,)]

        def proxy_launch():
            launcher(*positional(outs[1]))

        proxy_ms = host_ms(proxy_launch, calls)
        torch.cuda.synchronize()
        same = all(torch.equal(a, b) for a, b in zip(*outs))
        print(f"positional proxy trial: {type(launcher).__name__}; host ms keyword {keyword_ms:.4f}, "
              f"positional {proxy_ms:.4f}; same schedule: {same}")
    except Exception as exc:  # a diagnosis, not a launch path: report and go on
        print(f"positional proxy trial failed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    raise SystemExit(main())
