"""TLX Hopper (sm_90) backward of broadcast_q (PMA) in one pass, with the work split by role.

For broadcast_q with 64 < q_len <= 128, one query head per KV head, no mask and D = 128 (the PMA
rows of issue 5), `BwdConfig.pma_roles`. The CTAs are resident like the forward's: CTA p works for
one head the whole launch (`tile_at(..., RESIDENT=True)`, the forward's schedule with one 128-row
q-block) and walks that head's batch elements heaviest first, each in 64-key KV tiles. Per batch
element the dO rows and row statistics load once; per KV tile only K and V load.

Warp roles (a tile = 64 keys; a step = 64 query rows; 64 < q_len <= 128: two steps):
- producer (default warpgroup): the Q tiles once, per batch element its dO tiles and the steps'
  statistics (LSE in base 2, +inf where P must be 0, and delta), per tile its K and V tiles, each
  into a ring of its own: a tile's V is free once both dP^T read it, its K only after the next
  tile's dQ wgmmas (run 31: the shared K/V slots of before cost 2.4 % at PMA q128 fill 0.9). With
  FOLD_DELTA (`BwdConfig.pma_fold_delta`) no delta: the element's O rows instead, one turn of
  the rings ahead of its first tile (step 0's rows as a K tile, step 1's as a V tile).
- score warpgroups (one per step, `replicate=2`): FOLD_DELTA: per batch element first
  delta = rowsum(O_s * dO_s) of the step's rows into its statistics slot. Per tile
  S^T = K Q_s^T and dP^T = V dO_s^T,
  P^T = exp2(S^T*scale*log2e - LSE), dS^T = P^T (dP^T - delta); both go to shared memory for
  the gradient warpgroup, and dQ_s += dS_s K (the dS^T tile read transposed) accumulates in
  registers over every tile of the launch (a tile's dQ wgmma is issued in the next tile, after
  its S^T/dP^T): no dQ traffic per step. At the end each writes its
  fp32 partial (staged over the dO tiles, free by then), summed per head by
  `_jfa_dq_reduce_kernel` in CTA order (deterministic).
- gradient warpgroup: dV = sum_s P_s^T dO_s and dK = sum_s dS_s^T Q_s of the tile, both
  operands from shared memory; each is staged over the tile's P^T tiles (only its dV wgmma reads
  them) and read back in the masked store's layout, so no layout conversion needs scratch space
  (226 KB of shared memory leave none). With DK_STAGE dK has a staging tile of its own (one K/V
  slot fewer) that whole tiles leave by TMA store while the next tile computes. With SPLIT_PS the
  P^T tiles have barriers of their own: the score warpgroups hand P^T over before waiting for
  dP^T, and the gradient warpgroup runs dV and its epilogue (P^T back) before dK waits for dS^T;
  with DK_EARLY it waits for dS^T and issues dK's wgmmas before dV's epilogue, which then runs
  under them; with DV_IN_DK_STAGE P^T goes back right after dV's wgmmas and dV is staged in dK's
  tile instead.

Unlike `jfa_bwd_dkdv_kernel`, where two consumers split the tile's keys and meet twice per
step, no warpgroup waits for a peer in lockstep: the score warpgroups run ahead of the gradient
one by up to NUM_BUF_PS tiles (run 20c: the fused pass's consumer rendezvous and dQ staging hold
~45 % of their stall samples on PMA q128).
Keys past klen get P = 0 (their dS would reach dQ); query rows past q_len have LSE' = +inf
(P = 0), so the neighbour's dO rows a 64-row box reads contribute nothing.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_hopper_bwd import _dkdv_probs, _row_lse2, _row_stats
from kernels.tlx_hopper_fwd import _bufidx_phase
from kernels.tlx_schedule import n_iterations, seq_bounds, tile_at

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _ps(slot, kind: tl.constexpr, s: tl.constexpr):
    """Index of a P^T (kind 0) or dS^T (kind 1) tile of step s in ring slot `slot`: a slot's two
    P^T tiles are adjacent (the gradient warpgroup stages a [64, D] dK or dV over them)."""
    return (slot * 2 + kind) * 2 + s


@triton.jit
def _store_rows(ptr, x, row0, nrows, H, h, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """x [BLOCK, D] into rows row0 .. row0 + nrows - 1 (of at most BLOCK) of head h of ptr [*, H, D]."""
    r = tl.arange(0, BLOCK)
    offs = (row0 + r).to(tl.int64)[:, None] * (H * HEAD_DIM) + h * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    tl.store(ptr + offs, x, mask=(r < nrows)[:, None])


@triton.jit
def _release_steps(empties, ps_slot, NUM_BUF_PS: tl.constexpr, NSTEPS: tl.constexpr):
    """The gradient warpgroup gives ring slot ps_slot's tiles of every step back (P^T or dS^T:
    their `empties` barriers)."""
    for s in tl.static_range(NSTEPS):
        tlx.barrier_arrive(empties[s * NUM_BUF_PS + ps_slot], 1)


@triton.jit
def _issue_dk(dk, ps_tiles, q_tiles, ps_fulls, ps_slot, ps_phase, NUM_BUF_PS: tl.constexpr,
              NSTEPS: tl.constexpr):
    """The gradient warpgroup's dK += dS_s^T Q_s wgmmas of a tile, each once its dS^T tile landed
    (dk None: the first starts the accumulator)."""
    for s in tl.static_range(NSTEPS):
        tlx.barrier_wait(ps_fulls[s * NUM_BUF_PS + ps_slot], ps_phase)
        dk = tlx.async_dot(ps_tiles[_ps(ps_slot, 1, s)], q_tiles[s], dk)
    return dk


@triton.jit
def _load_kv_turn(cnt, desc_k, desc_v, k_row, v_row, col, k_tiles, v_tiles, k_fulls, k_empties,
                  v_fulls, v_empties, TILE_BYTES: tl.constexpr, NUM_BUF_K: tl.constexpr,
                  NUM_BUF_V: tl.constexpr):
    """Turn cnt of the K and V rings: rows k_row of desc_k into a K slot and v_row of desc_v into a
    V slot, each once free."""
    slot, phase = _bufidx_phase(cnt, NUM_BUF_K)
    tlx.barrier_wait(k_empties[slot], phase ^ 1)
    tlx.barrier_expect_bytes(k_fulls[slot], TILE_BYTES)
    tlx.async_descriptor_load(desc_k, k_tiles[slot], [k_row, col], k_fulls[slot])
    v_slot, v_phase = _bufidx_phase(cnt, NUM_BUF_V)
    tlx.barrier_wait(v_empties[v_slot], v_phase ^ 1)
    tlx.barrier_expect_bytes(v_fulls[v_slot], TILE_BYTES)
    tlx.async_descriptor_load(desc_v, v_tiles[v_slot], [v_row, col], v_fulls[v_slot])


@triton.jit
def _load_q_steps(desc_q, q_tiles, q_full, h, NSTEPS: tl.constexpr, BLOCK: tl.constexpr,
                  HEAD_DIM: tl.constexpr, TILE_BYTES: tl.constexpr):
    """The producer's one load of the resident Q: head h's NSTEPS 64-row step tiles on q_full."""
    tlx.barrier_expect_bytes(q_full, NSTEPS * TILE_BYTES)
    for s in tl.static_range(NSTEPS):
        tlx.async_descriptor_load(desc_q, q_tiles[s], [s * BLOCK, h * HEAD_DIM], q_full)


@triton.jit
def _load_element_do(desc_do, do_tiles, step_stats, do_full, slot0, lse_ptr, delta_ptr, h,
                     total_out, out_row0, qlen, NSTEPS: tl.constexpr, BLOCK: tl.constexpr,
                     HEAD_DIM: tl.constexpr, TILE_BYTES: tl.constexpr, WITH_DELTA: tl.constexpr):
    """The producer's load of a batch element into a free dO slot (its step tiles slot0 ..
    slot0 + NSTEPS - 1): the dO tiles by TMA on do_full, and each step's statistics stored beside
    them (LSE in base 2, +inf where P must be 0; delta too unless the score warpgroups sum it,
    WITH_DELTA off); do_full's second arrival says they are stored."""
    tlx.barrier_expect_bytes(do_full, NSTEPS * TILE_BYTES)
    for s in tl.static_range(NSTEPS):
        tlx.async_descriptor_load(desc_do, do_tiles[slot0 + s],
                                  [out_row0 + s * BLOCK, h * HEAD_DIM], do_full)
        pos = s * BLOCK + tl.arange(0, BLOCK)
        if WITH_DELTA:
            lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out, out_row0, pos, qlen)
            tlx.local_store(step_stats[2 * (slot0 + s) + 1], delta)
        else:
            lse2 = _row_lse2(lse_ptr, h, total_out, out_row0, pos, qlen)
        tlx.local_store(step_stats[2 * (slot0 + s)], lse2)
    # (barrier_arrive syncs the warpgroup first: every thread's stores precede the release)
    tlx.barrier_arrive(do_full, 1)


@triton.jit
def _wait_kv_turn(cnt, k_fulls, v_fulls, NUM_BUF_K: tl.constexpr, NUM_BUF_V: tl.constexpr):
    """(K slot, V slot) of ring turn cnt, once both landed."""
    slot, phase = _bufidx_phase(cnt, NUM_BUF_K)
    tlx.barrier_wait(k_fulls[slot], phase)
    v_slot, v_phase = _bufidx_phase(cnt, NUM_BUF_V)
    tlx.barrier_wait(v_fulls[v_slot], v_phase)
    return slot, v_slot


@triton.jit
def _batch_element(it, pid, n_prog, tile_entry, n_tiles, B, H, ctas_per_head, k_off, q_len):
    """(head, first dO row, q_len, first key row, key length) of the it-th batch element of CTA
    pid, the same for every role; key length 0 past the CTA's last element (nothing to do)."""
    valid, b, h, mb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, H, 1, ctas_per_head, 1, True)
    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, k_off, k_off, q_len, True)
    return h, out_row0, qlen, kv_row0, tl.where(valid, klen, 0)


@triton.jit
def _scores_p(st, lse2, kv_pos, klen, qk_scale, BLOCK: tl.constexpr):
    """P^T of a tile from S^T (keys past klen: 0, their dS would reach dQ)."""
    pt = _dkdv_probs(st, lse2, kv_pos, 0, 0, qk_scale, False, False, BLOCK)
    return tl.where((kv_pos < klen)[:, None], pt, 0.0)


@triton.jit
def jfa_bwd_pma_kernel(
    desc_q, desc_do, desc_k, desc_v,   # TMA, boxes [64, D]: q [q_len, H*D], do [B*q_len, H*D], k/v [total_kv, H*D]
    desc_dk,                           # TMA store, box [64, D]: dk [total_kv, H*D] (DK_STAGE)
    desc_part,                         # TMA store, box [64, D]: fp32 dQ partials [n_prog * 128, D]
    desc_o,                            # TMA, box [64, D]: o [B*q_len, H*D] (FOLD_DELTA)
    dk_ptr, dv_ptr, lse_ptr, delta_ptr, k_off, tile_entry, n_entries, sm_scale, B, H, q_len,
    total_out,
    HEAD_DIM: tl.constexpr, NUM_BUF_K: tl.constexpr, NUM_BUF_V: tl.constexpr,
    NUM_BUF_PS: tl.constexpr,
    SCORE_REGS: tl.constexpr, GRAD_REGS: tl.constexpr, FOLD_DELTA: tl.constexpr,
    DK_STAGE: tl.constexpr, SPLIT_PS: tl.constexpr, DK_EARLY: tl.constexpr,
    DV_IN_DK_STAGE: tl.constexpr,
):
    BLOCK: tl.constexpr = 64           # keys per tile = query rows per step
    NSTEPS: tl.constexpr = 2
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    TILE_BYTES: tl.constexpr = ELEM * BLOCK * HEAD_DIM

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    ctas_per_head = n_prog // H
    # ---- shared memory (226 KB at D = 128) and barriers -------------------------------------
    q_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NSTEPS)
    # batch slot i, step s: do_tiles[i * NSTEPS + s]; its statistics LSE at 2(i*NSTEPS+s), delta next
    do_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, 2 * NSTEPS)
    # at the end, score warpgroup s stages its fp32 dQ partial over batch slot s's dO tiles
    dq_stage = tlx.local_alloc((BLOCK, HEAD_DIM), tl.float32, NSTEPS, reuse=do_tiles)
    step_stats = tlx.local_alloc((BLOCK,), tl.float32, 4 * NSTEPS)
    # K and V in rings of their own: a tile's V is free at its dP^T wait, its K only after the
    # next tile's dQ wgmma
    k_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NUM_BUF_K)
    v_tiles = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NUM_BUF_V)
    # P^T / dS^T [64 keys, 64 queries] per ring slot and step (`_ps`); dK/dV staging over P^T pairs
    ps_tiles = tlx.local_alloc((BLOCK, BLOCK), dtype, NUM_BUF_PS * 2 * NSTEPS)
    kv_stage = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, NUM_BUF_PS * 2, reuse=ps_tiles)
    if DK_STAGE:  # dK's own staging tile: its TMA store drains while the next tile computes
        dk_stage = tlx.local_alloc((BLOCK, HEAD_DIM), dtype, 1)
    q_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    # a batch slot is full once its dO bytes landed and its statistics are stored (2 arrivals);
    # empty once both score warpgroups' dP^T and the gradient warpgroup's dV read it
    do_fulls = tlx.alloc_barriers(num_barriers=2, arrive_count=2)
    do_empties = tlx.alloc_barriers(num_barriers=2, arrive_count=NSTEPS + 1)
    k_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_K, arrive_count=1)
    k_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_K, arrive_count=NSTEPS)
    v_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_V, arrive_count=1)
    v_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_V, arrive_count=NSTEPS)
    # step s, ring slot i at s * NUM_BUF_PS + i: full once the score warpgroup stored P^T/dS^T;
    # free once the gradient warpgroup's dV/dK (and staging) and the score warpgroup's dQ read them
    ps_fulls = tlx.alloc_barriers(num_barriers=NSTEPS * NUM_BUF_PS, arrive_count=1)
    ps_empties = tlx.alloc_barriers(num_barriers=NSTEPS * NUM_BUF_PS, arrive_count=2)
    # SPLIT_PS: the P^T tiles handed over on barriers of their own (stored before dP^T's wait, free
    # after dV's epilogue, or DV_IN_DK_STAGE after dV's wgmmas); ps_fulls / ps_empties then guard
    # the dS^T tiles only
    p_fulls = tlx.alloc_barriers(num_barriers=NSTEPS * NUM_BUF_PS, arrive_count=1)
    p_empties = tlx.alloc_barriers(num_barriers=NSTEPS * NUM_BUF_PS, arrive_count=1)
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
                    slot_b, phase_b = _bufidx_phase(cnt_b, 2)
                    tlx.barrier_wait(do_empties[slot_b], phase_b ^ 1)
                    # (FOLD_DELTA: the score warpgroups store delta)
                    _load_element_do(desc_do, do_tiles, step_stats, do_fulls[slot_b],
                                     slot_b * NSTEPS, lse_ptr, delta_ptr, h, total_out, out_row0,
                                     qlen, NSTEPS, BLOCK, HEAD_DIM, TILE_BYTES, not FOLD_DELTA)
                    cnt_b += 1
                    if FOLD_DELTA:  # the element's O rows in one ring turn: step 0's as K, 1's as V
                        _load_kv_turn(cnt_kv, desc_o, desc_o, out_row0, out_row0 + BLOCK,
                                      h * HEAD_DIM, k_tiles, v_tiles, k_fulls, k_empties,
                                      v_fulls, v_empties, TILE_BYTES, NUM_BUF_K, NUM_BUF_V)
                        cnt_kv += 1
                    for j in range(0, (klen + BLOCK - 1) // BLOCK):
                        row = kv_row0 + j * BLOCK
                        _load_kv_turn(cnt_kv, desc_k, desc_v, row, row, h * HEAD_DIM, k_tiles,
                                      v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                                      TILE_BYTES, NUM_BUF_K, NUM_BUF_V)
                        cnt_kv += 1

        # ---- score warpgroups: P^T, dS^T of step s; dQ of step s over the launch -------------
        with tlx.async_task(num_warps=4, registers=SCORE_REGS, replicate=NSTEPS):
            s: tl.constexpr = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            dq = tl.zeros([BLOCK, HEAD_DIM], dtype=tl.float32)
            tlx.barrier_wait(q_full[0], 0)
            q_s = q_tiles[s]
            cnt_b = 0
            cnt_kv = 0
            cnt_ps = 0
            # the previous tile's K slot and P^T/dS^T ring slot (-1: none), held until its dQ
            # wgmma, issued in the next tile, finished
            prev_k = -1
            prev_ps = NUM_BUF_PS - 1
            # the zero dS^T the first tile's dQ wgmma reads (its ring slot's first real use comes
            # after that wgmma finished)
            tlx.local_store(ps_tiles[_ps(prev_ps, 1, s)], tl.zeros([BLOCK, BLOCK], dtype=dtype))
            tlx.fence("async_shared")
            for it in range(0, n_iter):
                h, out_row0, qlen, kv_row0, klen = _batch_element(
                    it, pid, n_prog, tile_entry, n_tiles, B, H, ctas_per_head, k_off, q_len)
                if klen > 0:
                    slot_b, phase_b = _bufidx_phase(cnt_b, 2)
                    tlx.barrier_wait(do_fulls[slot_b], phase_b)
                    do_s = do_tiles[slot_b * NSTEPS + s]
                    stats = 2 * (slot_b * NSTEPS + s)
                    if FOLD_DELTA:  # delta of the step's rows from its O rows (in the K and V rings)
                        # (both warpgroups wait for both slots and free both: an arrival on a slot
                        # not waited for could count towards its previous use)
                        slot, v_slot = _wait_kv_turn(cnt_kv, k_fulls, v_fulls, NUM_BUF_K,
                                                     NUM_BUF_V)
                        if s == 0:
                            o_s = tlx.local_load(k_tiles[slot])
                        else:
                            o_s = tlx.local_load(v_tiles[v_slot])
                        delta = tl.sum(o_s.to(tl.float32) * tlx.local_load(do_s).to(tl.float32), 1)
                        tlx.local_store(step_stats[stats + 1], delta)
                        tlx.barrier_arrive(k_empties[slot], 1)
                        tlx.barrier_arrive(v_empties[v_slot], 1)
                        cnt_kv += 1
                    for j in range(0, (klen + BLOCK - 1) // BLOCK):
                        slot, v_slot = _wait_kv_turn(cnt_kv, k_fulls, v_fulls, NUM_BUF_K,
                                                     NUM_BUF_V)
                        st = tlx.async_dot(k_tiles[slot], tlx.local_trans(q_s))
                        dpt = tlx.async_dot(v_tiles[v_slot], tlx.local_trans(do_s))
                        lse2 = tlx.local_load(step_stats[stats])
                        kv_pos = j * BLOCK + tl.arange(0, BLOCK)
                        # the previous tile's dQ wgmma goes after this tile's S^T/dP^T and is
                        # waited on within this iteration: in flight across the loop's back edge
                        # (waited at the next tile's first wait) it made ptxas serialise every
                        # wgmma of the kernel (C7515); waited right after its issue it stalled
                        # the warpgroup (run 22, calls 1-2). The first tile's "previous" is a
                        # zero dS^T tile over this tile's K: it adds 0.
                        dq = tlx.async_dot(tlx.local_trans(ps_tiles[_ps(prev_ps, 1, s)]),
                                           k_tiles[tl.where(prev_k >= 0, prev_k, slot)], dq)
                        st = tlx.async_dot_wait(2, st)
                        pt = _scores_p(st, lse2, kv_pos, klen, qk_scale, BLOCK)
                        ps_slot, ps_phase = _bufidx_phase(cnt_ps, NUM_BUF_PS)
                        if SPLIT_PS:  # P^T to the gradient warpgroup before dP^T is waited on
                            tlx.barrier_wait(p_empties[s * NUM_BUF_PS + ps_slot], ps_phase ^ 1)
                            tlx.local_store(ps_tiles[_ps(ps_slot, 0, s)], pt.to(dtype))
                            tlx.fence("async_shared")
                            tlx.barrier_arrive(p_fulls[s * NUM_BUF_PS + ps_slot], 1)
                        delta = tlx.local_load(step_stats[stats + 1])
                        dpt = tlx.async_dot_wait(1, dpt)
                        tlx.barrier_arrive(v_empties[v_slot], 1)  # the tile's V is read
                        dst = pt * (dpt - delta[None, :])
                        dq = tlx.async_dot_wait(0, dq)
                        if prev_k >= 0:
                            tlx.barrier_arrive(k_empties[prev_k], 1)
                            tlx.barrier_arrive(ps_empties[s * NUM_BUF_PS + prev_ps], 1)
                        tlx.barrier_wait(ps_empties[s * NUM_BUF_PS + ps_slot], ps_phase ^ 1)
                        if not SPLIT_PS:
                            tlx.local_store(ps_tiles[_ps(ps_slot, 0, s)], pt.to(dtype))
                        tlx.local_store(ps_tiles[_ps(ps_slot, 1, s)], dst.to(dtype))
                        tlx.fence("async_shared")
                        tlx.barrier_arrive(ps_fulls[s * NUM_BUF_PS + ps_slot], 1)
                        prev_k = slot
                        prev_ps = ps_slot
                        cnt_ps += 1
                        cnt_kv += 1
                    # this warpgroup's last dP^T of the element was waited on
                    tlx.barrier_arrive(do_empties[slot_b], 1)
                    cnt_b += 1
            if prev_k >= 0:  # the last tile's dQ
                dq = tlx.async_dot(tlx.local_trans(ps_tiles[_ps(prev_ps, 1, s)]), k_tiles[prev_k], dq)
                dq = tlx.async_dot_wait(0, dq)
            # every role is done with the dO tiles once both batch slots were given back after
            # their last use (the producer loads nothing more): stage the partial over them
            for k in tl.static_range(2):
                slot_b, phase_b = _bufidx_phase(cnt_b + k, 2)
                tlx.barrier_wait(do_empties[slot_b], phase_b ^ 1)
            stage = dq_stage[s]
            tlx.local_store(stage, dq * sm_scale)
            tlx.fence("async_shared")
            tlx.async_descriptor_store(desc_part, stage, [pid * (NSTEPS * BLOCK) + s * BLOCK, 0])
            tlx.async_descriptor_store_wait(0)

        # ---- gradient warpgroup: dV, dK of each tile ---------------------------------------
        with tlx.async_task(num_warps=4, registers=GRAD_REGS):
            tlx.barrier_wait(q_full[0], 0)  # dK reads Q
            cnt_b = 0
            cnt_ps = 0
            for it in range(0, n_iter):
                h, out_row0, qlen, kv_row0, klen = _batch_element(
                    it, pid, n_prog, tile_entry, n_tiles, B, H, ctas_per_head, k_off, q_len)
                if klen > 0:
                    slot_b, phase_b = _bufidx_phase(cnt_b, 2)
                    tlx.barrier_wait(do_fulls[slot_b], phase_b)
                    for j in range(0, (klen + BLOCK - 1) // BLOCK):
                        ps_slot, ps_phase = _bufidx_phase(cnt_ps, NUM_BUF_PS)
                        stage = kv_stage[2 * ps_slot]
                        nrows = klen - j * BLOCK
                        dv = None  # step 0's wgmmas start the accumulators
                        dk = None
                        for s in tl.static_range(NSTEPS):
                            if SPLIT_PS:  # dV from the P^T tiles as they come
                                tlx.barrier_wait(p_fulls[s * NUM_BUF_PS + ps_slot], ps_phase)
                            else:
                                tlx.barrier_wait(ps_fulls[s * NUM_BUF_PS + ps_slot], ps_phase)
                            dv = tlx.async_dot(ps_tiles[_ps(ps_slot, 0, s)],
                                               do_tiles[slot_b * NSTEPS + s], dv)
                            if not SPLIT_PS:
                                dk = tlx.async_dot(ps_tiles[_ps(ps_slot, 1, s)], q_tiles[s], dk)
                        dv = tlx.async_dot_wait(0, dv)
                        if DK_EARLY:  # dK's wgmmas run under dV's epilogue
                            dk = _issue_dk(dk, ps_tiles, q_tiles, ps_fulls, ps_slot, ps_phase,
                                           NUM_BUF_PS, NSTEPS)
                        # the slot's P^T tiles are read (by the dV wgmmas only): stage dV over them
                        # and store the rows below klen (SPLIT_PS: then P^T goes back and dK
                        # waits for dS^T, unless DK_EARLY issued it already). DV_IN_DK_STAGE:
                        # P^T goes back first and dV is staged in dK's tile, once the last tile's
                        # dK store read it (a tile ago)
                        dv_stage = stage
                        if DV_IN_DK_STAGE:
                            _release_steps(p_empties, ps_slot, NUM_BUF_PS, NSTEPS)
                            tlx.async_descriptor_store_wait(0)
                            dv_stage = dk_stage[0]
                        tlx.local_store(dv_stage, dv.to(dtype))
                        _store_rows(dv_ptr, tlx.local_load(dv_stage), kv_row0 + j * BLOCK, nrows,
                                    H, h, HEAD_DIM, BLOCK)
                        if SPLIT_PS:
                            if not DV_IN_DK_STAGE:
                                _release_steps(p_empties, ps_slot, NUM_BUF_PS, NSTEPS)
                            if not DK_EARLY:
                                dk = _issue_dk(dk, ps_tiles, q_tiles, ps_fulls, ps_slot, ps_phase,
                                               NUM_BUF_PS, NSTEPS)
                        dk = tlx.async_dot_wait(0, dk)
                        if DK_STAGE:
                            # P^T (dV's staging, read back) and dS^T (dK's wgmmas) are done with
                            # (SPLIT_PS: dS^T only, P^T went back with dV's epilogue, or
                            # DV_IN_DK_STAGE before it)
                            _release_steps(ps_empties, ps_slot, NUM_BUF_PS, NSTEPS)
                            # the last tile's dK store read it (DV_IN_DK_STAGE: waited before dV)
                            tlx.async_descriptor_store_wait(0)
                            tlx.local_store(dk_stage[0], (dk * sm_scale).to(dtype))
                            if nrows >= BLOCK:  # every row in the sequence
                                tlx.fence("async_shared")
                                tlx.async_descriptor_store(desc_dk, dk_stage[0],
                                                           [kv_row0 + j * BLOCK, h * HEAD_DIM])
                            else:
                                _store_rows(dk_ptr, tlx.local_load(dk_stage[0]),
                                            kv_row0 + j * BLOCK, nrows, H, h, HEAD_DIM, BLOCK)
                        else:
                            tlx.local_store(stage, (dk * sm_scale).to(dtype))
                            _store_rows(dk_ptr, tlx.local_load(stage), kv_row0 + j * BLOCK, nrows,
                                        H, h, HEAD_DIM, BLOCK)
                            _release_steps(ps_empties, ps_slot, NUM_BUF_PS, NSTEPS)
                        cnt_ps += 1
                    # the element's last dV was waited on
                    tlx.barrier_arrive(do_empties[slot_b], 1)
                    cnt_b += 1
            if DK_STAGE:
                tlx.async_descriptor_store_wait(0)  # the last dK store is out of shared memory
