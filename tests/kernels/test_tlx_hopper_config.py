"""The TLX Hopper launchers' configuration choices (pure Python, runs on CPU)."""

import dataclasses

import pytest
import torch

from kernels.common import JFAParams
from kernels.tlx_hopper import (SPLIT_TILE_FIELDS, BwdConfig, _descriptor, bwd_config,
                                call_fwd_config, fuses_dq, fwd_config, o_by_tma_only,
                                split_tiles_refusal, tile_window_for, uses_pma_roles,
                                uses_pma_shared_roles, with_split_tiles)

H200_L2 = 50 * 2**20


@pytest.mark.parametrize(
    "heads,max_kv,head_dim,itemsize,window",
    [
        (32, 4096, 128, 2, 0),  # dense B4 H32 N4096: 64 MiB of K/V per sequence (run 12: window 0 faster)
        (4, 1024, 128, 2, 1),   # self / dense B768 H4 N1024: 2 MiB (window 0 slower in fwd+bwd)
        (3, 1000, 128, 2, 1),   # PMA q192
        (32, 4096, 64, 2, 1),   # 32 MiB fits
        (8, 16384, 128, 2, 0),  # long sequences, few heads: 64 MiB
    ],
)
def test_tile_window_follows_kv_bytes_against_l2(heads, max_kv, head_dim, itemsize, window):
    assert tile_window_for(heads, max_kv, head_dim, itemsize, H200_L2) == window


def test_tile_window_boundary_is_strict():
    # exactly one L2 of K/V still fits (window 1); one more key does not
    assert tile_window_for(1, 100, 64, 2, 2 * 100 * 64 * 2) == 1
    assert tile_window_for(1, 101, 64, 2, 2 * 100 * 64 * 2) == 0


@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128)])
@pytest.mark.parametrize("window", [0, 1])
def test_configs_carry_the_chosen_window(broadcast_q, q_len, window):
    assert fwd_config(128, broadcast_q, q_len, window).tile_window == window
    assert bwd_config(128, broadcast_q, q_len, 4, 132, window).tile_window == window
    # the tile shapes themselves do not depend on it
    assert fwd_config(128, broadcast_q, q_len, window).block_m == fwd_config(128, broadcast_q, q_len).block_m


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128)])
def test_idle_groups_skipped_for_self_and_cross_only(head_dim, broadcast_q, q_len):
    # the launcher refuses skip_idle_groups with broadcast_q
    assert fwd_config(head_dim, broadcast_q, q_len).skip_idle_groups == (not broadcast_q)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 1)])
def test_late_p_cast_only_where_no_register_spills(head_dim, broadcast_q, q_len):
    # the 2-group, 64-key PMA tile holds fp32 probabilities without spilling; the 128-key self/cross
    # tile and the 3-group q192 tile spill (run 17's compile check), so they cast early
    cfg = fwd_config(head_dim, broadcast_q, q_len)
    assert cfg.late_p_cast == (broadcast_q and head_dim == 128 and q_len <= 128)
    if cfg.late_p_cast:
        assert (cfg.num_groups, cfg.block_n) == (2, 64)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("q_len", [1, 64, 100, 128, 192])
def test_broadcast_o_by_tma_store_at_d128(head_dim, q_len):
    cfg = fwd_config(head_dim, True, q_len)
    assert cfg.tma_store_o == (head_dim == 128)  # as measured (runs 23, 24)
    if head_dim == 128:
        # the staging tiles (2 x 16 KB) took the place of run 11's fifth 64-key K/V stage; run
        # 24's fifth (in the 16 KB of the tl.store's relayout with q_len a multiple of 64) lost
        assert cfg.num_buf_kv == {2: 4, 3: 3}[cfg.num_groups]
    # self/cross attention: O always by TMA store, staged in the Q slot
    assert fwd_config(head_dim, False, 0).tma_store_o


@pytest.mark.parametrize("q_len,only", [(1, False), (63, False), (64, True), (100, False), (128, True),
                                        (150, False), (192, True)])
def test_o_by_tma_only_where_no_slice_straddles_a_sequence_end(q_len, only):
    # a 64-row O slice straddling qlen would write the next sequence's rows: such a q_len keeps the
    # masked tl.store for it; the rule reads the config, so tl.store configs never drop it
    cfg = fwd_config(128, True, q_len)
    assert o_by_tma_only(cfg, True, q_len) == only
    assert not o_by_tma_only(dataclasses.replace(cfg, tma_store_o=False), True, q_len)
    assert not o_by_tma_only(fwd_config(128, False, 0), False, q_len)  # self/cross stage O in Q


@pytest.mark.parametrize("rows,heads,head_dim,block_rows,block_cols,dtype", [
    (300, 4, 128, 64, None, torch.bfloat16), (1, 2, 64, 128, None, torch.float16),
    (200, 3, 128, 64, 64, torch.float32)])
def test_descriptor_equals_the_checked_build(rows, heads, head_dim, block_rows, block_cols, dtype):
    # `_descriptor` skips TensorDescriptor's checks (host time): it must build the same object
    from triton.tools.tensor_descriptor import TensorDescriptor

    t = torch.zeros(rows, heads, head_dim, dtype=dtype)
    fast = _descriptor(t, rows, block_rows, block_cols)
    checked = TensorDescriptor(t, [rows, heads * head_dim], [heads * head_dim, 1],
                               [block_rows, block_cols or head_dim])
    assert type(fast) is TensorDescriptor and fast == checked
    assert fast.__dict__.keys() == checked.__dict__.keys() and fast.base is t


def test_schedule_block_is_the_next_power_of_two_from_16():
    # the host's integer form of max(16, triton.next_power_of_2(n)), the build's vector width
    import triton

    from kernels.tlx_schedule import schedule_block

    for n in [*range(0, 300), 767, 768, 769, 1023, 1024, 1025, 8191, 8192, 8193, 16384]:
        assert schedule_block(n) == max(16, triton.next_power_of_2(n)), n


def test_dq_fused_only_where_it_is_correct():
    on = BwdConfig(fused_dq=True)
    assert fuses_dq(on, 128, broadcast_q=False, deterministic=False)
    assert fuses_dq(on, 128, broadcast_q=True, deterministic=False)
    # reduce-adds in no fixed order
    assert not fuses_dq(on, 128, broadcast_q=False, deterministic=True)
    assert not fuses_dq(on, 128, broadcast_q=True, deterministic=True)
    assert not fuses_dq(on, 64, broadcast_q=False, deterministic=False)   # does not compile at D=64
    assert not fuses_dq(BwdConfig(fused_dq=False), 128, broadcast_q=False, deterministic=False)


@pytest.mark.parametrize("head_dim,broadcast_q,q_len", [(128, False, 0), (128, True, 192), (128, True, 128)])
def test_dq_fused_by_default_at_d128(head_dim, broadcast_q, q_len):
    # run 15 (H200): faster on every forward+backward row, so bwd_config's choice
    assert fuses_dq(bwd_config(head_dim, broadcast_q, q_len, 4, 132), head_dim, broadcast_q, False)


@pytest.mark.parametrize("slots", [1, 3])
def test_fused_dq_at_d128_needs_a_two_slot_q_ring(slots):
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(fused_dq=True, dkdv_buf_q=2), 128)
    _check_config(BwdConfig(fused_dq=False, dkdv_buf_q=slots), 128)  # the two-pass path: any ring
    _check_config(BwdConfig(fused_dq=True, dkdv_buf_q=slots), 64)    # D=64 never fuses
    with pytest.raises(ValueError, match=rf"tlx BwdConfig: fused_dq at head dim 128 needs dkdv_buf_q == 2, "
                                         rf"got {slots}"):
        _check_config(BwdConfig(fused_dq=True, dkdv_buf_q=slots), 128)


def test_long_keys_take_128_key_blocks_for_broadcast_d128():
    cfg = fwd_config(128, True, 128, long_kv=True)
    assert (cfg.block_n, cfg.num_buf_kv, cfg.late_p_cast) == (128, 2, False)
    assert (cfg.num_groups, cfg.tma_store_o, cfg.warp_arrive, cfg.lazy_rescale, cfg.rcp_normalise) \
        == (2, True, True, True, True)
    assert fwd_config(128, True, 128).block_n == 64
    assert fwd_config(128, True, 100, long_kv=True).block_n == 128
    for args in ((128, True, 192), (64, True, 128), (128, False, 0), (64, False, 0)):
        assert fwd_config(*args, long_kv=True) == fwd_config(*args)


def test_short_keys_take_32_key_blocks_for_broadcast_d128():
    # the same K/V bytes in flight as the 64-key stages: q<=128 eight stages (four), q192 six (three)
    q128, q192 = fwd_config(128, True, 128, short_kv=True), fwd_config(128, True, 192, short_kv=True)
    assert (q128.block_n, q128.num_buf_kv, q192.block_n, q192.num_buf_kv) == (32, 8, 32, 6)
    assert dataclasses.replace(q128, block_n=64, num_buf_kv=4) == fwd_config(128, True, 128)
    # q192's 32-key tile holds one block body per consumer (its first and shifted last blocks'
    # masks under run-time branches), the tail branch only where the tail is shifted
    assert (q192.first_branch, q192.tail_branch) == (True, False)
    assert dataclasses.replace(q192, block_n=64, num_buf_kv=3,
                               first_branch=False) == fwd_config(128, True, 192)
    q192_free = fwd_config(128, True, 192, short_kv=True, mask_free=True)
    assert (q192_free.shift_tail, q192_free.tail_branch, q192_free.first_branch) == (True,) * 3
    assert fwd_config(128, True, 100, short_kv=True).block_n == 32
    assert fwd_config(128, True, 300, short_kv=True).block_n == 32
    for args in ((64, True, 128), (64, True, 192), (128, False, 0), (64, False, 0)):
        assert fwd_config(*args, short_kv=True) == fwd_config(*args)


@pytest.mark.parametrize("total,short", [(128 * 3 - 1, True), (128 * 3, False), (0, True)])
def test_short_keys_is_the_mean_key_length(total, short):
    from kernels.tlx_hopper import short_keys

    assert short_keys(torch.empty(total, 1, 8), torch.zeros(4, dtype=torch.int32)) == short
    assert not short_keys(torch.empty(128, 1, 8), torch.zeros(1, dtype=torch.int32))  # B = 0


@pytest.mark.parametrize("mean", [0, 127, 128, 200, 639, 640, 2000])
def test_long_and_short_keys_exclude_each_other(mean):
    # fwd_config would take the long choice over the short one: no call may be both
    from kernels.tlx_hopper import long_keys, short_keys

    key, off = torch.empty(mean * 4, 1, 8), torch.zeros(5, dtype=torch.int32)
    assert not (long_keys(key, off) and short_keys(key, off))


@pytest.mark.parametrize("total,long", [(640 * 3, True), (640 * 3 - 1, False), (0, False)])
def test_long_keys_is_the_mean_key_length(total, long):
    from kernels.tlx_hopper import long_keys

    assert long_keys(torch.empty(total, 1, 8), torch.zeros(4, dtype=torch.int32)) == long
    assert long_keys(torch.empty(640, 1, 8), torch.zeros(1, dtype=torch.int32))  # B = 0: no division


@pytest.mark.parametrize("slots", [1, 2])
def test_fold_delta_needs_a_third_k_slot(slots):
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(pma_fold_delta=True, pma_buf_k=3), 128)
    _check_config(BwdConfig(pma_fold_delta=False, pma_buf_k=slots), 128)
    with pytest.raises(ValueError, match=rf"pma_fold_delta needs pma_buf_k >= 3, got {slots}"):
        _check_config(BwdConfig(pma_fold_delta=True, pma_buf_k=slots), 128)


@pytest.mark.parametrize("k,v,ps", [(3, 3, 1), (4, 2, 1), (2, 4, 1), (2, 2, 2)])
def test_dk_stage_takes_a_kv_slot(k, v, ps):
    """pma_dk_stage's staging tile takes the shared memory of one K/V slot (a P^T/dS^T slot: two)."""
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(pma_buf_k=k, pma_buf_v=v, pma_buf_ps=ps), 128)
    _check_config(BwdConfig(pma_dk_stage=True, pma_buf_k=k, pma_buf_v=v - 1, pma_buf_ps=ps), 128)
    with pytest.raises(ValueError, match=rf"pma_dk_stage needs pma_buf_k \+ pma_buf_v \+ 2 \* pma_buf_ps"
                                         rf" <= 7, got {k} \+ {v} \+ 2 \* {ps}"):
        _check_config(BwdConfig(pma_dk_stage=True, pma_buf_k=k, pma_buf_v=v, pma_buf_ps=ps), 128)


def test_split_ps_needs_dk_stage():
    """pma_split_ps hands P^T back after dV's epilogue: dK cannot be staged over it."""
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(pma_dk_stage=True, pma_split_ps=True, pma_buf_v=2), 128)
    with pytest.raises(ValueError, match="pma_split_ps needs pma_dk_stage"):
        _check_config(BwdConfig(pma_split_ps=True), 128)


def test_dk_early_needs_split_ps():
    """pma_dk_early moves dK's issue ahead of dV's epilogue, which only pma_split_ps put after it."""
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(pma_dk_stage=True, pma_split_ps=True, pma_dk_early=True, pma_buf_v=2),
                  128)
    with pytest.raises(ValueError, match="pma_dk_early needs pma_split_ps"):
        _check_config(BwdConfig(pma_dk_stage=True, pma_dk_early=True, pma_buf_v=2), 128)


def test_dv_in_dk_stage_needs_split_ps():
    """pma_dv_in_dk_stage stages dV in dK's own tile (pma_dk_stage) and hands P^T back on its own
    barriers (pma_split_ps), with or without pma_dk_early."""
    from kernels.tlx_hopper import _check_config

    for dk_early in (False, True):
        _check_config(BwdConfig(pma_dk_stage=True, pma_split_ps=True, pma_dk_early=dk_early,
                                pma_dv_in_dk_stage=True, pma_buf_v=2), 128)
    with pytest.raises(ValueError, match="pma_dv_in_dk_stage needs pma_split_ps"):
        _check_config(BwdConfig(pma_dk_stage=True, pma_dv_in_dk_stage=True, pma_buf_v=2), 128)
    with pytest.raises(ValueError, match="pma_dv_in_dk_stage needs pma_split_ps"):
        _check_config(BwdConfig(pma_dv_in_dk_stage=True), 128)


def test_broadcast_default_stages_dk_apart_with_two_v_slots():
    # run 32: dK's own staging tile with 3 K + 2 V, -4.2 % forward+backward at PMA q128 fill 0.9;
    # run 33: P^T handed over apart from dS^T, -2.6 %; run 34: dK issued before dV's epilogue,
    # -1.8 % at fill 0.5; run 35: P^T back before dV's epilogue, dV staged in dK's tile, -1.6 %
    from kernels.tlx_hopper import _check_config, bwd_config

    cfg = bwd_config(128, True, 128, 4, 132)
    assert cfg.pma_dk_stage and cfg.pma_split_ps and cfg.pma_dk_early and cfg.pma_dv_in_dk_stage
    assert (cfg.pma_buf_k, cfg.pma_buf_v, cfg.pma_buf_ps) == (3, 2, 1)
    _check_config(cfg, 128)
    assert not bwd_config(128, False, 0, 4, 132).pma_dk_stage


@pytest.mark.parametrize("name", ["pma_buf_k", "pma_buf_v"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, None])
def test_pma_rings_need_a_slot_count(name, bad):
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(**{name: 1}, pma_fold_delta=False), 128)
    with pytest.raises(ValueError, match=rf"{name} must be an int >= 1 .*, got {bad!r}"):
        _check_config(BwdConfig(**{name: bad}), 128)


@pytest.mark.parametrize("k,v", [(3, 3), (4, 2), (2, 4), (5, 1)])
def test_pma_shared_roles_rings_fit_beside_its_step_tiles(k, v):
    """The shared-role pass holds Q, dO, P^T and dS^T of three steps (144 KB): five 16 KB K/V slots
    at most."""
    from kernels.tlx_hopper import _check_config

    _check_config(BwdConfig(pma_buf_k=k, pma_buf_v=v), 128)  # the q128 pass's rings: no such rule
    _check_config(BwdConfig(pma_shared_roles=True, pma_buf_k=k - 1, pma_buf_v=v), 128)
    with pytest.raises(ValueError, match=rf"pma_shared_roles needs pma_buf_k \+ pma_buf_v <= 5, got {k} \+ {v}"):
        _check_config(BwdConfig(pma_shared_roles=True, pma_buf_k=k, pma_buf_v=v), 128)


def test_pma_shared_roles_takes_only_the_calls_its_kernel_serves():
    on = BwdConfig(pma_shared_roles=True, pma_buf_v=2)
    pma = dict(head_dim=128, broadcast_q=True, q_len=192, num_heads=3, num_kv_heads=3, causal=False,
               window=None, num_sms=132)
    assert uses_pma_shared_roles(on, **pma)
    assert uses_pma_shared_roles(on, **{**pma, "q_len": 129})  # three steps, the third one row
    assert not uses_pma_shared_roles(BwdConfig(), **pma)        # off unless asked for
    # three 64-row steps exactly (run 43: at two, q_len 65-128, 9-26 % slower than the split-role
    # pass)
    for change in ({"q_len": 128}, {"q_len": 65}, {"q_len": 193},
                   {"head_dim": 64}, {"broadcast_q": False}, {"num_kv_heads": 1},  # GQA
                   {"causal": True}, {"window": 16},
                   {"num_heads": 133}):                         # a CTA per head at least
        assert not uses_pma_shared_roles(on, **{**pma, **change}), change
    # the q192 default fits its rule
    from kernels.tlx_hopper import _check_config

    _check_config(bwd_config(128, True, 192, 3, 132), 128)


@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 300)])
def test_q_slot_released_late_for_broadcast_only(broadcast_q, q_len):
    # run 16: late release -2..-3 % forward+backward on PMA fill 0.9, +0..+6 % on self
    assert bwd_config(128, broadcast_q, q_len, 4, 132).dkdv_early_q_release == (not broadcast_q)


def test_pma_roles_takes_only_the_calls_its_kernel_serves():
    on = BwdConfig(pma_roles=True)
    pma = dict(head_dim=128, broadcast_q=True, q_len=128, num_heads=4, num_kv_heads=4, causal=False,
               window=None, num_sms=132)
    assert uses_pma_roles(on, **pma)
    assert uses_pma_roles(on, **{**pma, "q_len": 65})        # two steps, the second one row
    assert not uses_pma_roles(BwdConfig(), **pma)            # off unless asked for
    for change in ({"q_len": 64}, {"q_len": 129}, {"q_len": 192},   # two 64-row steps exactly
                   {"head_dim": 64}, {"broadcast_q": False}, {"num_kv_heads": 2},  # GQA
                   {"causal": True}, {"window": 16},
                   {"num_heads": 133}):                       # a CTA per head at least
        assert not uses_pma_roles(on, **{**pma, **change}), change


def test_bwd_config_takes_the_split_role_pass_for_pma_q128_only():
    pma = dict(head_dim=128, broadcast_q=True, q_len=128, num_heads=4, num_kv_heads=4, causal=False,
               window=None, num_sms=132)
    assert uses_pma_roles(bwd_config(128, True, 128, 4, 132), **pma)
    assert bwd_config(128, True, 128, 4, 132).pma_fold_delta  # run 25: no preprocess kernel
    assert not bwd_config(128, False, 0, 4, 132).pma_roles                 # self/cross
    assert not uses_pma_roles(bwd_config(128, True, 192, 3, 132), **{**pma, "q_len": 192})


def test_bwd_config_takes_the_shared_role_pass_for_pma_q192_only():
    # run 43: forward+backward 0.86-0.90 of the fused dK/dV pass's time on every PMA q192 row
    pma = dict(head_dim=128, broadcast_q=True, q_len=192, num_heads=3, num_kv_heads=3, causal=False,
               window=None, num_sms=132)
    for q_len in (129, 160, 192):
        assert uses_pma_shared_roles(bwd_config(128, True, q_len, 3, 132), **{**pma, "q_len": q_len})
    assert not uses_pma_shared_roles(bwd_config(128, True, 128, 4, 132), **{**pma, "q_len": 128})
    assert not bwd_config(128, False, 0, 4, 132).pma_shared_roles                      # self/cross


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 1)])
def test_per_thread_kv_release_for_broadcast_d128_only(head_dim, broadcast_q, q_len):
    # run 27's A/B: PMA D=128 forwards gained, self and dense lost 1-2 %; D=64 was not measured
    assert fwd_config(head_dim, broadcast_q, q_len).warp_arrive == (broadcast_q and head_dim == 128)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 1)])
@pytest.mark.parametrize("long_kv", [False, True])
def test_programmatic_dependent_launch_for_broadcast_d128_only(head_dim, broadcast_q, q_len, long_kv):
    # run 36's A/B: the PMA fill-0.1 forwards gained (the schedule build's launch gap), self and
    # dense lost 1.4-4.6 %; D=64 was not measured
    cfg = fwd_config(head_dim, broadcast_q, q_len, long_kv=long_kv)
    assert cfg.pdl == (broadcast_q and head_dim == 128)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 1)])
def test_lazy_rescale_and_reciprocal_for_broadcast_d128_only(head_dim, broadcast_q, q_len):
    # run 28's A/Bs: PMA D=128 forwards gained with each, self lost 1-2 % with the lazy rescale;
    # D=64 was not measured
    cfg = fwd_config(head_dim, broadcast_q, q_len)
    assert cfg.lazy_rescale == cfg.rcp_normalise == (broadcast_q and head_dim == 128)


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("broadcast_q,q_len", [(False, 0), (True, 192), (True, 128), (True, 1)])
@pytest.mark.parametrize("keys", [{}, {"long_kv": True}, {"short_kv": True}])
def test_shifted_tail_for_mask_free_broadcast_d128_only(head_dim, broadcast_q, q_len, keys):
    # run 47 (H100): every PMA forward row gained 0.6-4.6 %; D=64 was not measured; a causal or
    # window mask refuses it (its blocks may start past key 0)
    for mask_free in (False, True):
        cfg = fwd_config(head_dim, broadcast_q, q_len, mask_free=mask_free, **keys)
        assert cfg.shift_tail == (mask_free and broadcast_q and head_dim == 128), (mask_free, cfg)


@pytest.mark.parametrize("causal,window,shifted", [(False, None, True), (True, None, False),
                                                  (False, 16, False)])
def test_call_config_shifts_the_tail_of_mask_free_calls_only(causal, window, shifted, monkeypatch):
    """The launcher's choice (`call_fwd_config`) tells fwd_config whether the call has a mask."""
    from kernels import tlx_hopper

    monkeypatch.setattr(tlx_hopper, "_l2_bytes", lambda device: H200_L2)  # no GPU here
    query, key = torch.zeros(192, 2, 128), torch.zeros(4 * 300, 2, 128)
    key_offset = torch.arange(0, 5 * 300, 300)
    params = JFAParams(max_seq_len_q=192, max_seq_len_kv=300, sm_scale=None, causal=causal,
                       window_size=window, broadcast_q=True)
    assert call_fwd_config(query, key, key_offset, params).shift_tail == shifted


@pytest.mark.parametrize("head_dim,broadcast_q,q_len,long_kv", [
    (128, True, 128, False), (128, True, 128, True), (128, True, 192, False), (64, True, 128, False),
    (128, False, 0, False), (64, False, 0, False)])
def test_fast_epilogue_for_every_forward(head_dim, broadcast_q, q_len, long_kv):
    # run 39: the fill-0.1 and self fill-0.5 forwards gained 1.5-7 %, no row lost more than 1.5 %
    assert fwd_config(head_dim, broadcast_q, q_len, long_kv=long_kv).fast_epilogue


def _split_tiles_config(**changes):
    """The short-key PMA q128 tile with split_tiles (what the forward's A/B runs), fields changed."""
    cfg = fwd_config(128, True, 128, short_kv=True)
    return dataclasses.replace(cfg, **{"split_tiles": True, "late_p_cast": False, **changes})


_PLAIN = JFAParams(max_seq_len_q=128, max_seq_len_kv=100, sm_scale=None, broadcast_q=True)


def test_split_tiles_runs_the_short_key_pma_q128_tile():
    assert split_tiles_refusal(_split_tiles_config(), True, 128, 4, 132, _PLAIN) is None


@pytest.mark.parametrize("cfg, broadcast, q_len, pairs, n_prog, params, rule", [
    (_split_tiles_config(), False, 128, 4, 132, _PLAIN, "broadcast_q"),
    (_split_tiles_config(), True, 100, 4, 132, _PLAIN, "q_len == 64 * num_groups (128), got 100"),
    (_split_tiles_config(), True, 128, 4, 3, _PLAIN, "resident mode: heads * q-blocks <= CTAs (4 > 3)"),
    (_split_tiles_config(), True, 128, 4, 132, dataclasses.replace(_PLAIN, causal=True), "no causal"),
    (_split_tiles_config(), True, 128, 4, 132, dataclasses.replace(_PLAIN, window_size=16), "window"),
    (_split_tiles_config(tma_store_o=False), True, 128, 4, 132, _PLAIN, "tma_store_o"),
    (_split_tiles_config(block_n=64), True, 128, 4, 132, _PLAIN, "block_n == 32"),
    (_split_tiles_config(late_p_cast=True), True, 128, 4, 132, _PLAIN, "late_p_cast off"),
    (dataclasses.replace(fwd_config(128, True, 192, short_kv=True), split_tiles=True), True, 192, 3,
     132, _PLAIN, "num_groups == 2, got 3"),
])
def test_split_tiles_refusal_names_the_rule(cfg, broadcast, q_len, pairs, n_prog, params, rule):
    assert rule in split_tiles_refusal(cfg, broadcast, q_len, pairs, n_prog, params)


@pytest.mark.parametrize("q_len, short_kv, pairs, n_prog, params, split", [
    (128, True, 4, 132, _PLAIN, True),    # PMA q128 at fill 0.1
    (128, False, 4, 132, _PLAIN, False),  # 64-key blocks
    (192, True, 3, 132, _PLAIN, False),   # three groups
    (100, True, 4, 132, _PLAIN, False),   # q_len below the tile
    (128, True, 4, 3, _PLAIN, False),     # not resident
    (128, True, 4, 132, dataclasses.replace(_PLAIN, causal=True), False),
])
def test_split_tiles_taken_where_it_runs(q_len, short_kv, pairs, n_prog, params, split):
    cfg = fwd_config(128, True, q_len, short_kv=short_kv)
    chosen = with_split_tiles(cfg, q_len, pairs, n_prog, params)
    assert chosen.split_tiles == split
    assert chosen == (dataclasses.replace(cfg, **SPLIT_TILE_FIELDS) if split else cfg)
    assert not split or (chosen.split_tiles and not chosen.late_p_cast)
