"""TLX Hopper (sm_90) backward of broadcast_q with 128 < q_len <= 192 (PMA q192) in one pass:
three score warpgroups that take the gradient work in turn.

`BwdConfig.pma_shared_roles`: broadcast_q, 128 < q_len <= 192, one query head per KV head, no mask, D = 128.
The split-role pass (`tlx_hopper_bwd_pma`, q_len <= 128) keeps a gradient warpgroup beside its
two score warpgroups; at three query steps that layout needs 3 x 160 + 168 registers per thread
slot, more than the register file holds (run 31's costing). Here the three score warpgroups take
the gradient work of a tile in turn instead: each holds its step's dQ accumulator (64 registers)
for the whole launch and, in the tiles where it has a gradient role, a 64-register dK or dV
accumulator while its S^T/dP^T registers are dead. (At two steps, PMA q128, the same shape with
two 240-register warpgroups ran 9-26 % slower than the split-role pass: run 43.)

The CTAs are resident like the forward's: CTA p works for one head the whole launch
(`tile_at(..., RESIDENT=True)`, the forward's schedule with one 192-row q-block) and walks that
head's batch elements heaviest first in 64-key tiles. Q loads once; dO and the row statistics once
per batch element (one slot: 3 x 16 KB); K and V per tile.

Warp roles (a tile = 64 keys; a step = 64 query rows; three steps):
- producer (default warpgroup): Q once; per batch element its dO tiles and the steps' statistics
  (LSE in base 2, +inf where P must be 0, and delta from the preprocess kernel); per tile K and
  V, each into a ring of its own. An element's first K/V go before its dO, whose one slot frees
  only once the previous element's last dV read it (the score warpgroups likewise issue the first
  S^T before waiting for the dO).
- score warpgroup s (`replicate=3`), per tile: S^T = K Q_s^T and dP^T = V dO_s^T,
  P^T = exp2(S^T*scale*log2e - LSE), dS^T = P^T (dP^T - delta), both to shared memory, and
  dQ_s += dS_s K (the previous tile's, issued after this tile's S^T/dP^T and waited within the
  iteration, as in the split-role pass). Then its gradient role in this tile, (tile + s) mod 3:
  0: dV = sum_s' P_s'^T dO_s' (staged over the P^T tiles, the only ones its wgmmas read);
  1: dK = sum_s' dS_s'^T Q_s' (staged over the tile's V slot: every dP^T that read V finished
  before its dS^T was stored); 2: none. Whole tiles leave by TMA store, the sequence's last
  partial tile by a masked store from a read-back. At the end each writes its fp32 dQ partial,
  summed per head by `_jfa_dq_reduce_kernel` in CTA order (deterministic; dK/dV are written
  once).

The P^T and dS^T tiles have one slot each: a score warpgroup stores the next tile's only once this
tile's dV (P^T) or dK (dS^T) role is done with them.
Keys past klen get P = 0 (their dS would reach dQ); query rows past q_len have LSE' = +inf
(P = 0), so the neighbour's dO rows a 64-row box reads contribute nothing.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_hopper_bwd import _opaque
from kernels.tlx_hopper_bwd_pma import (_batch_element, _load_element_do, _load_kv_turn,
                                        _load_q_steps, _scores_p, _store_rows, _wait_kv_turn)
from kernels.tlx_hopper_fwd import _bufidx_phase
from kernels.tlx_schedule import n_iterations

LOG2E = tl.constexpr(1.4426950408889634)
DV_ROLE = tl.constexpr(0)  # a score warpgroup's gradient role in a tile: (tile + step) mod 3
DK_ROLE = tl.constexpr(1)
SCORE_REGS = tl.constexpr(160)  # per score warpgroup: 3 x 160 + the producer's 32 fill the 512
DONE_BAR = tl.constexpr(9)  # named barrier: the three score warpgroups finished every tile
STAGED_BAR = tl.constexpr(9)  # STAGED_BAR + s, s = 1, 2: step s - 1's dQ partial left the staging tile


@triton.jit
def _tile_gradient(a_tiles, b_tiles, scale, NSTEPS: tl.constexpr, dtype: tl.constexpr):
    """sum_s a_s b_s * scale of a tile's steps in the MMA dtype, a_s [64 keys, 64 queries] and
    b_s [64 queries, D] in shared memory. The tile indices are `_opaque`: the compiler would hold
    every wgmma descriptor of both roles in registers across the tile loop (sm_90 compile check of
    the pass: 240 spilled words with them held, 60 with these and the step tiles' indices opaque;
    two 32-register column halves instead of one accumulator spilled more, not less)."""
    acc = None
    for s in tl.static_range(NSTEPS):
        i = _opaque(tl.full((), s, tl.int32))
        acc = tlx.async_dot(a_tiles[i], b_tiles[i], acc)
    acc = tlx.async_dot_wait(0, acc)
    return (acc * scale).to(dtype)


@triton.jit
def _write_tile(desc, ptr, stage, x, row0, nrows, H, h, HEAD_DIM: tl.constexpr,
                BLOCK: tl.constexpr):
    """A tile's dK or dV x [BLOCK, D] staged in `stage` and written to rows row0 .. row0 + nrows - 1
    of head h: by TMA store when every row lies in the sequence (waited for, so `stage` is free on
    return), else read back into the masked store's layout (a TMA box cannot stop at klen)."""
    tlx.local_store(stage, x)
    if nrows >= BLOCK:
        tlx.fence("async_shared")
        tlx.async_descriptor_store(desc, stage, [row0, h * HEAD_DIM])
        tlx.async_descriptor_store_wait(0)
    else:
        _store_rows(ptr, tlx.local_load(stage), row0, nrows, H, h, HEAD_DIM, BLOCK)


@triton.jit
def jfa_bwd_pma_shared_kernel(
    desc_q, desc_do, desc_k, desc_v,   # TMA, boxes [64, D]: q [q_len, H*D], do [B*q_len, H*D], k/v [total_kv, H*D]
    desc_dk, desc_dv,                  # TMA store, box [64, D]: dk/dv [total_kv, H*D]
    desc_part,                         # TMA store, box [64, D]: fp32 dQ partials [n_prog * 192, D]
    dk_ptr, dv_ptr,                    # [total_kv, H, D]
    lse_ptr, delta_ptr, k_off, tile_entry, n_entries, sm_scale, B, H, q_len, total_out,
    HEAD_DIM: tl.constexpr, NUM_BUF_K: tl.constexpr, NUM_BUF_V: tl.constexpr,
):
    BLOCK: tl.constexpr = 64           # keys per tile = query rows per step
    NSTEPS: tl.constexpr = 3
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    TILE_BYTES: tl.constexpr = ELEM * BLOCK * HEAD_DIM

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    ctas_per_head = n_prog // H
    # ---- shared memory (225.5 KB with 3 K + 2 V slots at D = 128) and barriers -------------
    q_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NSTEPS)
    do_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NSTEPS)
    # step s's statistics: LSE at 2s, delta at 2s + 1
    step_stats = tlx.local_alloc((BLOCK,), tl.float32, 2 * NSTEPS)
    k_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NUM_BUF_K)
    v_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NUM_BUF_V)
    # P^T / dS^T of step s: [64 keys, 64 queries]; the dV role stages dV over the P^T tiles
    pt_tiles = tlx.local_alloc((BLOCK, BLOCK), dtype, NSTEPS)
    dv_stage = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, 1, reuse=pt_tiles)
    dst_tiles = tlx.local_alloc((BLOCK, BLOCK), dtype, NSTEPS)
    # at the end the steps' fp32 dQ partials [64, D] (32 KB each) are staged over the dO tiles, free
    # by then, one step after the other
    dq_stage = tlx.local_alloc((BLOCK, HEAD_DIM), tl.float32, 1, reuse=do_tiles)
    q_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    # the batch slot is full once its dO bytes landed and its statistics are stored (2 arrivals);
    # empty once every score warpgroup's last dP^T and the last tile's dV read it
    do_full = tlx.alloc_barriers(num_barriers=1, arrive_count=2)
    do_empty = tlx.alloc_barriers(num_barriers=1, arrive_count=NSTEPS + 1)
    k_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_K, arrive_count=1)
    # a tile's K is free once every step's dQ wgmma (issued in the next tile) read it
    k_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_K, arrive_count=NSTEPS)
    v_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_V, arrive_count=1)
    # a tile's V is free once every dP^T read it and the dK role's staging over it was read back
    v_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_V, arrive_count=NSTEPS + 1)
    # P^T of the tile: full once all steps stored theirs, empty once the dV role read it back
    p_full = tlx.alloc_barriers(num_barriers=1, arrive_count=NSTEPS)
    p_empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    # dS^T likewise; step s's tile is free again once the dK role's wgmmas read it (its own dQ
    # wgmma, the other reader, is waited for by step s itself before it stores the next)
    ds_full = tlx.alloc_barriers(num_barriers=1, arrive_count=NSTEPS)
    ds_empties = tlx.alloc_barriers(num_barriers=NSTEPS, arrive_count=1)
    n_tiles = tl.load(n_entries) * H
    n_iter = n_iterations(n_tiles, n_prog, B, ctas_per_head, True)

    with tlx.async_tasks():
        # ---- producer: Q once, dO and statistics per batch element, K/V per tile ------------
        with tlx.async_task("default"):
            _load_q_steps(desc_q, q_tiles, q_full[0], pid // ctas_per_head, NSTEPS, BLOCK,
                          HEAD_DIM, TILE_BYTES)
            cnt_b = 0
            cnt_kv = 0
            for it in range(0, n_iter):
                h, out_row0, qlen, kv_row0, klen = _batch_element(
                    it, pid, n_prog, tile_entry, n_tiles, B, H, ctas_per_head, k_off, q_len)
                if klen > 0:
                    # the first tile's K/V before the wait for the one dO slot, which frees only
                    # once the previous element's last dV read it: they land meanwhile (run 44:
                    # 0.955-0.975 of PMA q192 forward+backward's time at fill 0.1 / 0.5)
                    _load_kv_turn(cnt_kv, desc_k, desc_v, kv_row0, kv_row0, h * HEAD_DIM,
                                  k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                                  TILE_BYTES, NUM_BUF_K, NUM_BUF_V)
                    cnt_kv += 1
                    tlx.barrier_wait(do_empty[0], (cnt_b & 1) ^ 1)
                    _load_element_do(desc_do, do_tiles, step_stats, do_full[0], 0, lse_ptr,
                                     delta_ptr, h, total_out, out_row0, qlen, NSTEPS, BLOCK,
                                     HEAD_DIM, TILE_BYTES, True)
                    cnt_b += 1
                    for j in range(1, (klen + BLOCK - 1) // BLOCK):
                        row = kv_row0 + j * BLOCK
                        _load_kv_turn(cnt_kv, desc_k, desc_v, row, row, h * HEAD_DIM, k_tiles,
                                      v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                                      TILE_BYTES, NUM_BUF_K, NUM_BUF_V)
                        cnt_kv += 1

        # ---- score warpgroups: P^T, dS^T and dQ of step s; dV or dK of a tile in turn -------
        with tlx.async_task(num_warps=4, registers=SCORE_REGS, replicate=NSTEPS):
            s: tl.constexpr = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            dq = tl.zeros([BLOCK, HEAD_DIM], dtype=tl.float32)
            tlx.barrier_wait(q_full[0], 0)
            cnt_b = 0
            cnt_kv = 0  # the CTA's tiles so far: ring turns, single-slot phases and roles
            prev_k = -1  # the previous tile's K slot, held until its dQ wgmma finished
            # the zero dS^T the first tile's dQ wgmma reads
            tlx.local_store(dst_tiles[s], tl.zeros([BLOCK, BLOCK], dtype=dtype))
            tlx.fence("async_shared")
            for it in range(0, n_iter):
                h, out_row0, qlen, kv_row0, klen = _batch_element(
                    it, pid, n_prog, tile_entry, n_tiles, B, H, ctas_per_head, k_off, q_len)
                if klen > 0:
                    n_kv = (klen + BLOCK - 1) // BLOCK
                    for j in range(0, n_kv):
                        slot, v_slot = _wait_kv_turn(cnt_kv, k_fulls, v_fulls, NUM_BUF_K,
                                                     NUM_BUF_V)
                        phase = cnt_kv & 1
                        si = _opaque(tl.full((), s, tl.int32))  # (as in `_tile_gradient`)
                        st = tlx.async_dot(k_tiles[slot], tlx.local_trans(q_tiles[si]))
                        if j == 0:  # S^T needs no dO: issued before the element's dO wait
                            tlx.barrier_wait(do_full[0], cnt_b & 1)
                        dpt = tlx.async_dot(v_tiles[v_slot], tlx.local_trans(do_tiles[si]))
                        lse2 = tlx.local_load(step_stats[2 * s])
                        kv_pos = j * BLOCK + tl.arange(0, BLOCK)
                        # the previous tile's dQ after this tile's S^T/dP^T, waited within the
                        # iteration (across the back edge ptxas serialises every wgmma, run 22);
                        # the first tile's "previous" is a zero dS^T over this tile's K: adds 0
                        dq = tlx.async_dot(tlx.local_trans(dst_tiles[si]),
                                           k_tiles[tl.where(prev_k >= 0, prev_k, slot)], dq)
                        st = tlx.async_dot_wait(2, st)
                        pt = _scores_p(st, lse2, kv_pos, klen, qk_scale, BLOCK)
                        # P^T to the dV role before dP^T is waited on
                        tlx.barrier_wait(p_empty[0], phase ^ 1)
                        tlx.local_store(pt_tiles[si], pt.to(dtype))
                        tlx.fence("async_shared")
                        tlx.barrier_arrive(p_full[0], 1)
                        delta = tlx.local_load(step_stats[2 * s + 1])
                        dpt = tlx.async_dot_wait(1, dpt)
                        tlx.barrier_arrive(v_empties[v_slot], 1)  # the tile's V is read
                        if j == n_kv - 1:  # this step's last dP^T of the element read its dO
                            tlx.barrier_arrive(do_empty[0], 1)
                        dst = pt * (dpt - delta[None, :])
                        dq = tlx.async_dot_wait(0, dq)
                        if prev_k >= 0:
                            tlx.barrier_arrive(k_empties[prev_k], 1)
                        tlx.barrier_wait(ds_empties[s], phase ^ 1)
                        tlx.local_store(dst_tiles[si], dst.to(dtype))
                        tlx.fence("async_shared")
                        tlx.barrier_arrive(ds_full[0], 1)
                        prev_k = slot
                        # this tile's gradient role
                        role = (cnt_kv + s) % NSTEPS
                        nrows = klen - j * BLOCK
                        if role == DV_ROLE:
                            tlx.barrier_wait(p_full[0], phase)
                            dv = _tile_gradient(pt_tiles, do_tiles, 1.0, NSTEPS, dtype)
                            if j == n_kv - 1:  # the element's last dV read its dO
                                tlx.barrier_arrive(do_empty[0], 1)
                            _write_tile(desc_dv, dv_ptr, dv_stage[0], dv, kv_row0 + j * BLOCK,
                                        nrows, H, h, HEAD_DIM, BLOCK)
                            tlx.barrier_arrive(p_empty[0], 1)
                        if role == DK_ROLE:
                            tlx.barrier_wait(ds_full[0], phase)
                            dk = _tile_gradient(dst_tiles, q_tiles, sm_scale, NSTEPS, dtype)
                            for s2 in tl.static_range(NSTEPS):
                                tlx.barrier_arrive(ds_empties[s2], 1)
                            _write_tile(desc_dk, dk_ptr, v_tiles[v_slot], dk, kv_row0 + j * BLOCK,
                                        nrows, H, h, HEAD_DIM, BLOCK)
                            tlx.barrier_arrive(v_empties[v_slot], 1)
                        cnt_kv += 1
                    cnt_b += 1
            if prev_k >= 0:  # the last tile's dQ
                dq = tlx.async_dot(tlx.local_trans(dst_tiles[s]), k_tiles[prev_k], dq)
                dq = tlx.async_dot_wait(0, dq)
            # every score warpgroup is done with dO, K and V (the producer loads nothing after
            # the last tile): stage the fp32 partial of this step's rows and store it by TMA
            tlx.named_barrier_wait(DONE_BAR, NSTEPS * 128)
            if s > 0:  # the previous step's partial has left the staging tile
                tlx.named_barrier_wait(STAGED_BAR + s, 256)
            tlx.local_store(dq_stage[0], dq * sm_scale)
            tlx.fence("async_shared")
            tlx.async_descriptor_store(desc_part, dq_stage[0], [pid * (NSTEPS * BLOCK) + s * BLOCK, 0])
            tlx.async_descriptor_store_wait(0)
            if s < NSTEPS - 1:  # (the issuing thread arrives once its store read the tile)
                tlx.named_barrier_arrive(STAGED_BAR + s + 1, 256)
