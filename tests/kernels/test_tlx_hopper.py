"""GPU tests of the TLX Hopper JFA backend against an fp32 PyTorch computation (sm_90 only).

Skipped cleanly on CPU, on a non-Hopper GPU, or when fbtriton (TLX) is not importable.
Every case draws fresh random jagged inputs (empty and max-length sequences included), poisons the
outputs with NaN before the kernel runs, and compares forward (out, lse) and, where the backward
exists, (dq, dk, dv) with the reference, with tolerances tied to the precision.

Also runnable as a script on the device, sharded over processes so that compilation runs in parallel
and a hang (barrier bug) only stalls one shard:

    python tests/kernels/test_tlx_hopper.py --shard 3/8 [--bwd] [--grid]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import time
import zlib
from dataclasses import dataclass

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


DEVICE = "cuda"  # where make_inputs puts tensors (the CPU self-check of the reference uses "cpu")


def _tlx_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs CUDA"
    if torch.cuda.get_device_capability() != (9, 0):
        return "needs an sm_90 GPU"
    from kernels import tlx_hopper

    return tlx_hopper._tlx_import_error()


# ------------------------------------------------------------------------------------------
# cases and the fp32 reference
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    mode: str              # "self" | "cross" | "bcast"
    B: int
    max_q: int             # max query length (bcast: q_len)
    max_kv: int
    hq: int = 2
    hkv: int = 2
    d: int = 128
    dtype: str = "bf16"
    causal: bool = False
    window: int | None = None
    lens: str = "random"   # "random" (with 0 and max forced in) | "full" | "empty_kv" | "empty_q" | "one"
                           # | "long" (keys in [max/2, max], 0 and max forced in)
                           # | "skew" (keys up to max/16, every 16th sequence near max)
    grid: int | None = None  # force the persistent grid size (None: one CTA per SM)

    @property
    def name(self) -> str:
        m = ("c" if self.causal else "") + (f"w{self.window}" if self.window is not None else "")
        return (f"{self.mode}-B{self.B}-q{self.max_q}-kv{self.max_kv}-h{self.hq}x{self.hkv}-d{self.d}"
                f"-{self.dtype}-{m or 'nomask'}-{self.lens}" + (f"-grid{self.grid}" if self.grid else ""))

    def variant(self) -> str:  # what selects a compiled kernel (shards group by it)
        bq = self.max_q if self.mode == "bcast" else 0
        return f"{self.d}{self.dtype}{self.causal}{self.window is not None}{self.mode == 'bcast'}{bq}"


def _lengths(n: int, max_len: int, how: str, g: torch.Generator) -> list[int]:
    if how == "full":
        return [max_len] * n
    if how == "one":
        return [1] * n
    if how == "skew":  # short keys (up to max/16) with every 16th sequence near max: a short mean
        ls = torch.randint(0, max_len // 16 + 1, (n,), generator=g).tolist()
        for i in range(1, n, 16):
            ls[i] = max_len - int(torch.randint(0, 8, (1,), generator=g))
        ls[0] = 0
        return ls
    # "long": in [max/2, max] (with the empty and the full one: a mean >= max/2 for n >= 10)
    ls = torch.randint(max_len // 2 if how == "long" else 0, max_len + 1, (n,), generator=g).tolist()
    if n >= 3:
        ls[0], ls[1] = 0, max_len
    return ls


def make_inputs(case: Case, seed: int):
    g = torch.Generator().manual_seed(seed)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[case.dtype]
    k_lens = _lengths(case.B, case.max_kv, case.lens if case.lens in ("full", "one", "long", "skew")
                      else "random", g)
    if case.lens == "empty_kv":
        k_lens = [0] * case.B
    if case.mode == "bcast":
        q_lens = [case.max_q] * case.B
    elif case.mode == "self":
        q_lens = list(k_lens)
    else:
        q_lens = _lengths(case.B, case.max_q, "full" if case.lens == "full" else
                          ("one" if case.lens == "one" else "random"), g)
    if case.lens == "empty_q" and case.mode != "bcast":
        q_lens = [0] * case.B
    dev = DEVICE
    off = lambda ls: torch.tensor([0] + ls, dtype=torch.int64).cumsum(0).to(dev, torch.int32)
    k_off = off(k_lens)
    q_off = None if case.mode == "bcast" else off(q_lens)
    rows_q = case.max_q if case.mode == "bcast" else sum(q_lens)
    q = torch.randn(rows_q, case.hq, case.d, generator=g).to(dev, dt)
    k = torch.randn(sum(k_lens), case.hkv, case.d, generator=g).to(dev, dt)
    v = torch.randn(sum(k_lens), case.hkv, case.d, generator=g).to(dev, dt)
    return q, k, v, q_off, k_off, q_lens, k_lens


def reference(q, k, v, q_lens, k_lens, case: Case, scale: float):
    """fp32 attention over padded batches; autograd-safe for fully masked rows."""
    dev = q.device
    B, hq, hkv, d = len(k_lens), q.shape[1], k.shape[1], q.shape[2]
    bcast = case.mode == "bcast"
    Lq = case.max_q if bcast else max(q_lens, default=0)
    Lk = max(k_lens, default=0)
    ql = torch.tensor(q_lens, device=dev)
    kl = torch.tensor(k_lens, device=dev)
    i = torch.arange(Lq, device=dev)
    j = torch.arange(max(Lk, 1), device=dev)
    q_start = torch.tensor([0] + q_lens, device=dev).cumsum(0)[:-1]
    k_start = torch.tensor([0] + k_lens, device=dev).cumsum(0)[:-1]
    q_ok = i[None, :] < ql[:, None]                                   # [B, Lq]
    k_ok = j[None, :] < kl[:, None]                                   # [B, Lk]
    qf, kf, vf = q.float(), k.float(), v.float()
    if bcast:
        Qp = qf[None].expand(B, Lq, hq, d)
    else:
        q_idx = torch.where(q_ok, q_start[:, None] + i[None, :], 0)
        Qp = qf[q_idx] if qf.shape[0] else torch.zeros(B, Lq, hq, d, device=dev)
    k_idx = torch.where(k_ok, k_start[:, None] + j[None, :], 0)
    if kf.shape[0]:
        Kp, Vp = kf[k_idx], vf[k_idx]
    else:
        Kp = Vp = torch.zeros(B, j.numel(), hkv, d, device=dev)
    G = hq // hkv
    Kp, Vp = Kp.repeat_interleave(G, dim=2), Vp.repeat_interleave(G, dim=2)
    S = torch.einsum("bqhd,bkhd->bhqk", Qp, Kp) * scale
    vis = k_ok[:, None, None, :] & torch.ones(1, 1, Lq, 1, dtype=torch.bool, device=dev)
    if case.causal:
        vis = vis & (j[None, None, None, :] <= i[None, None, :, None])
    if case.window is not None:
        vis = vis & ((i[None, None, :, None] - j[None, None, None, :]).abs() <= case.window)
    any_vis = vis.any(-1)                                             # [B, 1, Lq]
    S = S.masked_fill(~vis, float("-inf"))
    lse_raw = torch.logsumexp(torch.where(any_vis[..., None], S, torch.zeros_like(S)), -1)
    P = torch.exp(S - lse_raw[..., None])
    O = torch.einsum("bhqk,bkhd->bqhd", P, Vp)
    lse = torch.where(any_vis, lse_raw, torch.full_like(lse_raw, float("-inf")))
    if bcast:
        out = O.reshape(B * Lq, hq, d)
        lse_o = lse.permute(1, 0, 2).reshape(hq, B * Lq)
    else:
        out = O[q_ok]                                                 # [total_q, H, D]
        lse_o = lse.permute(1, 0, 2)[:, q_ok]
    return out, lse_o


def _params(case: Case, scale: float):
    from kernels.common import JFAParams

    return JFAParams(max_seq_len_q=case.max_q, max_seq_len_kv=case.max_kv, sm_scale=scale,
                     causal=case.causal, window_size=case.window,
                     broadcast_q=case.mode == "bcast", deterministic=False)


def _rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-6)).item()


@contextlib.contextmanager
def persistent_grid(n: int | None):
    """The TLX launchers' persistent grid forced to n CTAs inside the block (None: one per SM)."""
    from kernels import tlx_hopper

    tlx_hopper.GRID_OVERRIDE = n
    try:
        yield
    finally:
        tlx_hopper.GRID_OVERRIDE = None


def check_forward(case: Case, seed: int = 0, inputs=None, overrides: dict | None = None) -> dict:
    """(out, lse) against the reference; inputs: make_inputs' tuple (default: make_inputs(case,
    seed)); overrides: FwdConfig fields changed from `fwd_config`'s choice."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, q_lens, k_lens = inputs or make_inputs(case, seed)
    scale = 1.0 / math.sqrt(case.d)
    params = _params(case, scale)
    config = None
    if overrides:
        config = dataclasses.replace(tlx_hopper.call_fwd_config(q, k, k_off, params), **overrides)
    tlx_hopper.POISON_OUTPUTS = True
    with persistent_grid(case.grid):
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=config)
    torch.cuda.synchronize()
    ref_out, ref_lse = reference(q, k, v, q_lens, k_lens, case, scale)
    res = {"case": case.name, "pass": "fwd"}
    errs = []
    if torch.isnan(out).any() or torch.isnan(lse).any():
        errs.append(f"NaN/unwritten: out {int(torch.isnan(out).any(-1).any(-1).sum())} rows, "
                    f"lse {int(torch.isnan(lse).sum())}")
    dead = torch.isinf(ref_lse)
    if not torch.equal(torch.isinf(lse), dead):
        errs.append(f"-inf lse mismatch: {int((torch.isinf(lse) != dead).sum())}")
    if dead.any():
        dead_rows = dead.t()                                          # [rows, H]
        if out[dead_rows].abs().max().item() != 0:
            errs.append("rows with no visible key are not 0")
    if out.numel():
        res["out_rel"] = _rel(out, ref_out)
        # per row too (not a pass criterion here): one wrongly scaled row hides in a whole norm
        res["row_rel_max"] = ((out.float() - ref_out).norm(dim=-1)
                              / ref_out.norm(dim=-1).clamp_min(1e-3)).max().item()
        live = ~dead
        res["lse_max_abs"] = (lse[live] - ref_lse[live]).abs().max().item() if live.any() else 0.0
        if not res["out_rel"] < 1.2e-2:
            errs.append(f"out rel err {res['out_rel']:.2e}")
        if not res["lse_max_abs"] < 3e-2:
            errs.append(f"lse max abs err {res['lse_max_abs']:.2e}")
    res["ok"] = not errs
    res["errors"] = errs
    return res


def check_backward(case: Case, seed: int = 0, overrides: dict | None = None) -> dict:
    """(dq, dk, dv) against fp32 autograd through the reference; overrides: BwdConfig fields
    changed from `bwd_config`'s choice."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, q_lens, k_lens = make_inputs(case, seed)
    scale = 1.0 / math.sqrt(case.d)
    params = _params(case, scale)
    config = dataclasses.replace(tlx_hopper_config(case), **overrides) if overrides else None
    tlx_hopper.POISON_OUTPUTS = True
    with persistent_grid(case.grid):
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
        g = torch.Generator(device=q.device).manual_seed(seed + 1)
        do = torch.randn(out.shape, generator=g, device=q.device, dtype=out.dtype)
        dq, dk, dv = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params, config=config)
        torch.cuda.synchronize()
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref_out, _ = reference(qf, kf, vf, q_lens, k_lens, case, scale)
    (ref_out * do.float()).sum().backward()
    res = {"case": case.name, "pass": "bwd" + "".join(f" {k}={v}" for k, v in (overrides or {}).items())}
    errs = []
    grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in (qf, kf, vf)]
    for name, got, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), grads):
        if got.shape != ref.shape or got.dtype != q.dtype:
            errs.append(f"{name} shape/dtype {tuple(got.shape)} {got.dtype}")
            continue
        if torch.isnan(got).any():
            errs.append(f"{name} NaN/unwritten in {int(torch.isnan(got).any(-1).any(-1).sum())} rows")
        if got.numel() and ref.norm() > 0:
            res[f"{name}_rel"] = _rel(got, ref)
            if not res[f"{name}_rel"] < 2e-2:
                errs.append(f"{name} rel err {res[f'{name}_rel']:.2e}")
        elif got.numel() and not got.float().abs().max().item() < 2e-2:
            # e.g. length-1 sequences: dS = dO.v - dO.o is 0 in exact arithmetic, rounding here
            errs.append(f"{name} should be ~0, max abs {got.float().abs().max().item():.2e}")
    res["ok"] = not errs
    res["errors"] = errs
    return res


def tlx_hopper_config(case: Case):
    """`bwd_config`'s choice for a case (the base the switches change)."""
    from kernels import tlx_hopper

    bcast = case.mode == "bcast"
    return tlx_hopper.bwd_config(case.d, bcast, case.max_q if bcast else 0, case.hq, 132)


def check_bwd_determinism(case: Case, grids=(1, 3, 7), config=None) -> dict:
    """dK, dV (and non-broadcast dQ) bitwise identical for any grid size; all three run to run."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, *_ = make_inputs(case, 2)
    params = dataclasses.replace(_params(case, 1.0 / math.sqrt(case.d)), deterministic=True)
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    do = torch.randn_like(out)
    base = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params, config=config)
    again = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params, config=config)
    bad = [n for n, a, b in zip("dq dk dv".split(), base, again) if not torch.equal(a, b)]
    for g in grids:
        with persistent_grid(g):
            other = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params, config=config)
        names = ("dk", "dv") if case.mode == "bcast" else ("dq", "dk", "dv")
        bad += [f"{n}@grid{g}" for n, a, b in zip("dq dk dv".split(), base, other)
                if n in names and not torch.equal(a, b)]
    torch.cuda.synchronize()
    return {"case": case.name, "pass": "bwd-det", "ok": not bad, "errors": bad}


def check_grid_determinism(case: Case, grids=(1, 3, 7)) -> dict:
    """Forward bitwise identical for any persistent grid size (phase/scheduling bugs show)."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, *_ = make_inputs(case, 1)
    params = _params(case, 1.0 / math.sqrt(case.d))
    base = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    bad = []
    for g in grids:
        with persistent_grid(g):
            o, l = tlx_hopper.forward(q, k, v, q_off, k_off, params)
        if not (torch.equal(o, base[0]) and torch.equal(l, base[1])):
            bad.append(g)
    torch.cuda.synchronize()
    return {"case": case.name, "pass": "grid", "ok": not bad, "errors": [f"grid {g}" for g in bad]}


def check_o_store_paths(case: Case, seed: int = 0) -> dict:
    """The forward with O by TMA store equals the one storing O with tl.store, bit for bit (only the
    store differs; both run with poisoned outputs, so a slice neither path wrote shows as NaN)."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, _, _ = make_inputs(case, seed)
    params = _params(case, 1.0 / math.sqrt(case.d))
    bcast = case.mode == "bcast"  # TMA store from its own O staging tiles (D=128; the test forces it at D=64)
    cfg = tlx_hopper.fwd_config(case.d, bcast, case.max_q if bcast else 0)
    tlx_hopper.POISON_OUTPUTS = True
    with persistent_grid(case.grid):
        outs = [tlx_hopper.forward(q, k, v, q_off, k_off, params,
                                   config=dataclasses.replace(cfg, tma_store_o=tma))
                for tma in (True, False)]
    torch.cuda.synchronize()
    (o_tma, lse_tma), (o_st, lse_st) = outs
    errs = []
    if torch.isnan(o_tma).any() or torch.isnan(lse_tma).any():
        errs.append("NaN/unwritten rows with the TMA store")
    if not (torch.equal(o_tma, o_st) and torch.equal(lse_tma, lse_st)):
        errs.append(f"TMA-store O differs from tl.store O: max abs {(o_tma.float() - o_st.float()).abs().max().item():.3e}")
    return {"case": case.name, "pass": "ostore", "ok": not errs, "errors": errs}


def fwd_cases() -> list[Case]:
    C = []
    for d in (64, 128):
        for causal, window in ((False, None), (True, None), (False, 37), (True, 100)):
            C.append(Case("self", 40, 300, 300, 2, 2, d, "bf16", causal, window))
            C.append(Case("cross", 40, 200, 333, 4, 2, d, "bf16", causal, window))
            C.append(Case("bcast", 300, 192, 260, 2, 1, d, "bf16", causal, window))
            C.append(Case("bcast", 100, 128, 300, 3, 3, d, "bf16", causal, window))
        C.append(Case("self", 20, 400, 400, 4, 4, d, "fp16"))
        C.append(Case("bcast", 50, 192, 200, 2, 2, d, "fp16"))
        C.append(Case("bcast", 60, 300, 200, 2, 2, d, "bf16"))        # 3 q-blocks of 128
        C.append(Case("bcast", 60, 1, 100, 2, 2, d, "bf16"))          # q_len 1
        C.append(Case("bcast", 50, 100, 129, 2, 2, d, "bf16", True))  # q_len < 128
        C.append(Case("self", 30, 256, 256, 2, 2, d, "bf16", lens="full"))
        C.append(Case("cross", 30, 100, 100, 2, 2, d, "bf16", lens="empty_kv"))
        C.append(Case("cross", 30, 100, 100, 2, 2, d, "bf16", lens="empty_q"))
        C.append(Case("self", 30, 100, 100, 2, 2, d, "bf16", lens="one"))
    return C + long_key_cases() + short_key_cases()


def short_key_cases() -> list[Case]:
    """Broadcast Q at D=128 with a mean key length below `tlx_hopper.SHORT_KV_MEAN`: the launcher's
    32-key blocks (q_len 128 / 192 / 100 / 300, causal, windowed, GQA, fp16, sequences without keys,
    a grid of 3 CTAs walking hundreds of tiles each)."""
    return [Case("bcast", 200, 128, 200, 2, 2), Case("bcast", 200, 192, 150, 3, 1),
            Case("bcast", 100, 100, 99, 2, 2, 128, "fp16"),
            Case("bcast", 100, 128, 200, 2, 2, 128, "bf16", True),
            Case("bcast", 100, 192, 200, 2, 2, 128, "bf16", False, 45),
            Case("bcast", 60, 300, 120, 2, 2), Case("bcast", 50, 128, 100, 2, 2, lens="empty_kv"),
            Case("bcast", 300, 192, 90, 2, 2, grid=3)]


def split_tiles_cases() -> list[Case]:
    """Broadcast Q with q_len 128 and short keys, where `FwdConfig.split_tiles` runs: odd lengths,
    sequences without keys (0 to 33 keys: many), all sequences one key long, fp16, GQA, a grid of 3
    CTAs walking hundreds of tiles each (an odd count leaves one group a tile more), more CTAs
    than tiles (the second group idle), and a short mean with a few ~1000-key sequences (a group
    steps over the other's 32-block tiles, four times the K/V ring)."""
    return [Case("bcast", 200, 128, 200, 2, 2), Case("bcast", 64, 128, 33, 2, 2),
            Case("bcast", 120, 128, 150, 4, 2, 128, "fp16"), Case("bcast", 301, 128, 90, 2, 2, grid=3),
            Case("bcast", 40, 128, 60, 2, 2, lens="one"), Case("bcast", 7, 128, 200, 2, 2),
            Case("bcast", 100, 128, 1000, 2, 2, lens="skew"),
            Case("bcast", 100, 128, 1000, 2, 2, lens="skew", grid=3)]


def shift_tail_cases() -> list[Case]:
    """Broadcast Q without a mask at each key block size, where `FwdConfig.shift_tail` runs: the
    split tile's 32-key blocks (its cases: lengths around the block size, one-key sequences,
    sequences without keys, a grid of 3, skewed lengths), the ping-pong tile's 64-key blocks (q192's
    three groups, q_len 100, GQA, fp16, a grid of 3), D=64's 128-key blocks and the long keys'."""
    return [*split_tiles_cases(), Case("bcast", 100, 192, 300, 3, 3),
            Case("bcast", 80, 100, 130, 2, 2, 128, "fp16"),
            Case("bcast", 90, 128, 300, 4, 2, 128, "bf16", grid=3),
            Case("bcast", 60, 128, 300, 2, 2, 64), Case("bcast", 10, 128, 1500, 2, 2, lens="long"),
            Case("bcast", 10, 100, 1500, 4, 2, 128, "fp16", lens="long")]


def long_key_cases() -> list[Case]:
    """Broadcast Q (q_len <= 128, D=128) with a mean key length above `tlx_hopper.LONG_KV_MEAN`:
    the launcher's 128-key blocks (odd lengths, q_len not a multiple of 64, causal, GQA, fp16)."""
    return [Case("bcast", 10, 128, 1500, 2, 2, 128, "bf16", lens="long"),
            Case("bcast", 10, 100, 1500, 2, 2, 128, "fp16", lens="long"),
            Case("bcast", 10, 128, 1500, 2, 2, 128, "bf16", True, lens="long"),
            Case("bcast", 10, 64, 1500, 4, 2, 128, "bf16", lens="long")]


def bwd_cases() -> list[Case]:
    """Backward cases; at D=128 the default fuses dQ into the dK/dV pass (`BwdConfig.fused_dq`):
    odd lengths (steps straddling qlen reduce-add zeros into the neighbour's rows, keys past klen
    masked), GQA, masks, fp16, empty and length-1 sequences, broadcast Q (q 1/64/128/192/300), small grids
    (many tiles per CTA: the held-slot protocols)."""
    C = []
    for d in (64, 128):
        for causal, window in ((False, None), (True, None), (False, 37), (True, 100)):
            C.append(Case("self", 30, 300, 300, 2, 2, d, "bf16", causal, window))
            C.append(Case("cross", 30, 200, 333, 4, 2, d, "bf16", causal, window))
            C.append(Case("bcast", 200, 192, 260, 2, 1, d, "bf16", causal, window))
        C.append(Case("self", 20, 400, 400, 4, 4, d, "fp16"))
        C.append(Case("bcast", 100, 128, 300, 3, 3, d, "bf16"))
        C.append(Case("bcast", 60, 300, 200, 2, 2, d, "bf16"))          # 3 q-blocks
        C.append(Case("bcast", 60, 192, 200, 2, 2, d, "bf16", grid=3))  # more pairs than CTAs
        C.append(Case("cross", 30, 100, 100, 2, 2, d, "bf16", lens="empty_kv"))
        C.append(Case("self", 30, 100, 100, 2, 2, d, "bf16", lens="one"))
    return C + [Case("cross", 40, 333, 200, 4, 1, 128, "bf16", True),
                Case("self", 40, 300, 300, 2, 2, 128, "bf16", False, 37, grid=3),
                Case("cross", 30, 100, 100, 2, 2, 128, "bf16", lens="empty_q"),
                Case("bcast", 150, 192, 260, 4, 2, 128, "bf16"),       # GQA: 2 q heads per CTA
                Case("bcast", 80, 128, 300, 4, 4, 128, "bf16", grid=3),  # more KV heads than CTAs
                Case("bcast", 100, 64, 200, 2, 2, 128, "bf16"),  # one 64-row step per KV tile
                Case("bcast", 60, 1, 150, 2, 2, 128, "bf16"),    # one query row
                Case("bcast", 2, 128, 100, 2, 2, 128, "bf16")]   # fewer tiles than CTAs


def tail_cases() -> list[Case]:
    """Self/cross cases whose last q-blocks leave a consumer group without rows (lengths not
    multiples of 64), for `skip_idle_groups`."""
    return [Case("self", 40, 300, 300, 2, 2, 128, "bf16"), Case("self", 40, 300, 300, 2, 2, 64, "bf16", True),
            Case("self", 40, 300, 300, 4, 2, 128, "bf16", False, 37),
            Case("self", 40, 333, 333, 2, 2, 128, "bf16", True, 100),
            Case("cross", 40, 200, 333, 4, 2, 128, "bf16"), Case("cross", 40, 200, 333, 2, 2, 128, "fp16", True),
            Case("self", 30, 100, 100, 2, 2, 128, "bf16", lens="one"),
            Case("cross", 30, 100, 100, 2, 2, 128, "bf16", lens="empty_q")]


def pma_off(*switches: str) -> dict[str, bool]:
    """Overrides turning these split-role switches off, with every switch that builds on one of them
    (`tlx_hopper.PMA_SWITCH_NEEDS`)."""
    from kernels.tlx_hopper import PMA_SWITCH_NEEDS

    off = set(switches)
    while more := {s for s, needed in PMA_SWITCH_NEEDS.items() if needed in off} - off:
        off |= more
    return dict.fromkeys(sorted(off), False)


# the backward's switches away from `bwd_config`'s choice, each checked on its cases (pytest and
# the sharded script's passes)
BWD_SWITCHES = {
    # D=128 without the fused dQ: the dq pass, as deterministic=True and D=64 take it (here with its
    # non-deterministic atomics where broadcast_q has more pairs than CTAs)
    "bwd-two-pass": ({"fused_dq": False}, lambda: [c for c in bwd_cases() if c.d == 128]),
    # the fused pass's Q/dO slot released at the other point (bwd_config: early for self/cross,
    # late for broadcast_q; D=128: the fused cases)
    "bwd-early-q-release": ({"dkdv_early_q_release": True},
                            lambda: [c for c in bwd_cases() if c.d == 128 and c.mode == "bcast"]),
    "bwd-late-q-release": ({"dkdv_early_q_release": False},
                           lambda: [c for c in bwd_cases() if c.d == 128 and c.mode != "bcast"]),
    # broadcast_q q_len 65-128 without the split-role pass (bwd_config takes it there): the fused one
    "bwd-no-pma-roles": ({"pma_roles": False}, lambda: [c for c in pma_roles_cases() + bwd_cases()
                                                        if c.d == 128 and c.mode == "bcast"]),
    # its other ring split (two K and two V slots, two P^T/dS^T slots: the same shared memory;
    # with two K slots only with the preprocess kernel's delta)
    "bwd-pma-kv2": ({"pma_buf_k": 2, "pma_buf_v": 2, "pma_buf_ps": 2, "pma_fold_delta": False,
                     **pma_off("pma_dk_stage")},
                    lambda: pma_roles_cases()),
    # the split-role pass with the preprocess kernel's delta (bwd_config: it sums delta itself from O
    # rows sent through its K and V rings)
    "bwd-pma-preprocess": ({"pma_fold_delta": False}, lambda: pma_roles_cases()),
    # other K and V ring depths, with and without the O rows' turn of the rings
    "bwd-pma-k4-v2": ({"pma_buf_k": 4, "pma_buf_v": 2, **pma_off("pma_dk_stage")},
                      lambda: pma_roles_cases()),
    "bwd-pma-k4-v1-preprocess": ({"pma_buf_k": 4, "pma_buf_v": 1, "pma_fold_delta": False},
                                 lambda: pma_roles_cases()),
    # dK staged over the P^T tiles with dV (bwd_config: in a tile of its own), three V slots
    "bwd-pma-no-dk-stage": ({**pma_off("pma_dk_stage"), "pma_buf_v": 3},
                            lambda: pma_roles_cases()),
    # P^T handed over with dS^T on one barrier per slot (bwd_config: P^T on barriers of its own)
    "bwd-pma-no-split-ps": (pma_off("pma_split_ps"), lambda: pma_roles_cases()),
    # dK's wgmmas issued after dV's epilogue, once P^T went back (bwd_config: before it)
    "bwd-pma-dk-late": ({"pma_dk_early": False}, lambda: pma_roles_cases()),
    # dV staged over the P^T tiles, which go back after its epilogue (bwd_config: P^T back before
    # dV's epilogue, dV staged in dK's tile)
    "bwd-pma-dv-over-pt": ({"pma_dv_in_dk_stage": False}, lambda: pma_roles_cases()),
    # broadcast_q q_len 129-192 without the shared-role pass (bwd_config takes it there): the fused
    # dK/dV pass
    "bwd-no-pma-shared-roles": ({"pma_shared_roles": False}, lambda: pma_shared_cases()),
    # its other ring split (two K and three V slots)
    "bwd-pma-shared-k2-v3": ({"pma_buf_k": 2, "pma_buf_v": 3}, lambda: pma_shared_cases()[:4]),
}


def pma_roles_cases() -> list[Case]:
    """Broadcast cases the split-role pass takes (64 < q_len <= 128, Hq == Hkv, no mask, D=128):
    a second step straddling q_len (q_len 100, and 65: one real row; its rows past q_len read the
    next element's dO), random key lengths with 0 and the maximum among them (a last tile of 1 or
    2 keys with max 65 / 130), all 1, all one full tile, fp16, long sequences (a batch element
    over many 64-key tiles), a grid of 2 (every batch element of a head on one CTA: the rings'
    phases over hundreds of tiles) and of 5 (two CTAs per head, one idle)."""
    return [Case("bcast", 120, 100, 300, 2, 2, 128, "bf16"),
            Case("bcast", 200, 128, 130, 3, 3, 128, "fp16"),
            Case("bcast", 64, 65, 1000, 4, 4, 128, "bf16"),
            Case("bcast", 100, 128, 65, 2, 2, 128, "bf16"),
            Case("bcast", 90, 128, 200, 2, 2, 128, "bf16", lens="empty_kv"),
            Case("bcast", 90, 128, 200, 2, 2, 128, "bf16", lens="one"),
            Case("bcast", 40, 128, 64, 2, 2, 128, "bf16", lens="full"),
            Case("bcast", 150, 128, 333, 2, 2, 128, "bf16", grid=2),
            Case("bcast", 150, 100, 260, 2, 2, 128, "bf16", grid=5)]


def pma_shared_cases() -> list[Case]:
    """Broadcast cases the shared-role pass takes (128 < q_len <= 192, Hq == Hkv, no mask, D=128): a
    third step straddling q_len (150, and 129: one real row; its rows past q_len read the next
    element's dO, or past the last element's, TMA's zeros), random key lengths with 0 and the
    maximum among them (a last tile of 1 or 2 keys with max 65 / 130), all 1, all one full tile,
    fp16, long sequences (a batch element over many 64-key tiles: every gradient role many
    times), a grid of 2 (every element of a head on one CTA: the single-slot phases over hundreds
    of tiles) and of 7 (two CTAs per head of three, the seventh SM idle)."""
    return [Case("bcast", 120, 192, 300, 3, 3, 128, "bf16"),
            Case("bcast", 200, 150, 130, 2, 2, 128, "fp16"),
            Case("bcast", 64, 129, 1000, 2, 2, 128, "bf16"),
            Case("bcast", 100, 192, 65, 2, 2, 128, "bf16"),
            Case("bcast", 90, 192, 200, 2, 2, 128, "bf16", lens="empty_kv"),
            Case("bcast", 90, 192, 200, 2, 2, 128, "bf16", lens="one"),
            Case("bcast", 40, 192, 64, 2, 2, 128, "bf16", lens="full"),
            Case("bcast", 150, 192, 333, 2, 2, 128, "bf16", grid=2),
            Case("bcast", 150, 170, 260, 3, 3, 128, "bf16", grid=7)]


def bwd_det_cases() -> list[Case]:
    return [Case("self", 30, 300, 300, 4, 2, 128, "bf16", True),
            Case("bcast", 200, 192, 300, 3, 3, 128, "bf16", False, 50)]


def o_store_cases() -> list[Case]:
    # odd lengths (slices straddling qlen take tl.store), empty and length-1 sequences, GQA, masks;
    # broadcast Q (its own staging tiles, each reused for every batch element of a CTA: grids of
    # 2-3 reuse them dozens of times): 2 and 3 groups, q_len 100 (the second group's slice
    # straddles it) and multiples of 64 (every slice by TMA, zeros of empty key sequences too; at
    # q_len 64 the second group has no rows), D=64 (128-key blocks), short and empty key
    # sequences, GQA, fp16
    return [Case("self", 40, 300, 300, 4, 2, 128, "bf16", True), Case("cross", 40, 200, 333, 4, 2, 64),
            Case("self", 30, 256, 256, 2, 2, 128, "fp16", lens="full"),
            Case("cross", 30, 100, 100, 2, 2, 128, "bf16", False, 37, lens="one"),
            Case("bcast", 120, 128, 200, 2, 2, 128, "bf16", grid=3),
            Case("bcast", 100, 192, 150, 3, 3, 128, "bf16", grid=2),
            Case("bcast", 80, 100, 130, 2, 2, 128, "fp16"),
            Case("bcast", 60, 128, 300, 2, 2, 64, "bf16", True, grid=3),
            Case("bcast", 90, 128, 100, 4, 2, 128, "bf16", lens="empty_kv", grid=3),
            Case("bcast", 90, 192, 100, 3, 3, 64, "bf16", lens="one"),
            Case("bcast", 70, 64, 150, 2, 2, 128, "bf16", grid=3)]  # the second group stores nothing


def grid_cases() -> list[Case]:
    return [Case("self", 40, 300, 300, 4, 2, 128, "bf16", True), Case("bcast", 200, 192, 300, 3, 3),
            Case("cross", 40, 200, 333, 2, 2, 64, "bf16", False, 37)]


# ------------------------------------------------------------------------------------------
# pytest
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def _needs_tlx():
    reason = _tlx_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", fwd_cases(), ids=lambda c: c.name)
def test_forward(case):
    res = check_forward(case, seed=zlib.crc32(case.name.encode()))
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.parametrize("case", long_key_cases(), ids=lambda c: c.name)
def test_long_key_cases_take_128_key_blocks(case):
    """The long-key forward cases do exercise the launcher's 128-key broadcast configuration."""
    from kernels import tlx_hopper

    q, k, _, _, k_off, _, _ = make_inputs(case, zlib.crc32(case.name.encode()))
    assert tlx_hopper.call_fwd_config(q, k, k_off, _params(case, 1.0)).block_n == 128


@pytest.mark.gpu
@pytest.mark.parametrize("case", short_key_cases(), ids=lambda c: c.name)
def test_short_key_cases_take_32_key_blocks(case):
    """The short-key forward cases do exercise the launcher's 32-key broadcast configuration."""
    from kernels import tlx_hopper

    q, k, _, _, k_off, _, _ = make_inputs(case, zlib.crc32(case.name.encode()))
    assert tlx_hopper.call_fwd_config(q, k, k_off, _params(case, 1.0)).block_n == 32


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", grid_cases(), ids=lambda c: c.name)
def test_forward_any_grid_size(case):
    res = check_grid_determinism(case)
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", o_store_cases(), ids=lambda c: c.name)
def test_forward_o_store_paths_agree(case):
    res = check_o_store_paths(case, seed=zlib.crc32(case.name.encode()))
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["self", "cross"])
def test_forward_config_o_store_rule(mode):
    from kernels import tlx_hopper

    case = Case(mode, 4, 64, 64)
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    cfg = dataclasses.replace(tlx_hopper.fwd_config(case.d, False, 0), num_buf_q=1)
    with pytest.raises(ValueError, match=r"tma_store_o with self/cross attention needs num_buf_q >= 2"):
        tlx_hopper.forward(q, k, v, q_off, k_off, _params(case, 0.1), config=cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("tile_window", [-1, 2.0, None])
def test_config_tile_window_rule(tile_window):
    from kernels import tlx_hopper

    case = Case("self", 4, 64, 64)
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    params = _params(case, 0.1)
    fwd_cfg = dataclasses.replace(tlx_hopper.fwd_config(case.d, False, 0), tile_window=tile_window)
    with pytest.raises(ValueError, match=r"tlx FwdConfig: tile_window must be an int >= 0"):
        tlx_hopper.forward(q, k, v, q_off, k_off, params, config=fwd_cfg)
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    bwd_cfg = dataclasses.replace(tlx_hopper.BwdConfig(), tile_window=tile_window)
    with pytest.raises(ValueError, match=r"tlx BwdConfig: tile_window must be an int >= 0"):
        tlx_hopper.backward(torch.ones_like(out), q, k, v, out, lse, q_off, k_off, params, config=bwd_cfg)


@pytest.mark.gpu
def test_skip_idle_groups_rule():
    from kernels import tlx_hopper

    case = Case("bcast", 4, 128, 64)
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    cfg = dataclasses.replace(tlx_hopper.fwd_config(case.d, True, case.max_q), skip_idle_groups=True)
    with pytest.raises(ValueError, match=r"skip_idle_groups needs self/cross attention"):
        tlx_hopper.forward(q, k, v, q_off, k_off, _params(case, 0.1), config=cfg)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", tail_cases(), ids=lambda c: c.name)
def test_skipping_idle_groups_changes_no_stored_value(case):
    """A skipped warpgroup's rows lie past the sequence and are never stored; the others compute
    exactly as without the skip: the default forward (skip on) against the reference, and
    bit-identical to skip_idle_groups=False."""
    from kernels import tlx_hopper

    res = check_forward(case, seed=zlib.crc32(case.name.encode()))
    assert res["ok"], res
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    params = _params(case, 1 / math.sqrt(case.d))
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    default = tlx_hopper.fwd_config(case.d, False, 0, tlx_hopper.call_tile_window(k, params))
    assert default.skip_idle_groups
    no_skip = dataclasses.replace(default, skip_idle_groups=False)
    out_n, lse_n = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=no_skip)
    assert torch.equal(out, out_n) and torch.equal(lse, lse_n)


def flip_cases() -> list[Case]:
    # PMA q<=128 (late cast by default), PMA q192 and self/cross (early by default); causal and
    # windowed masks (a window >= 64 lets a first block be whole for some q-blocks only), GQA, odd
    # lengths (masked tail blocks), q_len < 128, sequences without keys, D=64
    return [Case("bcast", 100, 128, 300, 3, 3), Case("bcast", 50, 100, 129, 2, 2, 128, "bf16", True),
            Case("bcast", 60, 128, 200, 2, 2, 128, "fp16", False, 37),
            Case("bcast", 300, 192, 260, 2, 1), Case("self", 40, 300, 300, 4, 2, 128, "bf16", True),
            Case("self", 30, 400, 400, 2, 2, 128, "bf16", False, 100),
            Case("cross", 30, 100, 100, 2, 2, 128, "bf16", lens="empty_kv"),
            Case("cross", 30, 200, 333, 4, 2, 64, "bf16", True, 100),
            Case("self", 40, 333, 333, 2, 2, 64, "bf16"), long_key_cases()[0], short_key_cases()[0],
            short_key_cases()[1]]


# FwdConfig fields whose two values compute the same O and LSE bit for bit: each only moves work
# or synchronisation (the P cast after the next QK^T's issue; the K/V slots' release by every
# thread instead of after a warpgroup sync; the launch at the schedule build's start; the first
# block's mask under a run-time branch instead of a choice between two copies)
FWD_IDENTITY_SWITCHES = ("late_p_cast", "warp_arrive", "pdl", "first_branch")


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("field", FWD_IDENTITY_SWITCHES)
@pytest.mark.parametrize("case", flip_cases(), ids=lambda c: c.name)
def test_forward_switch_changes_no_value(case, field):
    """The default forward against the reference, and bit-identical with the switch flipped."""
    from kernels import tlx_hopper

    res = check_forward(case, seed=zlib.crc32(case.name.encode()))
    assert res["ok"], res
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    params = _params(case, 1 / math.sqrt(case.d))
    default = tlx_hopper.call_fwd_config(q, k, k_off, params)
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=default)
    flipped = dataclasses.replace(default, **{field: not getattr(default, field)})
    if flipped.split_tiles and flipped.late_p_cast:
        # split tiles need the early cast: the late one runs in the ping-pong tile, which computes
        # the same values (test_split_tiles_changes_no_value)
        flipped = dataclasses.replace(flipped, split_tiles=False)
    out_f, lse_f = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=flipped)
    assert torch.equal(out, out_f) and torch.equal(lse, lse_f)


def _switch_against_reference(case: Case, overrides: dict):
    """A forward switch's first check: the case with `overrides` against the reference
    (`check_forward`, inputs seeded by the case's name); then what the bit-identity half of its
    test needs: (inputs, params, the launcher's configuration for the case)."""
    from kernels import tlx_hopper

    inputs = make_inputs(case, zlib.crc32(case.name.encode()))
    res = check_forward(case, inputs=inputs, overrides=overrides)
    assert res["ok"], res
    q, k, _, _, k_off, _, _ = inputs
    params = _params(case, 1 / math.sqrt(case.d))
    with persistent_grid(case.grid):
        default = tlx_hopper.call_fwd_config(q, k, k_off, params)
    return inputs, params, default


def _assert_bit_identical(case: Case, inputs, params, config, other) -> None:
    """A forward switch's second check: the forward with `config` and with `other` (on the case's
    grid) give the same O and LSE bit for bit."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, _, _ = inputs
    with persistent_grid(case.grid):
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=config)
        out_o, lse_o = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=other)
    assert torch.equal(out, out_o) and torch.equal(lse, lse_o)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", split_tiles_cases(), ids=lambda c: c.name)
def test_split_tiles_changes_no_value(case):
    """FwdConfig.split_tiles (each group a whole tile; the launcher's choice here) against the
    reference, and bit-identical with the ping-pong tile it replaces (with its late P cast): every
    row sees the same wgmma and softmax sequence."""
    from kernels import tlx_hopper

    inputs, params, default = _switch_against_reference(case, dict(tlx_hopper.SPLIT_TILE_FIELDS))
    assert default.split_tiles  # the launcher takes it for these calls
    pingpong = dataclasses.replace(default, split_tiles=False, late_p_cast=True)
    _assert_bit_identical(case, inputs, params, default, pingpong)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", [*split_tiles_cases(), Case("bcast", 23, 128, 90, 2, 2, grid=3)],
                         ids=lambda c: c.name)
def test_swap_pairs_changes_no_value(case):
    """FwdConfig.swap_pairs (a CTA's tiles 0, 1, 3, 2, 4, 5, 7, 6, ...) against the reference, and
    bit-identical with the heaviest-first order: a tile's computation does not depend on its
    position. The added case walks 23 tiles per CTA: the last pair (22, 23) is swapped, so tile 22
    runs only at the extra, 24th position."""
    inputs, params, default = _switch_against_reference(case, {"swap_pairs": True})
    _assert_bit_identical(case, inputs, params, default, dataclasses.replace(default, swap_pairs=True))


@pytest.mark.gpu
def test_swap_pairs_refuses_what_it_cannot_run():
    _assert_refused(split_tiles_cases()[0], {"swap_pairs": True, "split_tiles": False,
                                             "late_p_cast": True}, "swap_pairs needs split_tiles")


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", shift_tail_cases(), ids=lambda c: c.name)
def test_tail_branch_changes_no_value(case):
    """FwdConfig.tail_branch (the shifted last block run by the bulk loop, its mask under a
    run-time branch) against the reference, and bit-identical with the shifted tail in a loop of
    its own: the same mask on the same block, no mask elsewhere."""
    inputs, params, default = _switch_against_reference(case, {"shift_tail": True,
                                                               "tail_branch": True})
    shifted = dataclasses.replace(default, shift_tail=True)
    _assert_bit_identical(case, inputs, params, dataclasses.replace(shifted, tail_branch=False),
                          dataclasses.replace(shifted, tail_branch=True))


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", shift_tail_cases(), ids=lambda c: c.name)
def test_shift_tail(case):
    """FwdConfig.shift_tail (a sequence's partial last K/V block loaded ending at its last key)
    against the reference (the launcher's choice at D = 128: asserted)."""
    _, _, default = _switch_against_reference(case, {"shift_tail": True})
    assert default.shift_tail == (case.d == 128)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", [Case("bcast", 60, 128, 100, 2, 2), Case("bcast", 60, 128, 400, 2, 2),
                                  Case("bcast", 30, 128, 1500, 2, 2, lens="long")],
                         ids=lambda c: c.name)
def test_shift_tail_reads_no_row_of_the_next_sequence(case):
    """With every odd sequence's V infinite, an even sequence of block_n keys or more keeps its
    rows bit for bit under shift_tail (it reads none of the next sequence's rows), while the
    default forward's padded tail block turns some of them NaN (p = 0 times inf): the switch is
    what moves the loads."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, _, k_lens = make_inputs(case, zlib.crc32(case.name.encode()))
    params = _params(case, 1 / math.sqrt(case.d))
    # the unshifted forward, whichever the launcher's default (tail_branch, which the split tile
    # brings, runs the shifted tail only: off with it; run 52 found the test refused without this)
    chosen = tlx_hopper.call_fwd_config(q, k, k_off, params)
    default = dataclasses.replace(chosen, shift_tail=False, tail_branch=False)
    shifted = dataclasses.replace(chosen, shift_tail=True)
    poisoned = v.clone()
    for b in range(1, case.B, 2):
        poisoned[int(k_off[b]):int(k_off[b + 1])] = float("inf")
    kept = [b for b in range(0, case.B, 2) if k_lens[b] >= default.block_n or k_lens[b] == 0]
    padded = [b for b in kept if k_lens[b] % default.block_n and b + 1 < case.B and k_lens[b + 1]]
    assert padded, "the case needs an even sequence with a partial tail before a poisoned one"
    rows = lambda bs: torch.cat([torch.arange(b * case.max_q, (b + 1) * case.max_q) for b in bs])
    out_clean, lse_clean = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=shifted)
    out, lse = tlx_hopper.forward(q, k, poisoned, q_off, k_off, params, config=shifted)
    assert torch.equal(out[rows(kept)], out_clean[rows(kept)])
    assert torch.equal(lse[:, rows(kept)], lse_clean[:, rows(kept)])
    out_d, _ = tlx_hopper.forward(q, k, poisoned, q_off, k_off, params, config=default)
    assert torch.isnan(out_d[rows(padded)]).any()


def _assert_refused(case: Case, fields: dict, match: str) -> None:
    """The launcher's configuration for the case with `fields` changed is refused with the
    ValueError matching `match` (its rule), not run."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    params = _params(case, 1 / math.sqrt(case.d))
    with persistent_grid(case.grid):
        config = dataclasses.replace(tlx_hopper.call_fwd_config(q, k, k_off, params), **fields)
        with pytest.raises(ValueError, match=match):
            tlx_hopper.forward(q, k, v, q_off, k_off, params, config=config)


@pytest.mark.gpu
def test_tail_branch_refuses_a_call_without_the_shifted_tail():
    _assert_refused(Case("bcast", 20, 128, 100, 2, 2, 128, "bf16", True),
                    {"shift_tail": False, "tail_branch": True}, "tail_branch needs shift_tail")


@pytest.mark.gpu
def test_shift_tail_refuses_masks_and_own_queries():
    """shift_tail is refused with its rule where a tile's blocks may start past key 0 or its masked
    blocks are not only the last: causal broadcast Q, self-attention."""
    for case in (Case("bcast", 20, 128, 100, 2, 2, 128, "bf16", True), Case("self", 20, 100, 100)):
        _assert_refused(case, {"shift_tail": True},
                        "shift_tail needs broadcast_q without a causal or window")


@pytest.mark.gpu
def test_split_tiles_refuses_a_call_it_cannot_run():
    """A mask (here causal) is refused with the rule, not computed without it."""
    from kernels import tlx_hopper

    _assert_refused(Case("bcast", 20, 128, 100, 2, 2, 128, "bf16", True),
                    dict(tlx_hopper.SPLIT_TILE_FIELDS), "split_tiles needs no causal or window mask")


def timeline_cases() -> list[Case]:
    """Broadcast calls whose every tile record is predictable: the split tile (one record per tile;
    a grid of 3 walking ~200 tiles each), three groups in ping-pong (q192: one record per group
    and tile), odd lengths and sequences without keys."""
    return [Case("bcast", 200, 128, 200, 2, 2), Case("bcast", 301, 128, 90, 2, 2, grid=3),
            Case("bcast", 60, 192, 300, 3, 3)]


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", timeline_cases(), ids=lambda c: c.name)
def test_timeline_stamps_every_tile_and_changes_no_value(case):
    """The forward's diagnostic stamps (`kernels.tlx_timeline`): outputs bit-identical to the build
    without them; every CTA's entry, PDL wait and group ends in order; one record per tile (and
    group, in ping-pong) carrying its batch element and K/V block count."""
    from kernels import tlx_hopper, tlx_timeline

    q, k, v, q_off, k_off, _, k_lens = make_inputs(case, zlib.crc32(case.name.encode()))
    params = _params(case, 1 / math.sqrt(case.d))
    with persistent_grid(case.grid):
        cfg = tlx_hopper.call_fwd_config(q, k, k_off, params)
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
        stamps = []
        out_t, lse_t = tlx_hopper.forward(q, k, v, q_off, k_off, params, timeline=stamps)
    assert torch.equal(out, out_t) and torch.equal(lse, lse_t)
    assert len(stamps) == 1 and stamps[0].num_groups == cfg.num_groups
    buf = stamps[0].buffer.cpu()
    g = cfg.num_groups
    entry, ready = buf[:, tlx_timeline.ENTRY.value], buf[:, tlx_timeline.READY.value]
    ends = buf[:, tlx_timeline.GROUP_END.value:tlx_timeline.GROUP_END.value + 2 * g:2]
    assert bool((entry > 0).all()) and bool((ready >= entry).all())
    assert bool((ends >= ready[:, None]).all())  # every group leaves its loop, tiles or none
    assert bool((buf[:, tlx_timeline.SM_ID.value] >= 0).all())
    tiles = tlx_timeline.group_tiles(buf, g)
    assert all(t["ns"] >= 0 and t["cycles"] > 0 for t in tiles)
    # every batch element once per head (split tiles) or once per head and group (ping-pong)
    per_tile = 1 if cfg.split_tiles else g
    want = sorted([(b, -(-n // cfg.block_n)) for b, n in enumerate(k_lens)] * case.hq * per_tile)
    assert sorted((t["batch"], t["blocks"]) for t in tiles) == want
    # the CTA's first K/V ring turns (as many as its tiles' blocks, RING_TURNS at most): each
    # issued by the producer and waited for by every group (its tile's group and any other)
    turns = tlx_timeline.ring_turn_stamps(buf, g)
    blocks = {}
    for t in tiles:
        if cfg.split_tiles or t["group"] == 0:
            blocks[t["cta"]] = blocks.get(t["cta"], 0) + t["blocks"]
    got = {}
    for t in turns:
        got[t["cta"]] = got.get(t["cta"], 0) + 1
        assert t["issued"] is not None and None not in t["seen"], t
    assert got == {c: min(n, tlx_timeline.RING_TURNS.value) for c, n in blocks.items() if n}
    # the first own tile's epilogue of groups 0 and 1, where it has keys: last PV done, then O
    # normalised, then the stores issued (its tile record), in that order
    stamped = [e for e in tlx_timeline.epilogue_stamps(buf, g) if e["pv"] is not None]
    assert stamped, "no epilogue stamped"
    for e in stamped:
        assert 0 <= e["pv"] <= e["normalised"] <= e["stored"], e


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", flip_cases(), ids=lambda c: c.name)
def test_fast_epilogue(case):
    """FwdConfig.fast_epilogue flipped from the launcher's choice: against the reference, and
    within the approximations' error of the other epilogue (O to a bf16/fp16 rounding step, LSE to
    1e-5; rows without keys, and rows past a sequence's end, as check_forward requires)."""
    from kernels import tlx_hopper

    inputs = make_inputs(case, zlib.crc32(case.name.encode()))
    q, k, v, q_off, k_off, _, _ = inputs
    params = _params(case, 1 / math.sqrt(case.d))
    default = tlx_hopper.call_fwd_config(q, k, k_off, params)
    flipped = {"fast_epilogue": not default.fast_epilogue}
    res = check_forward(case, inputs=inputs, overrides=flipped)
    assert res["ok"], res
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=default)
    out_f, lse_f = tlx_hopper.forward(q, k, v, q_off, k_off, params,
                                      config=dataclasses.replace(default, **flipped))
    assert torch.equal(torch.isinf(lse), torch.isinf(lse_f))
    live = ~torch.isinf(lse)
    assert not live.any() or (lse[live] - lse_f[live]).abs().max().item() <= 1e-5
    step = 2.0 ** -7 if case.dtype == "bf16" else 2.0 ** -10
    torch.testing.assert_close(out_f.float(), out.float(), rtol=step, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", [Case("bcast", 9, 128, 300), Case("self", 9, 200, 200)],
                         ids=lambda c: c.name)
def test_forward_replayed_from_a_cuda_graph(case):
    """The forward captured into a CUDA graph (its schedule build inside; the broadcast one at D =
    128 launched with PDL): a replay gives the eager call's O and LSE bit for bit, and after the
    offsets change in place (the same totals) a replay follows them: the build runs every time."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, q_lens, k_lens = make_inputs(case, zlib.crc32(case.name.encode()))
    params = _params(case, 1 / math.sqrt(case.d))
    assert tlx_hopper.call_fwd_config(q, k, k_off, params).pdl == (case.mode == "bcast")
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)  # compiled before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(g_out, out) and torch.equal(g_lse, lse)
    off = lambda ls: torch.tensor([0] + ls, dtype=torch.int64).cumsum(0).to(DEVICE, torch.int32)
    k_off.copy_(off(k_lens[::-1]))  # the sequences in reverse order: other lengths per batch
    if q_off is not None:
        q_off.copy_(off(q_lens[::-1]))
    graph.replay()
    want_out, want_lse = tlx_hopper.forward(q, k, v, None if q_off is None else q_off.clone(),
                                            k_off.clone(), params)
    torch.cuda.synchronize()
    assert not torch.equal(want_out, out)
    assert torch.equal(g_out, want_out) and torch.equal(g_lse, want_lse)


def growing_score_inputs(case: Case, seed: int):
    """make_inputs with keys whose scores grow along each sequence (std ~1 at its start to ~25 at
    its end) plus, per sequence, one late key aimed at a single query row: row maxima move by more
    than the lazy rescale's 2^8 slack at different blocks in different rows, so within one warp some
    threads rescale their accumulator while others skip it, and single rows (r or r + 8 of a
    thread's pair) move alone."""
    q, k, v, q_off, k_off, q_lens, k_lens = make_inputs(case, seed)
    g = torch.Generator().manual_seed(seed + 7)
    kf = k.float()
    start = 0
    for b, n in enumerate(k_lens):
        if n:
            pos = torch.arange(n, device=k.device, dtype=torch.float32)
            kf[start:start + n] *= (1 + 24 * pos / max(n - 1, 1))[:, None, None]
            if n >= 4:  # one late key aligned with one query row of this sequence
                j = start + int(torch.randint(n // 2, n, (1,), generator=g))
                q_start = 0 if q_off is None else int(q_off[b])
                q_n = case.max_q if q_off is None else q_lens[b]
                if q_n:
                    row = q_start + int(torch.randint(0, q_n, (1,), generator=g))
                    G = case.hq // case.hkv
                    kf[j] = 4 * q[row, ::G].float()
        start += n
    return q, kf.to(k.dtype), v, q_off, k_off, q_lens, k_lens


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("overrides", [{}, {"lazy_rescale": True}, {"rcp_normalise": True}],
                         ids=["default", "lazy-rescale", "rcp-normalise"])
@pytest.mark.parametrize("case", flip_cases(), ids=lambda c: c.name)
def test_forward_with_row_maxima_moving_late(case, overrides):
    """Scores whose row maxima keep moving late in the sequence: the forward (the default, and with
    the FwdConfig switches that change its rounding) against the reference."""
    inputs = growing_score_inputs(case, zlib.crc32(case.name.encode()))
    res = check_forward(case, inputs=inputs, overrides=overrides)
    assert res["ok"], res
    assert res["row_rel_max"] < 5e-2, res


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_long_sequences_take_window_zero_and_match_window_one():
    """K/V of one sequence over all heads beyond L2 (64 MiB here): the launchers deal one
    sequence's blocks head by head (tile_window 0); every tile computes the same as in the default
    order, so the forward, dK and dV are bit-identical to tile_window 1 (dQ: the fused pass's fp32
    partials add up in no fixed order, so it may differ by rounding)."""
    from kernels import tlx_hopper

    case = Case("self", 2, 4096, 4096, 32, 32, 128, "bf16", lens="full")
    q, k, v, q_off, k_off, _, _ = make_inputs(case, 0)
    params = _params(case, 1 / math.sqrt(case.d))
    assert tlx_hopper.call_tile_window(k, params) == 0
    out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
    one = dataclasses.replace(tlx_hopper.fwd_config(case.d, False, 0), tile_window=1)
    out1, lse1 = tlx_hopper.forward(q, k, v, q_off, k_off, params, config=one)
    assert torch.equal(out, out1) and torch.equal(lse, lse1)
    assert out.isfinite().all()
    do = torch.randn_like(out)
    grads = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params)
    grads1 = tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params,
                                 config=tlx_hopper.BwdConfig(tile_window=1))
    for name, g, g1 in zip("kv", grads[1:], grads1[1:]):
        assert torch.equal(g, g1), f"d{name} differs between tile windows 0 and 1"
    torch.testing.assert_close(grads[0].float(), grads1[0].float(), rtol=2**-7, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", bwd_cases() + pma_roles_cases() + pma_shared_cases(),
                         ids=lambda c: c.name)
def test_backward(case):
    res = check_backward(case, seed=zlib.crc32(case.name.encode()))
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("switch,case", [(name, c) for name, (_, cases) in BWD_SWITCHES.items()
                                         for c in cases()],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_backward_switch(switch, case):
    res = check_backward(case, seed=zlib.crc32(case.name.encode()), overrides=BWD_SWITCHES[switch][0])
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", bwd_det_cases(), ids=lambda c: c.name)
def test_backward_deterministic(case):
    res = check_bwd_determinism(case)
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", pma_roles_cases(), ids=lambda c: c.name)
def test_pma_epilogues_change_no_gradient(case):
    """The split-role pass's hand-overs and dK epilogues: dK staged over the P^T tiles with dV, in a
    tile of its own (TMA stores of whole tiles), with P^T handed over apart from dS^T, with dK
    issued before dV's epilogue, and with dV staged in dK's tile (P^T back before dV's epilogue):
    the same bits in dQ, dK and dV (poisoned outputs: a row no store wrote stays NaN)."""
    from kernels import tlx_hopper

    q, k, v, q_off, k_off, *_ = make_inputs(case, 3)
    params = _params(case, 1.0 / math.sqrt(case.d))
    base = dataclasses.replace(tlx_hopper_config(case), pma_buf_v=2)
    variants = {"dk over P^T": dict(pma_dk_stage=False, pma_split_ps=False, pma_dk_early=False,
                                    pma_dv_in_dk_stage=False),
                "dk staged": dict(pma_dk_stage=True, pma_split_ps=False, pma_dk_early=False,
                                  pma_dv_in_dk_stage=False),
                "dk staged, P^T apart": dict(pma_dk_stage=True, pma_split_ps=True,
                                             pma_dk_early=False, pma_dv_in_dk_stage=False),
                "dk staged, P^T apart, dk early": dict(pma_dk_stage=True, pma_split_ps=True,
                                                       pma_dk_early=True, pma_dv_in_dk_stage=False),
                "dk staged, P^T apart, dk early, dv in dk's tile": dict(
                    pma_dk_stage=True, pma_split_ps=True, pma_dk_early=True,
                    pma_dv_in_dk_stage=True),
                "dk staged, P^T apart, dv in dk's tile": dict(
                    pma_dk_stage=True, pma_split_ps=True, pma_dk_early=False,
                    pma_dv_in_dk_stage=True)}
    tlx_hopper.POISON_OUTPUTS = True
    with persistent_grid(case.grid):
        out, lse = tlx_hopper.forward(q, k, v, q_off, k_off, params)
        do = torch.randn_like(out)
        grads = {name: tlx_hopper.backward(do, q, k, v, out, lse, q_off, k_off, params,
                                           config=dataclasses.replace(base, **fields))
                 for name, fields in variants.items()}
    ref = grads.pop("dk over P^T")
    for variant, got in grads.items():
        for name, a, b in zip(("dq", "dk", "dv"), ref, got):
            assert not torch.isnan(b).any(), f"{name} has unwritten rows with {variant}"
            assert torch.equal(a, b), f"{name} differs with {variant}"


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("fold_delta", [False, True], ids=["preprocess", "fold-delta"])
@pytest.mark.parametrize("case", pma_roles_cases()[:3], ids=lambda c: c.name)
def test_pma_roles_backward_is_deterministic(case, fold_delta):
    """The split-role pass: dQ (per-CTA partials summed in CTA order), dK and dV bitwise equal run
    to run; dK/dV also for other grid sizes (their rows have one writer whatever the grid)."""
    from kernels import tlx_hopper

    config = dataclasses.replace(tlx_hopper_config(case), pma_fold_delta=fold_delta)
    assert tlx_hopper.uses_pma_roles(config, case.d, True, case.max_q, case.hq, case.hkv,
                                     case.causal, case.window, case.hq)
    # grids of at least one CTA per head (fewer: routed to the default pass)
    res = check_bwd_determinism(case, grids=(case.hq, 2 * case.hq + 1), config=config)
    assert res["ok"], res


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", pma_shared_cases()[:3] + pma_shared_cases()[-1:],
                         ids=lambda c: c.name)
def test_pma_shared_roles_backward_is_deterministic(case):
    """The shared-role pass: dQ (per-CTA partials summed in CTA order), dK and dV bitwise equal run
    to run; dK/dV also for other grid sizes (their rows have one writer whatever the grid)."""
    from kernels import tlx_hopper

    config = tlx_hopper_config(case)
    assert tlx_hopper.uses_pma_shared_roles(config, case.d, True, case.max_q, case.hq, case.hkv,
                                            case.causal, case.window, case.hq)
    res = check_bwd_determinism(case, grids=(case.hq, 2 * case.hq + 1), config=config)
    assert res["ok"], res


# ------------------------------------------------------------------------------------------
# sharded script mode (device runs)
# ------------------------------------------------------------------------------------------
def _main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--passes",
                    default=",".join(["fwd", "grid", "ostore", "bwd", *BWD_SWITCHES, "bwd-det"]))
    ap.add_argument("--filter", default="", help="comma-separated substrings of case names")
    ap.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="FwdConfig fields changed in every forward (a benchmark A/B's candidate)")
    ap.add_argument("--bwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="BwdConfig fields changed in every backward")
    args = ap.parse_args()
    from benchmarks.tlx_hopper_bench import override_configs

    override_configs(args.fwd_config, args.bwd_config)
    idx, n = (int(x) for x in args.shard.split("/"))
    passes = args.passes.split(",")
    jobs = ([("fwd", c) for c in fwd_cases()] + [("grid", c) for c in grid_cases()]
            + [("ostore", c) for c in o_store_cases()]
            + [("bwd", c) for c in bwd_cases() + pma_roles_cases() + pma_shared_cases()]
            + [(name, c) for name, (_, cases) in BWD_SWITCHES.items() for c in cases()]
            + [("bwd-det", c) for c in bwd_det_cases()])
    jobs = [j for j in jobs if j[0] in passes]
    if args.filter:
        jobs = [j for j in jobs if any(f in j[1].name for f in args.filter.split(","))]
    jobs = [j for j in jobs if zlib.crc32(j[1].variant().encode()) % n == idx]
    reason = _tlx_reason()
    results = []
    for kind, case in jobs:
        print(f"[shard {idx}] {kind} {case.name}", flush=True)
        t = time.time()
        if reason is not None:
            res = {"case": case.name, "pass": kind, "ok": None, "errors": [reason]}
        else:
            try:
                seed = zlib.crc32(case.name.encode())
                if kind in BWD_SWITCHES:
                    res = check_backward(case, seed, BWD_SWITCHES[kind][0])
                else:
                    res = {"fwd": lambda: check_forward(case, seed),
                           "grid": lambda: check_grid_determinism(case),
                           "ostore": lambda: check_o_store_paths(case, seed),
                           "bwd": lambda: check_backward(case, seed),
                           "bwd-det": lambda: check_bwd_determinism(case)}[kind]()
            except Exception as exc:  # record and go on with the next case
                res = {"case": case.name, "pass": kind, "ok": False,
                       "errors": [f"{type(exc).__name__}: {str(exc)[:500]}"]}
        res["s"] = round(time.time() - t, 2)
        print(json.dumps(res), flush=True)
        results.append(res)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    _main()
