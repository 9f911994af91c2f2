"""The launchers' host side (the backward's passes, the split-tile forward): which kernels a call
launches, with which grids, and every argument bound to a parameter of its kernel (`launch`
recorded: nothing runs).

Imports the TLX kernels for their signatures, so it runs where fbtriton imports (no GPU needed);
skipped otherwise. The GPU tests (`test_tlx_hopper.py`) check what the launches compute.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

pytest.importorskip("triton.language.extra.tlx")

from kernels import tlx_hopper  # noqa: E402  (after the skip: it needs TLX below)
from kernels.common import JFAParams  # noqa: E402

LAUNCH_OPTIONS = ("num_warps", "num_stages", "launch_pdl")
N_SM = 132


@pytest.fixture
def launches(monkeypatch):
    """The launches of a call as (kernel name, grid, {parameter: argument}); a positional argument
    past the kernel's parameters or a keyword that names none fails the call."""
    calls = []

    def record(fn, grid, *args, **kwargs):
        params = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
        bound = inspect.signature(fn.fn).bind(*args, **params)
        calls.append((fn.fn.__name__, grid, dict(bound.arguments)))

    monkeypatch.setattr(tlx_hopper, "launch", record)
    # the schedule is built on the GPU; its tensors are only passed through here
    monkeypatch.setattr(tlx_hopper, "cached_schedule",
                        lambda *a, **k: (torch.zeros(8, dtype=torch.int64),
                                         torch.ones(1, dtype=torch.int32)))
    return calls


def _pma_call(q_len: int, heads: int):
    """A broadcast_q call's tensors on the CPU: three batch elements of 5, 0 and 70 keys."""
    d, total_kv, batch = 128, 75, 3
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16)

    q, k, v = rand(q_len, heads, d), rand(total_kv, heads, d), rand(total_kv, heads, d)
    out, grad_out = rand(batch * q_len, heads, d), rand(batch * q_len, heads, d)
    lse = torch.randn(heads, batch * q_len, generator=g)
    k_off = torch.tensor([0, 5, 5, total_kv], dtype=torch.int32)
    return dict(grad_out=grad_out, query=q, key=k, value=v, out=out, lse=lse, key_offset=k_off,
                dk=torch.empty_like(k), dv=torch.empty_like(v), scale=d ** -0.5, n_sm=N_SM)


def _check_dq_sum(launch, dq, part, heads: int, q_block: int):
    """The last launch sums the pass's per-CTA partials into the returned dq, per head."""
    name, grid, args = launch
    ctas_per_head = N_SM // heads
    assert name == "_jfa_dq_reduce_kernel"
    assert grid == (q_block // tlx_hopper.DQ_REDUCE_ROWS, heads)
    assert args["part_ptr"] is part and args["dq_ptr"] is dq
    assert (args["ctas_per_pair"], args["BLOCK_M"]) == (ctas_per_head, q_block)
    assert part.shape[0] == heads * ctas_per_head * q_block


@pytest.mark.parametrize("q_len", [129, 192])
def test_shared_role_backward_launches(launches, q_len):
    heads = 3
    call = _pma_call(q_len, heads)
    cfg = tlx_hopper.bwd_config(128, True, q_len, heads, N_SM)
    dq, dk, dv = tlx_hopper._backward_pma_shared_roles(cfg=cfg, **call)
    assert [name for name, _, _ in launches] == ["_jfa_bwd_preprocess_kernel",
                                                 "jfa_bwd_pma_shared_kernel",
                                                 "_jfa_dq_reduce_kernel"]
    (_, pre_grid, pre), (_, grid, args), reduce = launches
    assert pre_grid == (tlx_hopper.triton_cdiv(3 * q_len, 64), heads)
    assert args["delta_ptr"] is pre["delta_ptr"]            # the pass reads the preprocess's delta
    assert grid == (heads * (N_SM // heads),)                # one head per CTA, resident
    assert args["desc_part"].base.shape[0] == grid[0] * 192  # one 192-row q-block per CTA
    assert (args["NUM_BUF_K"], args["NUM_BUF_V"]) == (cfg.pma_buf_k, cfg.pma_buf_v)
    assert args["dk_ptr"] is dk is call["dk"] and args["dv_ptr"] is dv is call["dv"]
    _check_dq_sum(reduce, dq, args["desc_part"].base, heads, 192)
    assert dq.shape == call["query"].shape and dq.dtype == call["query"].dtype


@pytest.mark.parametrize("fold_delta", [True, False])
def test_split_role_backward_launches(launches, fold_delta):
    heads, q_len = 4, 100
    call = _pma_call(q_len, heads)
    cfg = tlx_hopper.bwd_config(128, True, q_len, heads, N_SM)
    cfg = dataclasses.replace(cfg, pma_fold_delta=fold_delta)
    dq, _, _ = tlx_hopper._backward_pma_roles(cfg=cfg, **call)
    names = [name for name, _, _ in launches]
    assert names == ["_jfa_bwd_preprocess_kernel"] * (not fold_delta) + [
        "jfa_bwd_pma_kernel", "_jfa_dq_reduce_kernel"]
    _, grid, args = launches[-2]
    if fold_delta:  # the pass sums delta itself from the O rows
        assert args["FOLD_DELTA"] and args["delta_ptr"] is call["lse"]
    else:
        assert not args["FOLD_DELTA"] and args["delta_ptr"] is launches[0][2]["delta_ptr"]
    assert grid == (heads * (N_SM // heads),)
    assert args["desc_part"].base.shape[0] == grid[0] * 128
    _check_dq_sum(launches[-1], dq, args["desc_part"].base, heads, 128)


@pytest.fixture
def h200(monkeypatch):
    """`forward` / `backward` on CPU tensors: their device checks and properties answered as on the
    H200."""
    monkeypatch.setattr(tlx_hopper, "supports", lambda *args: None)
    monkeypatch.setattr(tlx_hopper, "_num_sms", lambda index: N_SM)
    monkeypatch.setattr(tlx_hopper, "_l2_bytes", lambda index: 50 * 2**20)
    monkeypatch.setattr(tlx_hopper, "_FWD_PLANS", {})  # each test builds its own forward plans


@pytest.mark.parametrize("mode", ["self", "bcast-window", "self-deterministic"])
def test_backward_preprocess_feeds_the_dkdv_pass(launches, h200, mode):
    """The preprocess's delta reaches the dK/dV pass; with the fused dQ its fp32 buffer is zeroed
    there where its rows are the output rows (self/cross) and handed to the pass, and the dq pass
    runs only without it."""
    heads, d = 2, 128
    call = _pma_call(192, heads)
    k_off = call["key_offset"]
    bcast = mode.startswith("bcast")
    q = call["query"] if bcast else call["key"].clone()
    params = JFAParams(max_seq_len_q=192 if bcast else 70, max_seq_len_kv=70, sm_scale=d ** -0.5,
                       broadcast_q=bcast, window_size=16 if bcast else None,
                       deterministic=mode.endswith("deterministic"))
    out = call["out"] if bcast else torch.randn_like(q)
    grad_out = torch.randn_like(out)
    dq, dk, dv = tlx_hopper.backward(grad_out, q, call["key"], call["value"], out, call["lse"],
                                     None if bcast else k_off, k_off, params)
    names = [name for name, _, _ in launches]
    fused = not params.deterministic
    assert names[:2] == ["_jfa_bwd_preprocess_kernel", "jfa_bwd_dkdv_kernel"]
    assert names[2:] == ([] if fused else ["jfa_bwd_dq_kernel"]
                         + ["_jfa_dq_reduce_kernel"] * bcast)
    (_, _, pre), (_, _, dkdv) = launches[:2]
    assert dkdv["delta_ptr"] is pre["delta_ptr"] and dkdv["FUSED_DQ"] == fused
    assert pre["ZERO_DQ"] == (fused and not bcast)
    if pre["ZERO_DQ"]:  # the buffer it zeroes is the one the pass adds dQ into
        assert dkdv["desc_dq"].base is pre["dq_acc_ptr"]
        assert pre["dq_acc_ptr"].dtype == torch.float32
    elif fused:  # broadcast_q: the pass adds into q_len rows allocated as zeros
        assert dkdv["desc_dq"].base.dtype == torch.float32
        assert torch.count_nonzero(dkdv["desc_dq"].base) == 0
    assert dq.shape == q.shape and dq.dtype == q.dtype
    assert dk.shape == call["key"].shape and dv.shape == call["value"].shape



def test_split_tile_forward_launch(launches, h200):
    """The short-key PMA q128 forward with split tiles: one resident CTA group per (head, q-block),
    each group's Q and O boxes a whole 128-row tile."""
    heads = 4
    call = _pma_call(128, heads)
    params = JFAParams(max_seq_len_q=128, max_seq_len_kv=70, sm_scale=128 ** -0.5, broadcast_q=True)
    cfg = dataclasses.replace(tlx_hopper.fwd_config(128, True, 128, short_kv=True), split_tiles=True,
                              late_p_cast=False)
    out, lse = tlx_hopper.forward(call["query"], call["key"], call["value"], None, call["key_offset"],
                                  params, config=cfg)
    [(name, grid, args)] = launches
    assert name == "jfa_fwd_kernel" and grid == (heads * (N_SM // heads),)
    assert args["ctas_per_pair"] == N_SM // heads and args["H"] == heads
    assert (args["SPLIT_TILES"], args["NUM_BUF_KV"]) == (True, cfg.num_buf_kv)
    assert args["desc_q"].block_shape == args["desc_o"].block_shape == [128, 128]
    assert args["desc_o"].base is out and out.shape == (3 * 128, heads, 128)
    assert lse.shape == (heads, 3 * 128)


def _short_key_pma_forward(**fields):
    """The short-key PMA q128 forward (`_pma_call`, its launcher's 32-key tile) run with `fields`
    of its configuration changed."""
    call = _pma_call(128, 4)
    params = JFAParams(max_seq_len_q=128, max_seq_len_kv=70, sm_scale=128 ** -0.5, broadcast_q=True)
    cfg = dataclasses.replace(tlx_hopper.fwd_config(128, True, 128, short_kv=True), **fields)
    return tlx_hopper.forward(call["query"], call["key"], call["value"], None, call["key_offset"],
                              params, config=cfg)


@pytest.mark.parametrize("shift_tail,refused", [(True, False), (False, True)])
def test_tail_branch_reaches_the_kernel_or_is_refused(launches, h200, shift_tail, refused):
    """FwdConfig.tail_branch launches with the shifted tail, and is refused before any launch
    without it."""
    if refused:
        with pytest.raises(ValueError, match="tail_branch needs shift_tail"):
            _short_key_pma_forward(shift_tail=shift_tail, tail_branch=True)
        assert launches == []
    else:
        _short_key_pma_forward(shift_tail=shift_tail, tail_branch=True)
        [(_, _, args)] = launches
        assert (args["SHIFT_TAIL"], args["TAIL_BRANCH"], args["FIRST_BRANCH"]) == (True, True, False)


@pytest.mark.parametrize("split", [True, False])
def test_swap_pairs_reaches_the_kernel_or_is_refused(launches, h200, split):
    """FwdConfig.swap_pairs launches the split tile with it; without split tiles it is refused
    before any launch."""
    fields = dict(tlx_hopper.SPLIT_TILE_FIELDS, shift_tail=True, swap_pairs=True)
    if not split:
        with pytest.raises(ValueError, match="swap_pairs needs split_tiles"):
            _short_key_pma_forward(**dict(fields, split_tiles=False, late_p_cast=True,
                                          tail_branch=False))
        assert launches == []
        return
    _short_key_pma_forward(**fields)
    _short_key_pma_forward(**dict(fields, swap_pairs=False))
    [(_, _, on), (_, _, off)] = launches
    assert (on["SPLIT_TILES"], on["SWAP_PAIRS"], off["SWAP_PAIRS"]) == (True, True, False)


def test_first_branch_reaches_the_kernel(launches, h200):
    _short_key_pma_forward(first_branch=True)
    [(_, _, args)] = launches
    assert args["FIRST_BRANCH"] is True and args["TAIL_BRANCH"] is False


def _timeline_width(num_groups: int, iterations: int) -> int:
    """A forward timeline's row width: its header, each iteration's tile records and the ring
    turns' stamps."""
    from kernels import tlx_timeline

    return (tlx_timeline.HEADER.value + tlx_timeline.TILE_FIELDS.value * num_groups * iterations
            + tlx_timeline.RING_AREA)


@pytest.mark.parametrize("stamped", [False, True], ids=["plain", "timeline"])
def test_forward_timeline_buffer(launches, h200, stamped):
    """Without a timeline list the forward passes None for the stamps (no parameter in its build);
    with one it appends a Timeline whose rows fit every CTA's iterations and passes its buffer."""
    heads = 4
    call = _pma_call(128, heads)
    params = JFAParams(max_seq_len_q=128, max_seq_len_kv=70, sm_scale=128 ** -0.5, broadcast_q=True)
    stamps = [] if stamped else None
    tlx_hopper.forward(call["query"], call["key"], call["value"], None, call["key_offset"], params,
                       timeline=stamps)
    [(_, grid, args)] = launches
    assert args["TIMELINE"] is stamped
    if not stamped:
        assert args["timeline"] is None and args["timeline_stride"] is None
        return
    [t] = stamps
    # resident: 33 CTAs per head share its 3 batch elements, one iteration each at most
    width = _timeline_width(args["NUM_GROUPS"], 1)
    assert t.buffer.shape == (grid[0], width) and t.num_groups == args["NUM_GROUPS"]
    assert args["timeline"] is t.buffer and args["timeline_stride"] == width


@pytest.fixture
def plan_builds(monkeypatch):
    """The forward plans built, as the FwdConfig of each."""
    built = []
    build = tlx_hopper._build_fwd_plan

    def counted(*args):
        plan = build(*args)
        built.append(plan.cfg)
        return plan

    monkeypatch.setattr(tlx_hopper, "_build_fwd_plan", counted)
    return built


def _self_call(total: int, batch: int = 3, heads: int = 2, d: int = 64):
    """Self-attention tensors of `total` rows in `batch` sequences (the last one takes the rest)."""
    g = torch.Generator().manual_seed(total)
    q, k, v = (torch.randn(total, heads, d, generator=g).to(torch.bfloat16) for _ in range(3))
    off = torch.tensor([0, 5, 5, total][: batch] + [total], dtype=torch.int32)
    return q, k, v, off


def test_forward_plan_reused_across_jagged_batches(launches, h200, plan_builds):
    """Calls that differ only in their row counts share one plan (built once), and each launch still
    gets its own row counts: total_out and the descriptors' rows are the call's, the rest equal."""
    params = JFAParams(max_seq_len_q=70, max_seq_len_kv=70, sm_scale=0.125)
    for total in (75, 40, 75):
        q, k, v, off = _self_call(total)
        out, lse = tlx_hopper.forward(q, k, v, off, off, params)
        assert out.shape == (total, 2, 64) and lse.shape == (2, total)
    assert len(plan_builds) == 1
    (_, grid_a, a), (_, grid_b, b), (_, grid_c, c) = launches
    assert grid_a == grid_b == grid_c == (N_SM,)
    assert (a["total_out"], b["total_out"], c["total_out"]) == (75, 40, 75)
    assert a["desc_k"].shape[0] == 75 and b["desc_k"].shape[0] == 40
    fixed = [name for name in a if name not in ("total_out", "q_off", "k_off") and
             not name.startswith("desc") and not name.endswith("_ptr") and name not in (
                 "tile_entry", "n_entries")]
    assert {name: a[name] for name in fixed} == {name: b[name] for name in fixed} == {
        name: c[name] for name in fixed}
    assert a["HEAD_DIM"] == 64 and a["B"] == 3 and a["q_len"] == 0


def test_forward_plan_follows_what_it_reads(launches, h200, plan_builds, monkeypatch):
    """A new plan where its inputs change: the keys' mean class (the PMA tile), the config, a
    timeline, the CTAs (too few for the split tile's resident mode); the same one again for a
    repeated signature."""
    call = _pma_call(128, 4)  # 75 keys over 3 elements: short keys, the split tile
    params = JFAParams(max_seq_len_q=128, max_seq_len_kv=1000, sm_scale=128 ** -0.5,
                       broadcast_q=True)
    run = lambda key, value, k_off, **kw: tlx_hopper.forward(  # noqa: E731
        call["query"], key, value, None, k_off, params, **kw)
    run(call["key"], call["value"], call["key_offset"])
    mid = torch.randn(900, 4, 128).to(torch.bfloat16)  # 300 keys per element: 64-key blocks
    mid_off = torch.tensor([0, 300, 600, 900], dtype=torch.int32)
    run(mid, mid, mid_off)
    run(call["key"], call["value"], call["key_offset"])
    cfg = dataclasses.replace(plan_builds[0], tile_window=0)  # another config (unread when resident)
    run(call["key"], call["value"], call["key_offset"], config=cfg)
    run(call["key"], call["value"], call["key_offset"], timeline=[])
    monkeypatch.setattr(tlx_hopper, "GRID_OVERRIDE", 2)  # fewer CTAs than heads: no resident mode
    run(call["key"], call["value"], call["key_offset"])
    assert len(plan_builds) == 5
    assert [args["BLOCK_N"] for _, _, args in launches] == [32, 64, 32, 32, 32, 32]
    assert [args["SPLIT_TILES"] for _, _, args in launches] == [True, False, True, True, True, False]
    assert [args["TIMELINE"] for _, _, args in launches] == [False] * 4 + [True, False]
    assert [grid for _, grid, _ in launches] == [(N_SM,)] * 5 + [(2,)]


def test_bad_forward_config_refused_on_every_call(launches, h200, plan_builds):
    """A configuration that breaks a rule leaves no plan behind: every call raises, none launches."""
    for _ in range(2):
        with pytest.raises(ValueError, match="skip_idle_groups needs self/cross attention"):
            _short_key_pma_forward(skip_idle_groups=True)
    assert launches == [] and plan_builds == [] and tlx_hopper._FWD_PLANS == {}


def test_forward_plans_bounded(launches, h200, monkeypatch):
    """The plan cache is emptied when full instead of growing with every new signature."""
    monkeypatch.setattr(tlx_hopper, "MAX_FWD_PLANS", 2)
    params = JFAParams(max_seq_len_q=70, max_seq_len_kv=70, sm_scale=0.125)
    for batch in (1, 2, 3):
        q, k, v, off = _self_call(75, batch)
        tlx_hopper.forward(q, k, v, off, off, params)
        assert len(tlx_hopper._FWD_PLANS) == (batch - 1) % 2 + 1
    assert [args["B"] for _, _, args in launches] == [1, 2, 3]
