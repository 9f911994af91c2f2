"""TLX Hopper (sm_90) backend of `kernels.jagged_flash_attention`: the contract and the launchers.

    supports(query, key, value, params) -> None | str     (None = supported, else the reason)
    forward(query, key, value, query_offset, key_offset, params) -> (out, lse)
    backward(grad_out, query, key, value, out, lse, query_offset, key_offset, params)
        -> (dq, dk, dv)

Layout (the jagged layout is drawn in `kernels/tlx_schedule.py`): query [total_q, Hq, D]
(broadcast_q: [q_len, Hq, D], query_offset None, out [B*q_len, Hq, D]); key/value [total_kv, Hkv, D];
offsets [B+1] on the device. lse is float32 [Hq, total_out], natural log, -inf (and out rows 0)
where a query sees no key. `params` is `kernels.common.JFAParams` (max_seq_len_q, max_seq_len_kv,
sm_scale, causal, window_size, broadcast_q, deterministic); sm_scale None means 1/sqrt(D).

Kernels: `tlx_hopper_fwd.jfa_fwd_kernel` (warp-specialised, persistent), `tlx_hopper_bwd`
(backward) and `tlx_hopper_bwd_pma` (broadcast_q q_len 65-128's backward, `uses_pma_roles`).
Nothing here reads device values on the host.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
from dataclasses import dataclass

import torch

from kernels import tlx_timeline
from kernels.tlx_launch import launch, trailing_constexprs
from kernels.tlx_schedule import cached_schedule

SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)

# Tests force a persistent grid size here (determinism for any number of CTAs); None = #SMs.
GRID_OVERRIDE: int | None = None
# Tests set this to fill outputs with NaN before the kernels run, so an unwritten row shows.
POISON_OUTPUTS = False


@functools.lru_cache(maxsize=1)
def _tlx_import_error() -> str | None:
    try:
        import triton.language.extra.tlx  # noqa: F401
        from kernels import tlx_hopper_bwd, tlx_hopper_fwd  # noqa: F401
    except Exception as exc:  # ImportError, or a Triton without TLX
        return f"fbtriton with TLX is not importable ({type(exc).__name__}: {exc})"
    return None


@functools.lru_cache(maxsize=8)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=8)
def _l2_bytes(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).L2_cache_size


@functools.lru_cache(maxsize=8)
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)  # ~5 us per call uncached (H200 host)


def tile_window_for(num_kv_heads: int, max_seq_len_kv: int, head_dim: int, itemsize: int,
                    l2_bytes: int) -> int:
    """The generic tile order's window (`FwdConfig.tile_window`) for a call.

    With window 1 the CTAs running together hold every head of a few (batch, block) entries; once
    one sequence's K and V over all KV heads outgrow L2, those head streams evict each other and
    window 0 (one sequence's blocks, head by head: concurrent CTAs share a head's K/V) wins. Run 12
    (H200, 50 MiB L2): dense B4 H32 N4096 (64 MiB) forward -7 %, forward+backward -3 %, outputs
    bit-identical; self B768 H4 N1024 (2 MiB) forward within noise, forward+backward 1-4 % slower.
    """
    kv_bytes = 2 * num_kv_heads * max_seq_len_kv * head_dim * itemsize
    return 0 if kv_bytes > l2_bytes else 1


def supports(query, key, value, params) -> str | None:
    """None if this backend can run the call, else the reason (for `auto`'s log line)."""
    if not (query.is_cuda and key.is_cuda and value.is_cuda):
        return "tlx needs CUDA tensors"
    if _capability(query.device.index) != (9, 0):
        return "tlx kernels are written for sm_90 (Hopper) only"
    err = _tlx_import_error()
    if err is not None:
        return err
    if query.dtype not in SUPPORTED_DTYPES:
        return f"tlx supports fp16/bf16 only, got {query.dtype}"
    if key.dtype != query.dtype or value.dtype != query.dtype:
        return "tlx needs query, key and value of one dtype"
    d = query.shape[-1]
    if d not in SUPPORTED_HEAD_DIMS or key.shape[-1] != d or value.shape[-1] != d:
        return f"tlx supports head dims {SUPPORTED_HEAD_DIMS} (same for q, k, v), got {d}"
    if query.shape[1] % key.shape[1]:
        return "tlx needs Hq % Hkv == 0"
    if params.deterministic and params.broadcast_q:
        pairs = query.shape[1] * triton_cdiv(query.shape[0], 128)  # the dq pass's q-blocks, worst config
        if pairs > _num_sms(query.device.index or 0):
            return ("tlx: deterministic broadcast_q dQ needs heads * q-blocks <= #SMs "
                    f"({pairs} > {_num_sms(query.device.index or 0)}); it would use atomics")
    return None


# ------------------------------------------------------------------------------------------
# forward
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FwdConfig:
    num_groups: int      # consumer warpgroups; BLOCK_M = 64 * num_groups
    block_n: int
    num_buf_q: int
    num_buf_kv: int
    consumer_regs: int
    tma_store_o: bool = False  # full 64-row O slices leave by TMA store (else tl.store)
    # generic tile order: windows of this many schedule entries, heads outer inside one
    # (tlx_schedule's docstring); 1: heads of one entry adjacent, 0: one sequence's q-blocks;
    # the launchers pick 0 or 1 by `tile_window_for`
    tile_window: int = 1
    # self/cross only, on in `fwd_config`'s choice: a group whose 64 rows all lie past qlen (a
    # sequence's last q-block) skips the math and only keeps the rings' and the ping-pong's
    # protocol. H200: self fill 0.5 forward -5.5 % (median of 7 A/Bs), fill 1.0 neutral; the skipped
    # rows are never stored, so outputs are bit-identical to it off
    skip_idle_groups: bool = False
    # keep the probabilities in fp32 across the next block's QK^T issue and cast them to the MMA
    # dtype after it (the TLX tutorial's order), instead of before: the cast then overlaps the
    # tensor core rather than delaying the QK^T issue; outputs are bit-identical. It costs live
    # registers: with BLOCK_N=64 and 2 groups (PMA q<=128) none spill and run 17 measured -2.0 to
    # -2.6 % at fill 0.9 (3 A/Bs; fill 0.5 0 to -7 %); with BLOCK_N=128 (self/cross) or 3 groups
    # (PMA q192) 52-55 words spill and it lost up to 16 %, so `fwd_config` takes it for the former
    late_p_cast: bool = False
    # the K/V slots' empty barriers take every consumer thread's arrival (`tlx.alloc_warp_barrier`)
    # instead of one per warpgroup after a bar.sync of its 128 threads: 4 fewer warpgroup syncs per
    # K/V block in each consumer's loop; outputs bit-identical. Run 27 (H200, 4 ABBA rounds): PMA
    # forward -0.9 to -2.2 % except q128 fill 0.1 +1.7 %; self +0.8 / +1.4 %, dense +2.0 %, so
    # `fwd_config` takes it for broadcast Q at D=128 only
    warp_arrive: bool = False
    # a row's running max moves only when a block raises it by more than 2^8, and threads whose
    # rows kept theirs branch over the accumulator's rescale (FlashAttention-4's lazy rescale;
    # `tlx_hopper_fwd.RESCALE_SLACK`): the same softmax up to rounding, not bit-identical. Run 28
    # (H200, 4 ABBA rounds): PMA forward -1 to -3 % (consumer instructions -14 %), self +1.3 / +1.9
    # %, dense 0, so `fwd_config` takes it for broadcast Q at D=128 only
    lazy_rescale: bool = False
    # the epilogue normalises O by one reciprocal per row and a multiply per element instead of an
    # fp32 division per element (div.full: a range check and a predicated rescale each in the SASS;
    # -8 % SASS in the PMA q128 kernel). Run 28: bit-identical O on all nine bench rows (the bf16
    # cast hides the fp32 ulp); PMA forward -0.2 to -4 %, self/dense -0.2 to +1.0 %: on for
    # broadcast Q at D=128
    rcp_normalise: bool = False
    # programmatic dependent launch: the kernel launches at the start of the schedule build before
    # it (its CTAs set up shared memory and barriers, then wait for the build in
    # `tlx_schedule.wait_for_previous_kernel`) instead of after it; outputs bit-identical. Run 36
    # (H200, forward, two processes of 4 ABBA rounds): PMA q192 fill 0.1 0.932 / 0.918, q128 fill
    # 0.1 0.984 / 0.997, the PMA fill 0.5 / 0.9 rows 0.97-1.014 (means 0.989-1.005); self 1.046 /
    # 1.014 and dense 1.018 (one process), so `fwd_config` takes it for broadcast Q at D=128 only.
    # The backward passes after their builds gained nothing (run 36: 0.983-1.015 forward+backward)
    pdl: bool = False
    # the epilogue's per-row reciprocal and log2 as single MUFU approximations (rcp.approx: 1 ulp,
    # lg2.approx: 2^-22 absolute) instead of the IEEE division and libdevice's log2 (~75 SASS
    # instructions per consumer and tile), and LSE stored from the accumulator's row layout
    # instead of tl.store's, which relayouts through shared memory behind two warpgroup barriers.
    # Run 39 (H200, forward, three A/Bs of 4 ABBA rounds): PMA q192 fill 0.1 0.934 / 0.976 /
    # 0.935, q128 fill 0.1 0.976 / 0.979 (a third sample host-stalled), self fill 0.5 0.981 / 0.987
    # / 0.982, every other row 0.99-1.015: on for every forward
    fast_epilogue: bool = True
    # broadcast Q with q_len == block_m, resident CTAs, no causal/window mask and O by TMA store
    # only: each consumer group computes all block_m rows of its own tiles (every other tile of the
    # CTA) instead of its 64 rows of every tile in ping-pong (`tlx_hopper_fwd`'s SPLIT_TILES); O and
    # LSE bit-identical. Run 41's profile of the PMA q128 fill-0.1 forward: ~3 blocks per tile, the
    # producer waiting for free K/V slots (46 % of its samples) while the consumers issue in 40 %
    # of the cycles and DRAM runs at 66 %: the ping-pong tile's latency bounds it. A group waits
    # for and releases the other group's blocks too (run 46: stepping over them by count alone, a
    # group past more than num_buf_kv of them read stale slots: wrong rows or a hang)
    split_tiles: bool = False
    # broadcast Q without a causal/window mask: a sequence's partial last K/V block, where it has
    # block_n keys or more, is loaded ending at its last key (the first rows repeat the previous
    # block's, just read by the same CTA, and are masked) instead of reading block_n - klen %
    # block_n rows of the next sequence, which another CTA reads at another time. At the q128
    # fill-0.1 row's 32-key blocks that is ~13 of the ~16 padded rows per tile (16 % of the K/V
    # reads, run 46). Not bit-identical: the tail's columns sit at other places in the block.
    # Run 47 (H100, forward, 4 ABBA rounds): q128 fill 0.1 0.972 / 0.951; the six PMA rows (q192
    # fill 0.1 / 0.5 / 0.9, q128 fill 0.1 / 0.5 / 0.9) 0.956 / 0.975 / 0.991 / 1.000 / 0.960 (cut
    # there) and 0.956 / 0.969 / 0.994 / 0.962 / 0.959 / 0.954: `fwd_config` takes it for broadcast
    # Q at D = 128 without a mask
    shift_tail: bool = False
    # with shift_tail: the shifted last block run by the unmasked bulk loop, its mask (the columns
    # below col_lo) under a run-time branch taken only there, so a consumer holds no masked
    # block body of its own (sm_90: the split build 5,224 -> 4,272 SASS instructions). Run 50's
    # merge_tail, the same with the mask on every block, lost 2-9 % to that per-block select;
    # the branch costs a compare per block. Outputs bit-identical. With first_branch it removes
    # the split tile's second-group stall (run 51, H100 timeline: that group's first tile's last
    # block + PV 5.0 -> 1.1 µs; with the groups' tiles swapped the stall had stayed with group 1,
    # the second consumer replica's code, so it follows the code, not the order). Run 51 (H100,
    # forward, both switches, two processes of 4 ABBA rounds): PMA q192 fill 0.1 0.982 / 0.982,
    # q128 fill 0.1 0.988 / 0.988, the PMA fill 0.5 / 0.9 rows 0.982-1.019; on the H200 (the old
    # default as the candidate): q192 fill 0.1 1.078 / 1.080, q128 fill 0.1 1.029 / 1.027.
    # `fwd_config` takes both for the 32-key broadcast tiles (q192's; q128's split tile in
    # SPLIT_TILE_FIELDS)
    tail_branch: bool = False
    # a tile's first block with one softmax whose mask (keys past klen, causal / window) sits
    # under the run-time branch that now picks between a masked and an unmasked copy of the
    # whole softmax (`_first_block`): ~170-230 fewer SASS instructions per consumer replica, the
    # same work per tile but a row-max guard (4 selects per thread). With tail_branch, the split
    # build's consumers hold one block body each. Outputs bit-identical. Run 51 (H100, forward,
    # alone): the PMA rows 0.991-1.006, self 1.025 / 1.030, dense 1.010: with tail_branch only
    first_branch: bool = False
    # with split_tiles: a CTA's tiles in the order 0, 1, 3, 2, 4, 5, 7, 6, ... (every second pair
    # swapped), so the alternating groups take tiles 0, 3, 4, 7, ... and 1, 2, 5, 6, ... of the
    # CTA's heaviest-first list instead of group 0 always the heavier of each pair. Run 52's H200
    # timeline (PMA q128 fill 0.1): group 0 took 3.6 more of a CTA's ~87 blocks than group 1
    # (0 to 7), the groups ended 2.1-2.5 µs apart, and the CTA's end is the later group's. Run 52's
    # balanced_split evened the blocks (0.4) but gave a group consecutive tiles, which stalls the
    # other behind them in the shared K/V ring: 1.042. Here the groups still alternate in ring
    # order. Replayed on that timeline's tiles: group 0's lead 3.58 -> 1.88 blocks (0 to 7 -> 0 to
    # 4); at its ~0.65 µs of group gap a block, predicted ~0.5 µs off a CTA's end (< 1 %). O and
    # LSE bit-identical (a tile's computation does not depend on its position). Off
    swap_pairs: bool = False

    @property
    def block_m(self) -> int:
        return 64 * self.num_groups


# mean keys per sequence from which broadcast Q (q_len <= 128, D = 128) takes 128-key blocks
# (`fwd_config`'s long_kv): half the blocks' fixed costs against a tail padded to 128 keys and a
# two-stage ring. Run 30 (H200, PMA q128, forward, 128-key blocks / 64-key blocks, ABBA rounds):
# 0.975 and 0.972 at a mean of ~920 keys (fill 0.9), 1.023 at ~510 (fill 0.5), 1.015 at ~100
LONG_KV_MEAN = 640
# mean keys per sequence below which broadcast Q at D = 128 takes 32-key blocks (`fwd_config`'s
# short_kv), the same K/V bytes in flight in twice the stages: a masked tail of at most 31 keys
# instead of 63 against twice the blocks' fixed costs. Run 40 (H200, PMA forward, 32-key / 64-key
# blocks, 4 ABBA rounds): at a mean of ~100 keys (fill 0.1) q192 0.969 / 0.976 / 0.982 and q128
# 0.988 / 0.979 / 0.991; at ~500 (fill 0.5) 1.095 / 1.160, at ~900 1.181 / 1.229. The cut lies
# below the ratios' linear crossings (~180 keys for q192, ~130 for q128)
SHORT_KV_MEAN = 128


@functools.lru_cache(maxsize=256)  # a frozen dataclass per call shape: no rebuild per call
def fwd_config(head_dim: int, broadcast_q: bool, q_len: int, tile_window: int = 1,
               long_kv: bool = False, short_kv: bool = False, mask_free: bool = False) -> FwdConfig:
    """Tile shape for a call. q_len is the broadcast Q length (ignored otherwise); tile_window as
    `tile_window_for` chose it; long_kv as `long_keys` found it (broadcast Q at D = 128 with q_len
    <= 128 only); short_kv as `short_keys` found it (broadcast Q at D = 128); mask_free: the call
    has no causal or window mask (broadcast Q at D = 128 then loads a sequence's partial last K/V
    block ending at its last key, `FwdConfig.shift_tail`).

    A 3-warpgroup tile (192 rows) fits PMA's q_len=192 exactly instead of wasting 64 of 256 rows;
    three consumers leave ~160 registers each, so it runs with 64-key blocks. Broadcast Q at D=128
    stores O by TMA from a staging tile per group (run 23, H200, ABBA in one process: forward -2.3
    to -3.5 % at PMA fill 0.5 / 0.9; run 24: tl.store instead cost +1.9 to +3.9 % at fill 0.1 /
    0.5 / 0.9, q128 and q192). With q_len a multiple of 64 every O slice leaves that way and the
    masked tl.store of O is not compiled: the 16 KB of shared memory its relayout held would fit
    one more K/V stage, which did not pay (run 24: q128 five stages against four +0 to +3.4 %
    forward, q192 four against three within +-0.5 %).
    """
    o_by_tma = broadcast_q and head_dim > 64
    shift_tail = broadcast_q and head_dim > 64 and mask_free
    if broadcast_q and 128 < q_len <= 192:
        cfg = FwdConfig(num_groups=3, block_n=64, num_buf_q=1, num_buf_kv=3, consumer_regs=160,
                        tile_window=tile_window, tma_store_o=o_by_tma, warp_arrive=head_dim > 64,
                        lazy_rescale=head_dim > 64, rcp_normalise=head_dim > 64,
                        pdl=head_dim > 64, shift_tail=shift_tail)
        if short_kv and head_dim > 64:
            # one block body per consumer: less code, no stall at its first runs (tail_branch)
            cfg = dataclasses.replace(cfg, block_n=32, num_buf_kv=6, tail_branch=shift_tail,
                                      first_branch=True)
        return cfg
    if broadcast_q and head_dim > 64:
        # PMA is memory-bound: 64-key stages keep more K/V bytes in flight than 128-key ones (run
        # 11: five beat four by 4.6 % at fill 0.9, with tl.store; the O staging tiles took the
        # fifth's place in run 23)
        cfg = FwdConfig(num_groups=2, block_n=64, num_buf_q=1, num_buf_kv=4,
                        consumer_regs=232, tile_window=tile_window, late_p_cast=True,
                        tma_store_o=o_by_tma, warp_arrive=True, lazy_rescale=True,
                        rcp_normalise=True, pdl=True, shift_tail=shift_tail)
        if long_kv:
            # the same tile in two 128-key stages (the P cast before the PV issue: with it after,
            # 32 words spill)
            cfg = dataclasses.replace(cfg, block_n=128, num_buf_kv=2, late_p_cast=False)
        elif short_kv:
            cfg = dataclasses.replace(cfg, block_n=32, num_buf_kv=8)
        return cfg
    if broadcast_q:
        return FwdConfig(num_groups=2, block_n=128, num_buf_q=1, num_buf_kv=3, consumer_regs=232,
                         tile_window=tile_window)
    # self/cross: O by TMA store, staged in the Q slot it no longer needs (run 10: 3-7 % forward);
    # groups without rows skip the math (FwdConfig.skip_idle_groups)
    return FwdConfig(num_groups=2, block_n=128, num_buf_q=2, num_buf_kv=3 if head_dim <= 64 else 2,
                     consumer_regs=232, tma_store_o=True, skip_idle_groups=True,
                     tile_window=tile_window)


def long_keys(key: torch.Tensor, key_offset: torch.Tensor) -> bool:
    """Whether a call's sequences hold LONG_KV_MEAN keys or more on average (shapes only: no device
    read)."""
    return key.shape[0] >= LONG_KV_MEAN * max(key_offset.numel() - 1, 1)


def short_keys(key: torch.Tensor, key_offset: torch.Tensor) -> bool:
    """Whether a call's sequences hold fewer than SHORT_KV_MEAN keys on average (shapes only)."""
    return key.shape[0] < SHORT_KV_MEAN * max(key_offset.numel() - 1, 1)


def call_fwd_config(query: torch.Tensor, key: torch.Tensor, key_offset: torch.Tensor,
                    params) -> FwdConfig:
    """`fwd_config`'s choice for a call (the launcher's default; tests and benchmarks derive their
    variants from it). Long keys count without a window only: the 128-key broadcast tile spills
    28-54 words with one (sm_90 compile check); the 32-key tiles spill with none. Split tiles where
    `with_split_tiles` takes them."""
    broadcast = bool(params.broadcast_q)
    q_len = query.shape[0] if broadcast else 0
    cfg = fwd_config(query.shape[-1], broadcast, q_len, call_tile_window(key, params),
                     params.window_size is None and long_keys(key, key_offset),
                     short_keys(key, key_offset), not params.causal and params.window_size is None)
    if not (broadcast and cfg.block_n == 32):  # the only tile split_tiles runs
        return cfg
    pairs = query.shape[1] * triton_cdiv(q_len, cfg.block_m)
    n_prog = GRID_OVERRIDE or _num_sms(query.device.index or 0)
    return with_split_tiles(cfg, q_len, pairs, n_prog, params)


# the fields `with_split_tiles` sets: the split tile and the early P cast it needs (a split-tile
# switch that wins its A/B becomes a default here, and only here); one block body per consumer
# (`FwdConfig.tail_branch`: the split build 5,224 -> 3,904 SASS instructions, its second group's
# first-run stall gone; run 51, forward, PMA q128 fill 0.1, two processes of 4 ABBA rounds:
# H100 0.990 / 0.989; H200, without them against with them, 1.029 / 1.027). Four K/V stages
# instead of eight, 0.991 on the H100, cost the H200 11 % (eight against four: 0.898 / 0.899):
# its faster HBM wants more bytes in flight
SPLIT_TILE_FIELDS = types.MappingProxyType({"split_tiles": True, "late_p_cast": False,
                                            "tail_branch": True, "first_branch": True})


@functools.lru_cache(maxsize=256)  # frozen dataclasses: no dataclasses.replace per call (host time)
def with_split_tiles(cfg: FwdConfig, q_len: int, pairs: int, n_prog: int, params) -> FwdConfig:
    """cfg with `SPLIT_TILE_FIELDS` (`FwdConfig.split_tiles`, the late P cast off, which it
    needs, and one block body per consumer) where `split_tiles_refusal` lets it run a broadcast
    call, else cfg. Run 41 (H200, PMA q128 fill 0.1, forward, five processes of 4 ABBA rounds):
    0.968-0.975 against the ping-pong tile."""
    split = dataclasses.replace(cfg, **SPLIT_TILE_FIELDS)
    return split if split_tiles_refusal(split, True, q_len, pairs, n_prog, params) is None else cfg


def o_by_tma_only(cfg: FwdConfig, broadcast_q: bool, q_len: int) -> bool:
    """The forward's O_TMA_ONLY: broadcast Q with O by TMA store and q_len a multiple of 64, so no
    64-row O slice straddles a sequence end and the kernel compiles no tl.store of O."""
    return bool(cfg.tma_store_o and broadcast_q and q_len % 64 == 0)


def _check_count(cfg: FwdConfig | BwdConfig, name: str, minimum: int, meaning: str) -> None:
    """Field `name` of cfg an int of at least `minimum`, else a ValueError naming it and the rule."""
    value = getattr(cfg, name)
    if not (isinstance(value, int) and value >= minimum):
        raise ValueError(f"tlx {type(cfg).__name__}: {name} must be an int >= {minimum} ({meaning}), "
                         f"got {value!r}")


# the split-role pass's epilogue switches that build on another (switch -> the one it needs):
PMA_SWITCH_NEEDS = {
    # dK's staging over the P^T tiles would outlive P^T's early hand-back
    "pma_split_ps": "pma_dk_stage",
    # without it dK's wgmmas are issued with dV's already
    "pma_dk_early": "pma_split_ps",
    # P^T goes back before dV's epilogue on its own barriers (pma_split_ps), dV staged in dK's tile
    # (pma_dk_stage, which pma_split_ps needs)
    "pma_dv_in_dk_stage": "pma_split_ps",
}


def _check_config(cfg: FwdConfig | BwdConfig, head_dim: int = 0) -> None:
    """The launchers' checks of a configuration that the kernels would otherwise hang on, misread or
    not fit in shared memory."""
    _check_count(cfg, "tile_window", 0, "0: one sequence's blocks")
    if not isinstance(cfg, BwdConfig):
        return
    _check_count(cfg, "pma_buf_k", 1, "ring slots")
    _check_count(cfg, "pma_buf_v", 1, "ring slots")
    if cfg.pma_shared_roles and cfg.pma_buf_k + cfg.pma_buf_v > 5:
        # 16 KB slots beside three steps' Q, dO, P^T and dS^T (144 KB) within the 227 KB
        raise ValueError(f"tlx BwdConfig: pma_shared_roles needs pma_buf_k + pma_buf_v <= 5, got "
                         f"{cfg.pma_buf_k} + {cfg.pma_buf_v}")
    if cfg.pma_dk_stage and cfg.pma_buf_k + cfg.pma_buf_v + 2 * cfg.pma_buf_ps > 7:
        # in 16 KB units beside Q and dO: a K or V slot 1, a P^T/dS^T slot 2, the dK staging tile
        # 1; eight fill the shared memory (run 32: 2 + 2 + 2 x 2 + 1 asked for 248,360 B)
        raise ValueError(f"tlx BwdConfig: pma_dk_stage needs pma_buf_k + pma_buf_v + 2 * pma_buf_ps"
                         f" <= 7, got {cfg.pma_buf_k} + {cfg.pma_buf_v} + 2 * {cfg.pma_buf_ps}")
    for switch, needed in PMA_SWITCH_NEEDS.items():
        if getattr(cfg, switch) and not getattr(cfg, needed):
            raise ValueError(f"tlx BwdConfig: {switch} needs {needed}")
    if cfg.pma_fold_delta and cfg.pma_buf_k < 3:
        # a tile's K slot stays held until the next tile's dQ wgmma read it, and a batch element's
        # O rows take a slot before its first tile: with two, that tile waits for the held slot
        raise ValueError(f"tlx BwdConfig: pma_fold_delta needs pma_buf_k >= 3, got {cfg.pma_buf_k}")
    if head_dim == 128 and cfg.fused_dq and cfg.dkdv_buf_q != 2:
        # one slot: a step's Q/dO slot is released only in the next step (after its dQ reduce-add
        # read it), a hang; three: 213,352 B + 32 KB does not fit in shared memory
        raise ValueError(f"tlx BwdConfig: fused_dq at head dim 128 needs dkdv_buf_q == 2, got "
                         f"{cfg.dkdv_buf_q}")


def call_tile_window(key: torch.Tensor, params) -> int:
    """`tile_window_for` of a call (the launchers' default; benchmarks A/B against it)."""
    return tile_window_for(key.shape[1], int(params.max_seq_len_kv), key.shape[2], key.element_size(),
                           _l2_bytes(key.device.index or 0))


def _sm_scale(params, head_dim: int) -> float:
    return params.sm_scale if params.sm_scale is not None else 1.0 / math.sqrt(head_dim)


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """Contiguous and 16-byte aligned (TMA): the tensor itself when it already is."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


@functools.lru_cache(maxsize=1)
def _descriptor_parts() -> tuple[type, dict]:
    """TensorDescriptor and its fields with defaults (padding, ...), as this Triton declares them."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor, {f.name: f.default for f in dataclasses.fields(TensorDescriptor)
                              if f.default is not dataclasses.MISSING}


def _descriptor(t: torch.Tensor, rows: int, block_rows: int, block_cols: int | None = None):
    """TMA descriptor of t [rows, H, D] seen as [rows, H*D]; boxes [block_rows, block_cols or D].

    Built without TensorDescriptor's checks, which cost ~5 us per descriptor on the H200 host and
    a PMA forward+backward builds eight (run 23): the launchers pass TMA-ready tensors
    (`_tma_ready` or fresh allocations; D in {64, 128}), rows > 0 (empty calls return first), and
    the blocks are powers of two. The fields go in as one dict (a copy of the defaults): ~0.7 us
    against 1.9 with an import and a keyword update per call (development CPU).
    test_tlx_hopper_config checks it equals the checked build."""
    descriptor_type, fields = _descriptor_parts()
    _, h, d = t.shape
    fields = fields.copy()
    fields["base"] = t
    fields["shape"] = [rows, h * d]
    fields["strides"] = [h * d, 1]
    fields["block_shape"] = [block_rows, block_cols or d]
    desc = object.__new__(descriptor_type)
    desc.__dict__ = fields
    return desc


@dataclass(frozen=True)
class _FwdPlan:
    """What `forward` derives from a call's shapes, dtypes, device, params and configuration,
    checked once and reused by every call with the same (`_fwd_plan`): the PMA fill-0.1 forwards
    are host-bound in the bench (runs 41-44), and reusing the configuration's choice, its checks
    and the launch's fixed arguments took the call from 47.0 to 42.4 us on the development CPU
    (`benchmarks.tlx_launch_probe --cpu-proxy`, session 45)."""

    cfg: FwdConfig
    schedule: tuple  # cached_schedule's arguments after the offsets
    n_prog: int
    pairs: int  # the schedule's (heads, q-block) pairs
    resident: bool
    ctas_per_pair: int
    q_box: int  # rows of a consumer's Q and O tiles
    scalars: tuple  # the kernel's scalar arguments before total_out
    scalars_after: tuple  # and after it
    constexprs: tuple  # the kernel's constexpr arguments, in its signature's order (positional:
    # no keyword dict to build and unpack per call)
    options: dict = dataclasses.field(hash=False)  # the launch's num_warps, num_stages, launch_pdl


# _fwd_plan's key -> _FwdPlan; cleared when full (a process sees few call signatures: the key holds
# the key rows' mean class, not their count, so jagged batches of one size share a plan)
_FWD_PLANS: dict[tuple, _FwdPlan] = {}
MAX_FWD_PLANS = 256


def fwd_q_box(cfg: FwdConfig) -> int:
    """Rows of a consumer group's Q and O TMA boxes: a whole split tile, else one 64-row slice."""
    return cfg.block_m if cfg.split_tiles else 64


def fwd_constexprs(cfg: FwdConfig, head_dim: int, causal: bool, has_window: bool, broadcast: bool,
                   resident: bool, q_len: int, timeline: bool) -> dict:
    """`jfa_fwd_kernel`'s constexpr arguments for a configuration (the launcher's plan and the
    sm_90 compile check build the same kernel from them)."""
    return dict(
        HEAD_DIM=head_dim, BLOCK_N=cfg.block_n, NUM_GROUPS=cfg.num_groups, NUM_BUF_Q=cfg.num_buf_q,
        NUM_BUF_KV=cfg.num_buf_kv, CONSUMER_REGS=cfg.consumer_regs, CAUSAL=causal,
        HAS_WINDOW=has_window, BROADCAST_Q=broadcast, RESIDENT=resident,
        TMA_STORE_O=cfg.tma_store_o, SKIP_IDLE_GROUPS=cfg.skip_idle_groups,
        LATE_P_CAST=cfg.late_p_cast, O_TMA_ONLY=o_by_tma_only(cfg, broadcast, q_len),
        WARP_ARRIVE=cfg.warp_arrive, LAZY_RESCALE=cfg.lazy_rescale,
        RCP_NORMALISE=cfg.rcp_normalise, PDL=cfg.pdl, FAST_EPILOGUE=cfg.fast_epilogue,
        SPLIT_TILES=cfg.split_tiles, SHIFT_TAIL=cfg.shift_tail,
        TAIL_BRANCH=cfg.tail_branch, FIRST_BRANCH=cfg.first_branch, SWAP_PAIRS=cfg.swap_pairs,
        TIMELINE=timeline)


def _fwd_plan(query, key, key_offset, B: int, params, config: FwdConfig | None,
              timeline: bool) -> _FwdPlan:
    """The call's `_FwdPlan`, built (and its configuration checked, raising a ValueError naming the
    rule) on the first call with its signature. The key holds everything the plan reads: the
    shapes but the jagged row counts (the keys' count only as `long_keys` / `short_keys` classify
    it), dtypes, device, params, config, the CTAs and L2 in use and the configuration chooser
    (benchmarks replace `fwd_config`)."""
    index = query.device.index or 0
    broadcast = bool(params.broadcast_q)
    plan_key = (query.shape[1:], query.shape[0] if broadcast else -1, key.shape[1:], query.dtype,
                key.dtype, index, B, params, config, long_keys(key, key_offset),
                short_keys(key, key_offset), GRID_OVERRIDE or _num_sms(index), _l2_bytes(index),
                fwd_config, timeline)
    plan = _FWD_PLANS.get(plan_key)
    if plan is None:
        plan = _build_fwd_plan(query, key, key_offset, B, params, config, timeline)
        if len(_FWD_PLANS) >= MAX_FWD_PLANS:
            _FWD_PLANS.clear()
        _FWD_PLANS[plan_key] = plan
    return plan


def _build_fwd_plan(query, key, key_offset, B: int, params, config: FwdConfig | None,
                    timeline: bool) -> _FwdPlan:
    """`_fwd_plan`'s plan for a call it has not seen: the configuration chosen (or `config`) and
    checked, the grid, the kernel's fixed arguments."""
    from kernels.tlx_hopper_fwd import jfa_fwd_kernel  # for its signature only

    hq, d = query.shape[1], query.shape[2]
    hkv = key.shape[1]
    broadcast = bool(params.broadcast_q)
    q_len = query.shape[0] if broadcast else 0
    cfg = config or call_fwd_config(query, key, key_offset, params)
    _check_config(cfg)
    if cfg.tma_store_o and not broadcast and cfg.num_buf_q < 2:
        raise ValueError("tlx FwdConfig: tma_store_o with self/cross attention needs num_buf_q >= 2: "
                         "O is staged in a group's Q slot while the next tile's Q loads into the other")
    if cfg.shift_tail and not (broadcast and not params.causal and params.window_size is None):
        raise ValueError("tlx FwdConfig: shift_tail needs broadcast_q without a causal or window "
                         "mask (a tile's blocks then start at key 0 and only the last is partial)")
    if broadcast and cfg.skip_idle_groups:
        raise ValueError("tlx FwdConfig: skip_idle_groups needs self/cross attention (not broadcast_q): "
                         "it is only tested and measured there")
    max_q = q_len if broadcast else int(params.max_seq_len_q)
    num_mb = max(1, triton_cdiv(max_q, cfg.block_m))
    window = params.window_size
    n_prog = GRID_OVERRIDE or _num_sms(query.device.index or 0)
    pairs = hq * num_mb  # the schedule's (heads, q-block) pairs
    resident = broadcast and pairs <= n_prog
    if cfg.split_tiles:  # first: its fields bring tail_branch, which a masked call refuses too
        reason = split_tiles_refusal(cfg, broadcast, q_len, pairs, n_prog, params)
        if reason is not None:
            raise ValueError(f"tlx FwdConfig: split_tiles {reason}")
    if cfg.tail_branch and not cfg.shift_tail:
        raise ValueError("tlx FwdConfig: tail_branch needs shift_tail (it runs the shifted last "
                         "block in the bulk loop)")
    if cfg.swap_pairs and not cfg.split_tiles:
        raise ValueError("tlx FwdConfig: swap_pairs needs split_tiles (it orders the tiles the "
                         "split tile's groups alternate over)")
    ctas_per_pair = n_prog // pairs if resident else 1
    if resident:
        n_prog = pairs * ctas_per_pair
    constexprs = fwd_constexprs(cfg, d, bool(params.causal), window is not None, broadcast,
                                resident, q_len, timeline)
    return _FwdPlan(
        cfg=cfg,
        schedule=(B, q_len, num_mb, window, bool(params.causal), broadcast, cfg.block_m, cfg.block_n),
        n_prog=n_prog, pairs=pairs, resident=resident, ctas_per_pair=ctas_per_pair,
        q_box=fwd_q_box(cfg),
        scalars=(_sm_scale(params, d), 0 if window is None else int(window), B, hq, hq // hkv, q_len,
                 num_mb),
        scalars_after=(ctas_per_pair, cfg.tile_window or num_mb),
        constexprs=trailing_constexprs(jfa_fwd_kernel, constexprs),
        options=dict(num_warps=4, num_stages=1, launch_pdl=cfg.pdl))


def forward(query, key, value, query_offset, key_offset, params, config: FwdConfig | None = None,
            timeline: list | None = None):
    """Jagged attention forward; returns (out, lse). See the module docstring.

    timeline: a list to receive the launch's per-CTA timestamps (`tlx_timeline.Timeline`, a
    diagnostic: the kernel then also writes them; `benchmarks/tlx_timeline.py`); nothing is
    appended when no kernel runs (no output row, or no key at all)."""
    # looked up per call: benchmarks/tlx_fwd_bound.py swaps in timing-only builds of its source
    from kernels.tlx_hopper_fwd import jfa_fwd_kernel

    reason = supports(query, key, value, params)
    if reason is not None:
        raise ValueError(f"tlx backend: {reason}")
    query, key, value = _tma_ready(query), _tma_ready(key), _tma_ready(value)
    B = key_offset.numel() - 1
    hq, d = query.shape[1], query.shape[2]
    broadcast = bool(params.broadcast_q)
    total_out = B * query.shape[0] if broadcast else query.shape[0]
    out = torch.empty((total_out, hq, d), device=query.device, dtype=query.dtype)
    lse = torch.empty((hq, total_out), device=query.device, dtype=torch.float32)
    if POISON_OUTPUTS:
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
    if total_out == 0:
        return out, lse
    if key.shape[0] == 0:  # every key sequence empty
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    plan = _fwd_plan(query, key, key_offset, B, params, config, timeline is not None)
    cfg = plan.cfg
    tile_entry, n_entries = cached_schedule(query_offset, key_offset, *plan.schedule,
                                            launch_dependents=cfg.pdl)
    desc_q = _descriptor(query, query.shape[0], plan.q_box)
    desc_k = _descriptor(key, key.shape[0], cfg.block_n)
    desc_v = _descriptor(value, value.shape[0], cfg.block_n)
    desc_o = _descriptor(out, total_out, plan.q_box) if cfg.tma_store_o else desc_q  # else not written
    stamps = None
    if timeline is not None:
        stamps = tlx_timeline.allocate(
            plan.n_prog, cfg.num_groups,
            tlx_timeline.max_iterations(plan.resident, B, plan.ctas_per_pair, B * plan.pairs,
                                        plan.n_prog, cfg.swap_pairs),
            query.device)
        timeline.append(stamps)
    launch(jfa_fwd_kernel, (plan.n_prog,),
        desc_q, desc_k, desc_v, desc_o, out, lse,
        query_offset if query_offset is not None else key_offset, key_offset,
        tile_entry, n_entries, *plan.scalars, total_out, *plan.scalars_after,
        None if stamps is None else stamps.buffer, None if stamps is None else stamps.stride,
        *plan.constexprs, **plan.options)
    return out, lse


def split_tiles_refusal(cfg: FwdConfig, broadcast: bool, q_len: int, pairs: int, n_prog: int,
                        params) -> str | None:
    """None where `FwdConfig.split_tiles` can run a call, else what it needs (the kernel computes a
    group's tile from one resident Q tile of block_m rows and stores its O in one TMA box).
    pairs: (head, q-block) pairs; n_prog: the persistent CTAs."""
    if not broadcast:
        return "needs broadcast_q"
    if cfg.num_groups != 2:  # three groups' 192-row accumulators alone take 192 registers
        return f"needs num_groups == 2, got {cfg.num_groups}"
    if q_len != cfg.block_m:
        return f"needs q_len == 64 * num_groups ({cfg.block_m}), got {q_len}"
    if pairs > n_prog:
        return f"needs the resident mode: heads * q-blocks <= CTAs ({pairs} > {n_prog})"
    if params.causal or params.window_size is not None:
        return "needs no causal or window mask"
    if not cfg.tma_store_o:
        return "needs tma_store_o"
    if cfg.block_n != 32 or cfg.late_p_cast:
        # a group's [block_m, block_n] scores beside its [block_m, D] accumulator: 64-key blocks
        # spill 228-265 words, fp32 probabilities across the next QK^T 41-47 (sm_90 compile check)
        return (f"needs block_n == 32 and late_p_cast off (more spills registers), got block_n "
                f"{cfg.block_n}, late_p_cast {cfg.late_p_cast}")
    return None


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# ------------------------------------------------------------------------------------------
# backward
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BwdConfig:
    dq_groups: int = 2        # dq pass: consumer warpgroups, BLOCK_M = 64 * dq_groups
    dq_block_n: int = 64
    dq_buf_kv: int = 3
    dq_regs: int = 232
    dkdv_buf_q: int = 2       # dk/dv pass: Q/dO step ring depth (KV tile = 128 rows, 2 consumers)
    dkdv_regs: int = 240
    dkdv_tma_store: bool = True  # dk/dv pass: full 64-row halves leave by TMA store (else tl.store)
    tile_window: int = 1  # both passes, as FwdConfig.tile_window (0: one sequence's blocks)
    # D=128 with deterministic=False: dQ = dS K inside the dK/dV pass (5 GEMMs per block pair
    # instead of 7), each step's fp32 partial reduce-added into an fp32 dQ by TMA (broadcast_q:
    # every tile into the same q_len rows, in L2); no dq pass. Run 15 (H200, forward+backward):
    # PMA rows -8 to -18 %, self -3 %, dense B4 H32 -2 %. deterministic=True (the order of the
    # adds is not fixed) keeps the dq pass, and so does D=64 (its K-slice operand changes the K
    # tiles' swizzle away from the dK/dV TMA store's: does not compile)
    fused_dq: bool = True
    # fused dK/dV pass: when the Q/dO slot that staged the previous step's dQ partial goes back to
    # the producer (after a wait for its reduce-add to read it): right after this step's S^T/dP^T
    # are issued (early), or after its dV/dK are (late). Run 16 (A/B x3): late is -2..-3 % forward+
    # backward on PMA q128/q192 fill 0.9 and -6..-8 % in 2 of 3 samples at q128 fill 0.5, but
    # +0..+6 % on self and +1 % on dense B4 H32, so `bwd_config` takes it for broadcast_q only
    dkdv_early_q_release: bool = False
    # broadcast_q with 64 < q_len <= 128, one query head per KV head, no causal/window mask, D=128:
    # the one-pass backward with split warp roles (`tlx_hopper_bwd_pma`; `uses_pma_roles` decides),
    # deterministic (per-CTA dQ partials summed in CTA order); the other calls ignore it. Run 22
    # (H200, PMA q128 forward+backward over the fused pass, 4 ABBA rounds): -7.6 % at fill 0.5 and
    # 0.9, and with three K/V slots and one P^T/dS^T slot (the same 226 KB) -3.6 % more
    pma_roles: bool = False
    # its K and V rings (64-key tiles): a tile's V is free at the dP^T wait, its K only after the
    # next tile's dQ wgmma. Run 31 (H200, PMA q128 forward+backward, against one ring of 3 shared
    # K/V slots, the same 96 KB): 3 K + 3 V 0.961 / 0.980 / 0.976 and 1.004 / 1.015 / 0.977 at
    # fill 0.1 / 0.5 / 0.9 (4 and 6 ABBA rounds); 4 K + 2 V 0.995 / 0.972 / 1.001
    pma_buf_k: int = 3
    pma_buf_v: int = 3
    pma_buf_ps: int = 1       # its P^T/dS^T ring per step, from the score to the gradient warpgroup
    # 2 x 160 + 168 + the producer's 24 fill the register file (score 168 / gradient 152 spills
    # dK/dV, and ptxas then serialises every wgmma)
    pma_score_regs: int = 160
    pma_grad_regs: int = 168
    # the split-role pass computes delta = rowsum(dO * O) itself instead of a preprocess kernel: the
    # producer loads each batch element's O rows through the K and V rings (one extra turn per
    # element), each score warpgroup sums its step's rows against the dO tile it holds anyway. The
    # preprocess read O and dO (B * q_len rows each) whatever the keys. Run 25 (H200, PMA q128
    # forward+backward, 5 A/Bs each, gradients bit-identical): fill 0.1 -8 %, 0.5 -3.3 %, 0.9 -2.4 %
    pma_fold_delta: bool = False
    # its gradient warpgroup stages dK in a tile of its own (paid for by a K or V slot) and stores
    # whole 64-key tiles from it by TMA without waiting (the next tile's dK waits for that store's
    # read), handing the P^T/dS^T slot back before dK's epilogue; dV keeps its staging over P^T.
    # Run 32 (H200, PMA q128 forward+backward, 4 ABBA rounds, gradients bit-identical): 3 K + 2 V
    # with it 0.958 / 0.979 / 0.958 at fill 0.1 / 0.5 / 0.9 against 3 K + 3 V without; 3 K + 2 V
    # alone 1.034 / 0.988 / 1.011. `bwd_config` takes both for broadcast_q
    pma_dk_stage: bool = False
    # with pma_dk_stage, its P^T tiles handed to the gradient warpgroup on barriers of their own:
    # the score warpgroups store P^T before waiting for dP^T, the gradient warpgroup computes dV
    # and its epilogue (handing P^T back) before dK waits for dS^T. Run 33 (H200, PMA q128
    # forward+backward, two processes of 4 ABBA rounds, gradients bit-identical): 1.007 / 0.989 /
    # 0.984 and 1.013 / 0.991 / 0.963 at fill 0.1 / 0.5 / 0.9. `bwd_config` takes it for broadcast_q
    pma_split_ps: bool = False
    # with pma_split_ps, its gradient warpgroup waits for dS^T and issues dK's wgmmas right after
    # dV's, before dV's epilogue (staging, read-back, masked stores), which then overlaps them; P^T
    # still goes back after that epilogue. Run 34 (H200, PMA q128 forward+backward, four processes
    # of 4 ABBA rounds, gradients bit-identical): fill 0.5 0.979-0.986 in all four, fill 0.9 0.974-
    # 1.006 (mean 0.995), fill 0.1 within its host-bound noise. `bwd_config` takes it for broadcast_q
    pma_dk_early: bool = False
    # with pma_split_ps, its gradient warpgroup hands P^T back as soon as dV's wgmmas finished and
    # stages dV in dK's own tile (free once the last tile's dK store read it, a tile earlier)
    # instead of over the P^T tiles, which went back only after dV's epilogue. Run 35 (H200, PMA
    # q128 forward+backward, four processes of 4 ABBA rounds, gradients bit-identical): fill 0.5
    # 0.978-0.987 in all four, fill 0.9 0.952-1.002 (mean 0.984), fill 0.1 mean 0.995.
    # `bwd_config` takes it for broadcast_q
    pma_dv_in_dk_stage: bool = False
    # broadcast_q with 128 < q_len <= 192, one query head per KV head, no causal/window mask, D=128:
    # the one-pass backward whose three score warpgroups (one per 64-row step) take each tile's dV
    # and dK in turn (`tlx_hopper_bwd_pma_shared`; `uses_pma_shared_roles` decides), K and V in
    # rings of pma_buf_k and pma_buf_v 16 KB slots; deterministic (per-CTA dQ partials summed in
    # CTA order). The split-role layout needs a fourth, gradient warpgroup that the register file
    # cannot hold at three steps (run 31); the fused dK/dV pass it replaces reduce-adds dQ per
    # step. Run 43 (H200, PMA q192 forward+backward against the fused pass, two processes of 4
    # ABBA rounds; named `pma3` in its records): 0.882 / 0.881, 0.863 / 0.867, 0.859 / 0.898 at
    # fill 0.1 / 0.5 / 0.9; `bwd_config` takes it there. At two steps (PMA q128, two warpgroups of
    # 240 registers) it ran 1.257 / 1.087 / 1.119 of the split-role pass's time (run 43, call 5):
    # not offered there
    pma_shared_roles: bool = False

    @property
    def dq_block_m(self) -> int:
        return 64 * self.dq_groups


@functools.lru_cache(maxsize=256)  # a frozen dataclass per call shape: no rebuild per call
def bwd_config(head_dim: int, broadcast_q: bool, q_len: int, num_heads: int, num_sms: int,
               tile_window: int = 1) -> BwdConfig:
    """tile_window as `tile_window_for` chose it (both passes). A 3-warpgroup dq tile (BLOCK_M=192)
    fits PMA's q_len=192 exactly instead of computing 64 padding rows of a second 128-row q-block;
    three consumers leave ~160 registers each, as in the forward. It needs the resident mode (one
    q-block per head, num_heads <= SMs): its TMA-store epilogue is what frees the shared memory, the
    atomics of the other mode would not fit."""
    if broadcast_q and 128 < q_len <= 192 and num_heads <= num_sms:
        # the shared-role pass where `uses_pma_shared_roles` takes the call (3 K + 2 V slots); the
        # others (masks, GQA, D=64) the fused dK/dV pass, or the 3-warpgroup dq pass
        return BwdConfig(dq_groups=3, dq_regs=160, tile_window=tile_window, pma_shared_roles=True,
                         pma_buf_v=2)
    if broadcast_q:  # the split-role pass where `uses_pma_roles` takes the call, dK staged apart,
        # P^T handed over apart from dS^T and back before dV's epilogue (dV staged in dK's tile),
        # dK issued before dV's epilogue
        return BwdConfig(tile_window=tile_window, pma_roles=True, pma_fold_delta=True,
                         pma_dk_stage=True, pma_split_ps=True, pma_dk_early=True,
                         pma_dv_in_dk_stage=True, pma_buf_v=2)
    return BwdConfig(tile_window=tile_window, dkdv_early_q_release=True)


def fuses_dq(cfg: BwdConfig, head_dim: int, broadcast_q: bool, deterministic: bool) -> bool:
    """Whether `backward` computes dQ inside the dK/dV pass (`BwdConfig.fused_dq`'s conditions;
    broadcast_q does not change them)."""
    return cfg.fused_dq and head_dim == 128 and not deterministic


def _one_pass_pma_call(broadcast_q: bool, head_dim: int, num_heads: int, num_kv_heads: int,
                       causal: bool, window: int | None, num_sms: int) -> bool:
    """What both one-pass broadcast_q backwards need beside their q_len range: D = 128, one query
    head per KV head, no mask, and a CTA per head at least (their CTAs work for one head each)."""
    return (broadcast_q and head_dim == 128 and num_heads == num_kv_heads and not causal
            and window is None and num_heads <= num_sms)


def uses_pma_roles(cfg: BwdConfig, head_dim: int, broadcast_q: bool, q_len: int, num_heads: int,
                   num_kv_heads: int, causal: bool, window: int | None, num_sms: int) -> bool:
    """Whether `backward` takes the split-role broadcast_q pass (`BwdConfig.pma_roles`'s conditions:
    its two score warpgroups take one 64-row query step each, its CTAs one head each)."""
    return (cfg.pma_roles and 64 < q_len <= 128
            and _one_pass_pma_call(broadcast_q, head_dim, num_heads, num_kv_heads, causal, window,
                                   num_sms))


def uses_pma_shared_roles(cfg: BwdConfig, head_dim: int, broadcast_q: bool, q_len: int,
                          num_heads: int, num_kv_heads: int, causal: bool, window: int | None,
                          num_sms: int) -> bool:
    """Whether `backward` takes the shared-role broadcast_q pass (`BwdConfig.pma_shared_roles`'s
    conditions: its three score warpgroups take one 64-row query step each, its CTAs one head
    each)."""
    return (cfg.pma_shared_roles and 128 < q_len <= 192
            and _one_pass_pma_call(broadcast_q, head_dim, num_heads, num_kv_heads, causal, window,
                                   num_sms))


PMA_Q_BLOCK = 128  # the split-role pass's q-block (its schedule is the forward's resident one)
PMA_SHARED_Q_BLOCK = 192  # the shared-role pass's
DKDV_BLOCK_N = 128  # KV rows per dk/dv tile
DKDV_STEP = 64      # query rows per dk/dv step
DQ_REDUCE_ROWS = 8  # rows per program of `_reduce_dq_partials`


def backward(grad_out, query, key, value, out, lse, query_offset, key_offset, params,
             config: BwdConfig | None = None):
    """Gradients (dq, dk, dv) of `forward`; dq of broadcast_q is the batch sum (fp32 accumulate)."""
    from kernels.tlx_hopper_bwd import jfa_bwd_dkdv_kernel, jfa_bwd_dq_kernel

    reason = supports(query, key, value, params)
    if reason is not None:
        raise ValueError(f"tlx backend: {reason}")
    query, key, value = _tma_ready(query), _tma_ready(key), _tma_ready(value)
    grad_out, out = _tma_ready(grad_out), _tma_ready(out)
    B = key_offset.numel() - 1
    hq, d = query.shape[1], query.shape[2]
    hkv = key.shape[1]
    broadcast = bool(params.broadcast_q)
    q_len = query.shape[0] if broadcast else 0
    n_sm = GRID_OVERRIDE or _num_sms(query.device.index or 0)
    cfg = config or bwd_config(d, broadcast, q_len, hq, n_sm, call_tile_window(key, params))
    _check_config(cfg, d)
    total_out = B * q_len if broadcast else query.shape[0]
    dk = torch.empty_like(key)
    dv = torch.empty_like(value)
    if POISON_OUTPUTS:
        dk.fill_(float("nan"))
        dv.fill_(float("nan"))
    if total_out == 0 or key.shape[0] == 0:
        return torch.zeros_like(query), dk.zero_(), dv.zero_()
    scale = _sm_scale(params, d)
    window = params.window_size
    win = 0 if window is None else int(window)
    causal = bool(params.causal)

    if uses_pma_shared_roles(cfg, d, broadcast, q_len, hq, hkv, causal, window, n_sm):
        return _backward_pma_shared_roles(grad_out, query, key, value, out, lse, key_offset, cfg,
                                          dk, dv, scale, n_sm)
    if uses_pma_roles(cfg, d, broadcast, q_len, hq, hkv, causal, window, n_sm):
        return _backward_pma_roles(grad_out, query, key, value, out, lse, key_offset, cfg, dk, dv,
                                   scale, n_sm)
    fused_dq = fuses_dq(cfg, d, broadcast, bool(params.deterministic))
    # fused: fp32 dQ, zeroed by the preprocess kernel where its rows are the output rows
    # (self/cross); broadcast_q's q_len rows are few
    zero_in_preprocess = fused_dq and not broadcast
    dq_acc = None
    if fused_dq:
        dq_acc = (torch.empty if zero_in_preprocess else torch.zeros)(
            query.shape, device=query.device, dtype=torch.float32)
    delta = _delta(out, grad_out, hq, total_out, dq_acc if zero_in_preprocess else None)

    desc_q = _descriptor(query, query.shape[0], 64)
    desc_do = _descriptor(grad_out, total_out, 64)
    desc_k = _descriptor(key, key.shape[0], 64)
    desc_v = _descriptor(value, value.shape[0], 64)
    q_off = query_offset if query_offset is not None else key_offset

    # dK, dV: KV-stationary
    num_nb = max(1, triton_cdiv(int(params.max_seq_len_kv), DKDV_BLOCK_N))
    entries, n_entries = cached_schedule(query_offset, key_offset, B, q_len, num_nb, window, causal,
                                         broadcast, DKDV_BLOCK_N, DKDV_STEP, kv_stationary=True)
    if cfg.dkdv_tma_store:
        desc_dk, desc_dv = _descriptor(dk, dk.shape[0], 64), _descriptor(dv, dv.shape[0], 64)
    else:
        desc_dk, desc_dv = desc_k, desc_v  # not written: every half takes tl.store
    # fused: each consumer reduce-adds a [64 rows, D/2 columns] fp32 partial
    desc_dq = _descriptor(dq_acc, dq_acc.shape[0], 64, d // 2) if fused_dq else desc_q
    launch(jfa_bwd_dkdv_kernel, (n_sm,),
        desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, desc_dq, dk, dv, lse, delta, q_off,
        key_offset, entries, n_entries, scale, win, B, hkv, hq // hkv, q_len, num_nb, total_out,
        cfg.tile_window or num_nb,
        HEAD_DIM=d, NUM_BUF_Q=cfg.dkdv_buf_q, CONSUMER_REGS=cfg.dkdv_regs, CAUSAL=causal,
        HAS_WINDOW=window is not None, BROADCAST_Q=broadcast, TMA_EPILOGUE=cfg.dkdv_tma_store,
        FUSED_DQ=fused_dq, EARLY_Q_RELEASE=cfg.dkdv_early_q_release, num_warps=4, num_stages=1)
    if fused_dq:
        return dq_acc.to(query.dtype), dk, dv

    # dQ: Q-stationary (the forward's schedule shape)
    bm = cfg.dq_block_m
    max_q = q_len if broadcast else int(params.max_seq_len_q)
    num_mb = max(1, triton_cdiv(max_q, bm))
    entries, n_entries = cached_schedule(query_offset, key_offset, B, q_len, num_mb, window, causal,
                                         broadcast, bm, cfg.dq_block_n)
    pairs = hq * num_mb
    resident = broadcast and pairs <= n_sm
    cpp = n_sm // pairs if resident else 1
    n_prog = pairs * cpp if resident else n_sm
    if not broadcast:
        dq = torch.empty_like(query)
        if POISON_OUTPUTS:
            dq.fill_(float("nan"))
        dq_arg, acc_arg = dq, dq
    elif resident:
        dq = torch.empty_like(query)
        if POISON_OUTPUTS:
            dq.fill_(float("nan"))
        part = torch.empty((n_prog * bm, 1, d), device=query.device, dtype=torch.float32)
        dq_arg, acc_arg = part, part
        desc_part = _descriptor(part, n_prog * bm, 64)
    else:
        acc = torch.zeros(query.shape, device=query.device, dtype=torch.float32)
        dq_arg, acc_arg = acc, acc
    if not resident:
        desc_part = desc_q  # not read: only the resident mode writes partials
    if cfg.dq_block_n != 64:  # the dK/dV pass's descriptors load 64-row K/V halves
        desc_k = _descriptor(key, key.shape[0], cfg.dq_block_n)
        desc_v = _descriptor(value, value.shape[0], cfg.dq_block_n)
    launch(jfa_bwd_dq_kernel, (n_prog,),
        desc_q, desc_do, desc_k, desc_v, desc_part, dq_arg, acc_arg, lse, delta, q_off, key_offset, entries,
        n_entries, scale, win, B, hq, hq // hkv, q_len, num_mb, total_out, cpp,
        cfg.tile_window or num_mb,
        HEAD_DIM=d, BLOCK_N=cfg.dq_block_n, NUM_GROUPS=cfg.dq_groups, NUM_BUF_KV=cfg.dq_buf_kv,
        CONSUMER_REGS=cfg.dq_regs, CAUSAL=causal, HAS_WINDOW=window is not None,
        BROADCAST_Q=broadcast, RESIDENT=resident, num_warps=4, num_stages=1)
    if broadcast and resident:
        _reduce_dq_partials(part, dq, q_len, hq, cpp, bm, pairs)
    elif broadcast:
        dq = acc.to(query.dtype)
    return dq, dk, dv


def _reduce_dq_partials(part, dq, q_len: int, hq: int, ctas_per_pair: int, block_m: int,
                        pairs: int) -> None:
    """dq from the resident passes' fp32 partials (one per CTA and q-block), summed per (head,
    q-block) in CTA order: 8-row programs, 8 pipeline stages each (64-row programs with one load
    in flight were latency-bound)."""
    from kernels.tlx_hopper_bwd import _jfa_dq_reduce_kernel

    launch(_jfa_dq_reduce_kernel, (triton_cdiv(block_m, DQ_REDUCE_ROWS), pairs),
        part, dq, q_len, hq, ctas_per_pair, HEAD_DIM=dq.shape[-1], BLOCK_M=block_m,
        BLOCK_R=DQ_REDUCE_ROWS, NUM_STAGES=8, num_warps=4)


def _delta(out, grad_out, hq: int, total_out: int,
           zero_dq: torch.Tensor | None = None) -> torch.Tensor:
    """delta = rowsum(dO * O), fp32 [hq, total_out], by the preprocess kernel, which also zeroes
    zero_dq (the fused pass's fp32 dQ when its rows are the output rows) when given."""
    from kernels.tlx_hopper_bwd import _jfa_bwd_preprocess_kernel

    delta = torch.empty((hq, total_out), device=out.device, dtype=torch.float32)
    launch(_jfa_bwd_preprocess_kernel, (triton_cdiv(total_out, 64), hq),
        out, grad_out, delta, delta if zero_dq is None else zero_dq, total_out, hq,
        HEAD_DIM=out.shape[-1], BLOCK_R=64, ZERO_DQ=zero_dq is not None, num_warps=4)
    return delta


def _pma_resident(query, key_offset, q_block: int, n_sm: int):
    """What the one-pass broadcast_q backwards share: the forward's resident schedule for one
    q_block-row q-block (batch elements heaviest first per head), the CTAs per head, the launch's
    CTAs, their fp32 dQ partials (q_block rows each) and dq."""

    q_len, hq, d = query.shape
    entries, n_entries = cached_schedule(None, key_offset, key_offset.numel() - 1, q_len, 1, None,
                                         False, True, q_block, 64)
    ctas_per_head = n_sm // hq
    n_prog = hq * ctas_per_head
    part = torch.empty((n_prog * q_block, 1, d), device=query.device, dtype=torch.float32)
    dq = torch.empty_like(query)
    if POISON_OUTPUTS:
        part.fill_(float("nan"))
        dq.fill_(float("nan"))
    return entries, n_entries, ctas_per_head, n_prog, part, dq


def _backward_pma_roles(grad_out, query, key, value, out, lse, key_offset, cfg, dk, dv, scale, n_sm):
    """`backward` by the split-role broadcast_q pass: the preprocess (unless the pass sums delta
    itself, `BwdConfig.pma_fold_delta`), the pass, the dQ partials' sum."""
    from kernels.tlx_hopper_bwd_pma import jfa_bwd_pma_kernel

    B = key_offset.numel() - 1
    q_len, hq, d = query.shape
    total_out = B * q_len
    # not read with pma_fold_delta: the pass sums delta itself
    delta = lse if cfg.pma_fold_delta else _delta(out, grad_out, hq, total_out)
    entries, n_entries, ctas_per_head, n_prog, part, dq = _pma_resident(query, key_offset,
                                                                        PMA_Q_BLOCK, n_sm)
    desc_k, desc_v = _descriptor(key, key.shape[0], 64), _descriptor(value, value.shape[0], 64)
    # not written without pma_dk_stage: every tile takes the masked store
    desc_dk = _descriptor(dk, dk.shape[0], 64) if cfg.pma_dk_stage else desc_k
    launch(jfa_bwd_pma_kernel, (n_prog,),
        _descriptor(query, q_len, 64), _descriptor(grad_out, total_out, 64), desc_k, desc_v,
        desc_dk,
        _descriptor(part, part.shape[0], 64), _descriptor(out, total_out, 64), dk, dv, lse, delta,
        key_offset, entries, n_entries, scale, B, hq, q_len, total_out, HEAD_DIM=d,
        NUM_BUF_K=cfg.pma_buf_k, NUM_BUF_V=cfg.pma_buf_v, NUM_BUF_PS=cfg.pma_buf_ps,
        SCORE_REGS=cfg.pma_score_regs, GRAD_REGS=cfg.pma_grad_regs, FOLD_DELTA=cfg.pma_fold_delta,
        DK_STAGE=cfg.pma_dk_stage, SPLIT_PS=cfg.pma_split_ps, DK_EARLY=cfg.pma_dk_early,
        DV_IN_DK_STAGE=cfg.pma_dv_in_dk_stage, num_warps=4, num_stages=1)
    _reduce_dq_partials(part, dq, q_len, hq, ctas_per_head, PMA_Q_BLOCK, hq)
    return dq, dk, dv


def _backward_pma_shared_roles(grad_out, query, key, value, out, lse, key_offset, cfg, dk, dv,
                               scale, n_sm):
    """`backward` by the shared-role broadcast_q pass: the preprocess (delta), the pass, the dQ
    partials' sum."""
    from kernels.tlx_hopper_bwd_pma_shared import jfa_bwd_pma_shared_kernel

    B = key_offset.numel() - 1
    q_len, hq, d = query.shape
    total_out = B * q_len
    delta = _delta(out, grad_out, hq, total_out)
    entries, n_entries, ctas_per_head, n_prog, part, dq = _pma_resident(query, key_offset,
                                                                        PMA_SHARED_Q_BLOCK, n_sm)
    launch(jfa_bwd_pma_shared_kernel, (n_prog,),
        _descriptor(query, q_len, 64), _descriptor(grad_out, total_out, 64),
        _descriptor(key, key.shape[0], 64), _descriptor(value, value.shape[0], 64),
        _descriptor(dk, dk.shape[0], 64), _descriptor(dv, dv.shape[0], 64),
        _descriptor(part, part.shape[0], 64), dk, dv, lse, delta, key_offset, entries, n_entries,
        scale, B, hq, q_len, total_out, HEAD_DIM=d, NUM_BUF_K=cfg.pma_buf_k,
        NUM_BUF_V=cfg.pma_buf_v, num_warps=4, num_stages=1)
    _reduce_dq_partials(part, dq, q_len, hq, ctas_per_head, PMA_SHARED_Q_BLOCK, hq)
    return dq, dk, dv
