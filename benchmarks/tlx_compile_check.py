"""Cross-compile the TLX Hopper kernels for sm_90 without a GPU and report resources.

    /work/venv-tlx/bin/python -m benchmarks.tlx_compile_check [--dump DIR] [--only SUBSTR] [--timeline]
        [--bound VARIANT] [--exact] [--json]

Needs fbtriton (Triton + TLX) importable; no GPU needed. For each variant prints registers, spills,
shared memory, and counts of wgmma / TMA / mbarrier-wait / named-barrier instructions in the PTX, so a
variant that lost its wgmma (or gained spills) shows before any device time is spent. --exact takes
--only as ';'-separated whole variant names; --json prints one JSON object per variant instead
(`tests/benchmarks/test_tlx_compile_check.py` holds the benchmark rows' kernels to their budgets).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import triton
from triton.backends.compiler import GPUTarget

TARGET = GPUTarget("cuda", 90, 128)
# Pointer arguments marked 16-byte aligned, as the JIT specialises torch allocations at launch
# (vectorised stores). --unaligned reproduces the pre-2026-11-29 numbers (scalar stores: ~190 spills
# in the D=128 dK/dV pass that the launched kernel does not have).
ALIGNED_PTRS = True
PTX_WORDS = ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait", "bar.sync",
             "bar.arrive", "setmaxnreg", "red.global", "atom.global", "cp.reduce.async.bulk")


def _tdesc(dt, rows, cols):
    return f"tensordesc<{dt}[{rows},{cols}]>"


def fwd_variants(overrides: dict | None = None):
    """The forward's kernel variants, each with `fwd_config`'s choice (FwdConfig fields replaced by
    `overrides`, as `--fwd-config` gives them)."""
    import dataclasses

    from kernels.common import JFAParams
    from kernels.tlx_hopper import fwd_config, with_split_tiles

    for d, dt, causal, window, bcast, q_len in itertools.product(
            (64, 128), ("bf16", "fp16"), (False, True), (False, True), (False, True), (128, 192, 100)):
        if not bcast and q_len != 128:
            continue
        if dt == "fp16" and (causal or window):
            continue  # dtype does not change control flow; keep the list short
        if q_len == 100 and (causal or window or dt == "fp16"):
            continue  # q_len not a multiple of 64 (slices straddling it): one variant per head dim
        for keys in ("", "long", "short"):
            choice = dict(long_kv=keys == "long", short_kv=keys == "short",
                          mask_free=not (causal or window))
            if keys and fwd_config(d, bcast, q_len, **choice) == fwd_config(
                    d, bcast, q_len, mask_free=choice["mask_free"]):
                continue  # only broadcast Q at D=128 has key-length choices (long: q_len <= 128)
            cfg = dataclasses.replace(fwd_config(d, bcast, q_len, **choice), **(overrides or {}))
            if bcast:  # a self/cross-only field: the launcher refuses it with broadcast_q
                cfg = dataclasses.replace(cfg, skip_idle_groups=False)
            name = (f"fwd d{d} {dt} causal={int(causal)} window={int(window)} bcast={int(bcast)}"
                    f" q{q_len if bcast else '-'} G{cfg.num_groups} BN{cfg.block_n}"
                    + (f" {keys}" if keys else ""))
            yield name, cfg, d, dt, causal, window, bcast, q_len if bcast else 0
            shift = bcast and not (causal or window) and not cfg.shift_tail
            if shift:  # the shifted tail where the configuration leaves it off (by default: D = 64)
                yield (name + " shift", dataclasses.replace(cfg, shift_tail=True), d, dt, causal,
                       window, bcast, q_len)
            if bcast:  # the launcher's split tiles where a resident call takes them (overrides too)
                params = JFAParams(max_seq_len_q=q_len, max_seq_len_kv=1024, sm_scale=None, causal=causal,
                                   window_size=16 if window else None, broadcast_q=True)
                split = with_split_tiles(cfg, q_len, 4, 132, params)
                if split.split_tiles:
                    yield name + " split", split, d, dt, causal, window, bcast, q_len
                    if shift:
                        yield (name + " split shift", dataclasses.replace(split, shift_tail=True),
                               d, dt, causal, window, bcast, q_len)


def compile_fwd(cfg, d, dt, causal, window, bcast, q_len, timeline=False, kernel=None):
    """The forward variant; timeline: the diagnostic build that writes `tlx_timeline`'s stamps;
    kernel: another build of jfa_fwd_kernel's source (`tlx_fwd_bound`'s timing-only variants)."""
    from kernels.tlx_hopper import fwd_constexprs, fwd_q_box
    from kernels.tlx_hopper_fwd import jfa_fwd_kernel

    q_box = fwd_q_box(cfg)  # as the launcher's descriptors
    sig = {
        "desc_q": _tdesc(dt, q_box, d), "desc_k": _tdesc(dt, cfg.block_n, d),
        "desc_v": _tdesc(dt, cfg.block_n, d), "desc_o": _tdesc(dt, q_box, d), "out_ptr": f"*{dt}",
        "lse_ptr": "*fp32",
        "q_off": "*i32", "k_off": "*i32", "tile_entry": "*i64", "n_entries": "*i32",
        "sm_scale": "fp32", "window": "i32", "B": "i32", "H": "i32", "G": "i32", "q_len": "i32",
        "NUM_MB": "i32", "total_out": "i32", "ctas_per_pair": "i32", "tile_window": "i32",
    }
    if timeline:
        sig.update(timeline="*i64", timeline_stride="i32")
    # the broadcast variants are resident ones (heads * q-blocks <= CTAs at the bench's shapes)
    const = fwd_constexprs(cfg, d, causal, window, bcast, bcast, q_len, timeline)
    if not timeline:  # the launcher passes None: no parameter at all in the default build
        const.update(timeline=None, timeline_stride=None)
    return _compile(kernel or jfa_fwd_kernel, sig, const)


def _compile(fn, sig: dict, const: dict):
    """fn compiled for sm_90 with its runtime arguments typed by sig and the constexprs const (4
    warps per group, as the launchers)."""
    sig.update({k: "constexpr" for k in const})
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=_pointer_attrs(fn, sig))
    return triton.compile(src, target=TARGET, options=dict(num_warps=4, num_stages=1))


def _pointer_attrs(fn, sig):
    """What the JIT specialises for torch allocations: every pointer 16-byte aligned (None: off)."""
    if not ALIGNED_PTRS:
        return None
    return {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k, v in sig.items() if v.startswith("*")}


def _resources(k):
    """(registers, stack, shared, local, spilled words "STL/LDL", SASS instruction count, SASS)
    from cuobjdump's resource usage and disassembly of the cubin."""
    import re
    import subprocess
    import tempfile

    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        res = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True)
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res.stdout)
    spill = f"{len(re.findall(r'STL', sass))}/{len(re.findall(r'LDL', sass))}"
    # the code size: instruction fetch stalls grow with it (run 18)
    n_sass = len(re.findall(r"^\s+/\*[0-9a-f]{4,6}\*/", sass, re.M))
    return (m.groups() if m else ("?", "?", "?", "?")) + (spill, n_sass, sass)


def bwd_variants():
    for d, causal, window, bcast, q_len in itertools.product(
            (64, 128), (False, True), (False, True), (False, True), (128, 192)):
        if q_len == 192 and not bcast:
            continue
        for kern in ("dkdv", "dq"):
            if kern == "dkdv" and q_len == 192:
                continue  # the dk/dv pass does not depend on q_len
            yield (f"bwd-{kern} d{d} bf16 causal={int(causal)} window={int(window)} "
                   f"bcast={int(bcast)} q{q_len}"), kern, d, causal, window, bcast, q_len
    yield "bwd-pma d128 bf16 bcast=1 q128", "pma", 128, False, False, True, 128  # BwdConfig.pma_roles
    yield "bwd-pma-shared d128 bf16 bcast=1 q192", "pma_shared", 128, False, False, True, 192  # pma_shared_roles


def compile_bwd(kern, d, causal, window, bcast, dt="bf16", q_len=128, overrides: dict | None = None):
    import dataclasses

    from kernels.tlx_hopper import _check_config, bwd_config, fuses_dq
    from kernels.tlx_hopper_bwd import jfa_bwd_dkdv_kernel, jfa_bwd_dq_kernel

    cfg = dataclasses.replace(bwd_config(d, bcast, q_len, num_heads=4, num_sms=132), **(overrides or {}))
    sig = {"desc_q": _tdesc(dt, 64, d), "desc_do": _tdesc(dt, 64, d), "desc_k": _tdesc(dt, 64, d),
           "desc_v": _tdesc(dt, 64, d)}
    if kern in ("pma", "pma_shared"):  # the one-pass broadcast_q backwards
        if kern == "pma":
            from kernels.tlx_hopper_bwd_pma import jfa_bwd_pma_kernel as fn

            sig.update({"desc_dk": _tdesc(dt, 64, d), "desc_part": _tdesc("fp32", 64, d),
                        "desc_o": _tdesc(dt, 64, d)})
            const = dict(HEAD_DIM=d, NUM_BUF_K=cfg.pma_buf_k, NUM_BUF_V=cfg.pma_buf_v,
                         NUM_BUF_PS=cfg.pma_buf_ps, SCORE_REGS=cfg.pma_score_regs,
                         GRAD_REGS=cfg.pma_grad_regs, FOLD_DELTA=cfg.pma_fold_delta,
                         DK_STAGE=cfg.pma_dk_stage, SPLIT_PS=cfg.pma_split_ps,
                         DK_EARLY=cfg.pma_dk_early, DV_IN_DK_STAGE=cfg.pma_dv_in_dk_stage)
        else:
            from kernels.tlx_hopper_bwd_pma_shared import jfa_bwd_pma_shared_kernel as fn

            _check_config(cfg, d)
            sig.update({"desc_dk": _tdesc(dt, 64, d), "desc_dv": _tdesc(dt, 64, d),
                        "desc_part": _tdesc("fp32", 64, d)})
            const = dict(HEAD_DIM=d, NUM_BUF_K=cfg.pma_buf_k, NUM_BUF_V=cfg.pma_buf_v)
        sig.update({"dk_ptr": f"*{dt}", "dv_ptr": f"*{dt}", "lse_ptr": "*fp32",
                    "delta_ptr": "*fp32", "k_off": "*i32", "tile_entry": "*i64", "n_entries": "*i32",
                    "sm_scale": "fp32", "B": "i32", "H": "i32", "q_len": "i32", "total_out": "i32"})
        return _compile(fn, sig, const)
    if kern == "dkdv":
        fn = jfa_bwd_dkdv_kernel
        sig.update({"desc_dk": _tdesc(dt, 64, d), "desc_dv": _tdesc(dt, 64, d),
                    "desc_dq": _tdesc("fp32", 64, d // 2),
                    "dk_ptr": f"*{dt}", "dv_ptr": f"*{dt}"})
        ints = ("window", "B", "HKV", "G", "q_len", "NUM_NB", "total_out", "tile_window")
        _check_config(cfg, d)
        fused = fuses_dq(cfg, d, bcast, deterministic=False)
        const = dict(HEAD_DIM=d, NUM_BUF_Q=cfg.dkdv_buf_q, CONSUMER_REGS=cfg.dkdv_regs,
                     CAUSAL=causal, HAS_WINDOW=window, BROADCAST_Q=bcast,
                     TMA_EPILOGUE=cfg.dkdv_tma_store, FUSED_DQ=fused,
                     EARLY_Q_RELEASE=cfg.dkdv_early_q_release)
    else:
        fn = jfa_bwd_dq_kernel
        sig["desc_k"] = sig["desc_v"] = _tdesc(dt, cfg.dq_block_n, d)
        sig["desc_part"] = _tdesc("fp32", 64, d) if bcast else _tdesc(dt, 64, d)
        sig.update({"dq_ptr": "*fp32" if bcast else f"*{dt}", "dq_acc_ptr": "*fp32"})
        ints = ("window", "B", "H", "G", "q_len", "NUM_MB", "total_out", "ctas_per_pair", "tile_window")
        const = dict(HEAD_DIM=d, BLOCK_N=cfg.dq_block_n, NUM_GROUPS=cfg.dq_groups,
                     NUM_BUF_KV=cfg.dq_buf_kv, CONSUMER_REGS=cfg.dq_regs, CAUSAL=causal,
                     HAS_WINDOW=window, BROADCAST_Q=bcast, RESIDENT=bcast)
    sig.update({"lse_ptr": "*fp32", "delta_ptr": "*fp32", "q_off": "*i32", "k_off": "*i32",
                "tile_entry": "*i64", "n_entries": "*i32", "sm_scale": "fp32"})
    sig.update({k: "i32" for k in ints})
    return _compile(fn, sig, const)


def report(name, k, dump=None, as_json=False):
    ptx = k.asm["ptx"]
    regs, stack, _, local, spill, n_sass, sass = _resources(k)
    if as_json:
        stores, loads = spill.split("/")
        print(json.dumps(dict(name=name, regs=int(regs), spill_stores=int(stores),
                              spill_loads=int(loads), smem=k.metadata.shared, sass=n_sass,
                              hgmma=sass.count("HGMMA"),
                              full_waits=sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x0"))), flush=True)
        return
    counts = " ".join(f"{w.split('.')[0] if w != 'wgmma.mma_async' else 'wgmma'}="
                      f"{ptx.count(w)}" for w in PTX_WORDS if ptx.count(w))
    # ptxas serialises every wgmma of a kernel when one accumulator is redefined while in flight
    # (C7515): then each HGMMA is followed by a full wait, e.g. 56 of 56 in the first split-role pass
    counts += f" | HGMMA={sass.count('HGMMA')} full_waits={sass.count('WARPGROUP.DEPBAR.LE gsb0, 0x0')}"
    print(f"{name}: regs={regs} stack={stack} STL/LDL={spill} smem={k.metadata.shared} "
          f"warps={k.metadata.num_warps} sass={n_sass} | {counts}", flush=True)
    if dump:
        os.makedirs(dump, exist_ok=True)
        fn = name.replace(" ", "_").replace("=", "")
        for ext in ("ttgir", "ptx"):
            with open(os.path.join(dump, f"{fn}.{ext}"), "w") as f:
                f.write(k.asm[ext])
        with open(os.path.join(dump, f"{fn}.sass"), "w") as f:
            f.write(sass)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump")
    ap.add_argument("--only", default="")
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="compile the forward with these FwdConfig fields replaced (as tlx_hopper_bench --ab)")
    ap.add_argument("--bwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="with --bwd: these BwdConfig fields replaced (as tlx_hopper_bench --ab-bwd)")
    ap.add_argument("--unaligned", action="store_true",
                    help="do not mark pointers 16-byte aligned (the JIT does at launch)")
    ap.add_argument("--timeline", action="store_true",
                    help="the forward's diagnostic build writing tlx_timeline's stamps")
    ap.add_argument("--bound", metavar="VARIANT",
                    help="a timing-only forward of benchmarks.tlx_fwd_bound (nomath, nostore)")
    ap.add_argument("--exact", action="store_true",
                    help="--only is a ';'-separated list of whole variant names")
    ap.add_argument("--json", action="store_true", help="one JSON object per variant")
    args = ap.parse_args()
    names = set(args.only.split(";")) if args.exact else None
    wanted = (lambda name: name in names) if args.exact else (lambda name: args.only in name)
    global ALIGNED_PTRS
    ALIGNED_PTRS = not args.unaligned
    failed = 0
    if not args.bwd:
        from benchmarks.tlx_hopper_bench import parse_overrides
        from kernels.tlx_hopper import FwdConfig

        overrides = parse_overrides(args.fwd_config, FwdConfig, "--fwd-config")
        kernel = None
        if args.bound:
            from benchmarks.tlx_fwd_bound import variant_kernel

            kernel = variant_kernel(args.bound)
        for name, cfg, d, dt, causal, window, bcast, q_len in fwd_variants(overrides):
            if not wanted(name):
                continue
            t = time.time()
            try:
                k = compile_fwd(cfg, d, dt, causal, window, bcast, q_len, args.timeline, kernel)
            except Exception as exc:  # report and continue with the next variant
                failed += 1
                print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
                continue
            report(name if args.json else f"{name} ({time.time() - t:.1f}s)", k, args.dump, args.json)
    else:
        from benchmarks.tlx_hopper_bench import parse_overrides
        from kernels.tlx_hopper import BwdConfig

        overrides = parse_overrides(args.bwd_config, BwdConfig, "--bwd-config")
        for name, kern, d, causal, window, bcast, q_len in bwd_variants():
            if not wanted(name):
                continue
            t = time.time()
            try:
                k = compile_bwd(kern, d, causal, window, bcast, q_len=q_len, overrides=overrides)
            except Exception as exc:
                failed += 1
                print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:3000]}", flush=True)
                continue
            report(name if args.json else f"{name} ({time.time() - t:.1f}s)", k, args.dump, args.json)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
