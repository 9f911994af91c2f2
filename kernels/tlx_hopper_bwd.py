"""TLX warp-specialised jagged flash-attention backward for Hopper (sm_90).

Two warp-specialised persistent passes, no atomics on dK/dV, deterministic except where noted:

1. `jfa_bwd_dkdv_kernel`, KV-stationary: a tile is (batch b, KV head hk, KV block of 128 rows);
   consumer warpgroup c owns KV rows 64c..64c+63 of the block and keeps dK, dV for them in
   registers while it walks every q head of the GQA group and every 64-row query step that sees the
   block (`q_block_range`). Per step: S^T = K Q^T and dP^T = V dO^T (wgmma, K/V/Q/dO in shared
   memory), P^T = exp2(S^T*scale*log2e - LSE*log2e), dS^T = P^T (dP^T - delta), dV += P^T dO and
   dK += dS^T Q (P^T, dS^T as register operands). dK, dV are written once.
   Producer warpgroup: TMA loads of the two K/V halves (one slot per tile, double-buffered) and of
   the Q/dO step tiles (a ring), plus each step's row statistics (below).
2. `jfa_bwd_dq_kernel`, Q-stationary like the forward (same schedule helpers): a tile is (b, head,
   q-block); per KV block S = Q K^T, dP = dO V^T, dS = P (dP - delta), dQ += dS K, dQ kept in
   registers. With broadcast_q in the forward's "resident" mode a CTA owns one (head, q-block) for
   the whole launch and accumulates dQ over all its batches; it writes one fp32 partial (staged in
   shared memory through its own Q/dO tiles, then a TMA store: no relayout scratch, which is what
   lets three consumer warpgroups fit), and `_jfa_dq_reduce_kernel` sums the partials of a pair in
   a fixed order (deterministic). Without it
   (more pairs than SMs) each tile reduce-adds into an fp32 buffer with atomics (not deterministic;
   `tlx_hopper.supports` declines deterministic=True there).

FUSED_DQ (`BwdConfig.fused_dq`, on: D=128 with deterministic=False): pass 1 also computes dQ and
pass 2 is skipped. Per query step each consumer publishes its dS^T half in shared memory (named barrier
DS_READY_BAR), computes dQ[:, 64c:64c+64] = dS K[:, 64c:64c+64] over both K halves, and after the
second barrier (STEP_DONE_BAR: both consumers' wgmmas of the step done) stages the fp32 partial
over the step's Q (c = 0) or dO (c = 1) tile and reduce-adds it into an fp32 dQ by TMA
(`cp.reduce.async.bulk`); the slot goes back to the producer at the next step, once the reduce has
read it. Keys past klen get P = 0 (their dS would reach dQ). broadcast_q: every tile adds into the
same q_len rows (fp32, L2-resident).

Row statistics: pass 1's producer loads each query step's LSE/delta and stores them beside the
step's Q/dO slot, so pass 1's consumers issue no global loads (run 16: loaded by the consumers,
in the step or a step ahead, they stalled the step's math; the producer waits for them off the
critical path).

Masking: query rows past qlen and rows that see no key get LSE' = +inf, so P = 0 there without a
mask; the causal/window (and, in the dq pass, klen) masks are applied with tl.where on P.
delta = rowsum(dO * O) comes from `_jfa_bwd_preprocess_kernel`.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_hopper_fwd import _bufidx_phase
from kernels.tlx_schedule import (kv_block_range, n_iterations, q_block_range, seq_bounds,
                                  tile_at)

LOG2E = tl.constexpr(1.4426950408889634)
# FUSED_DQ dK/dV pass: the two consumers' rendezvous per query step (named barriers, 256 threads)
DS_READY_BAR = tl.constexpr(9)   # both dS^T halves are in shared memory
STEP_DONE_BAR = tl.constexpr(10)  # both consumers' wgmmas of the step finished


@triton.jit
def _jfa_bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, dq_acc_ptr, total_out, H,
                               HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr, ZERO_DQ: tl.constexpr):
    """delta[h, r] = sum_d O[r, h, d] * dO[r, h, d] in fp32; with ZERO_DQ (fused dQ, self/cross:
    output rows are query rows) also zeroes the fp32 dQ accumulator's rows, saving a memset."""
    h = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    ok = rows < total_out
    offs = rows.to(tl.int64)[:, None] * (H * HEAD_DIM) + h * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    o = tl.load(o_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=ok[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + h.to(tl.int64) * total_out + rows, tl.sum(o * do, 1), mask=ok)
    if ZERO_DQ:
        tl.store(dq_acc_ptr + offs, tl.zeros([BLOCK_R, HEAD_DIM], dtype=tl.float32), mask=ok[:, None])


@triton.jit
def _row_lse2(lse_ptr, h, total_out, out_row0, pos, qlen):
    """LSE in base 2 with +inf where P must be 0, for query positions `pos` (positions past qlen
    load LSE -inf: +inf too)."""
    lse = tl.load(lse_ptr + h.to(tl.int64) * total_out + out_row0 + pos, mask=pos < qlen,
                  other=float("-inf"))
    return tl.where(lse != float("-inf"), lse * LOG2E, float("inf"))


@triton.jit
def _row_stats(lse_ptr, delta_ptr, h, total_out, out_row0, pos, qlen):
    """(`_row_lse2`, delta) for query positions `pos`."""
    delta = tl.load(delta_ptr + h.to(tl.int64) * total_out + out_row0 + pos, mask=pos < qlen,
                    other=0.0)
    return _row_lse2(lse_ptr, h, total_out, out_row0, pos, qlen), delta


@triton.jit
def _dkdv_step(s, hk, G, qlo, nsteps, BLOCK_MQ: tl.constexpr):
    """(q head, first query row) of query step s of a dk/dv tile: s walks the GQA group's heads,
    nsteps steps each (producer and consumers of both dk/dv kernels call this)."""
    return hk * G + s // nsteps, qlo + (s % nsteps) * BLOCK_MQ


@triton.jit
def _dkdv_probs(st, lse2, kv_pos, i0, window, qk_scale, CAUSAL: tl.constexpr,
                HAS_WINDOW: tl.constexpr, BLOCK_MQ: tl.constexpr):
    """P^T of one query step from S^T = K Q^T (rows: keys kv_pos, cols: queries i0 + col)."""
    pt = tl.math.exp2(st * qk_scale - lse2[None, :])
    if CAUSAL or HAS_WINDOW:
        # i - j in [lo, hi]  <=>  col - thr in [lo, hi], col = i - step start
        cols = tl.arange(0, BLOCK_MQ)[None, :]
        thr = (kv_pos - i0)[:, None]
        if CAUSAL:
            vis = cols >= thr
            if HAS_WINDOW:
                vis = vis & (cols <= thr + window)
        else:
            vis = (cols >= thr - window) & (cols <= thr + window)
        pt = tl.where(vis, pt, 0.0)
    return pt


@triton.jit
def _store_kv_rows(dk_ptr, dv_ptr, dk, dv, row0, klen, kv_row0, hk, HKV, HEAD_DIM: tl.constexpr,
                   HALF: tl.constexpr):
    """dK, dV (already scaled and cast) of key rows row0 .. row0+HALF-1 that lie below klen (rows
    past it belong to the next sequence)."""
    pos = row0 + tl.arange(0, HALF)
    rows = (kv_row0 + pos).to(tl.int64)
    offs = rows[:, None] * (HKV * HEAD_DIM) + hk * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    ok = (pos < klen)[:, None]
    tl.store(dk_ptr + offs, dk, mask=ok)
    tl.store(dv_ptr + offs, dv, mask=ok)


@triton.jit
def _release_held_kv_slot(kv_empties, held_slot):
    """TMA_EPILOGUE: give the K/V slot (held_slot >= 0) whose halves the previous tile's dK/dV TMA
    stores read back to the producer once they finished; returns the new held slot (-1). A helper
    rather than inline: 2-5 fewer STL/LDL instructions in the masked D=128 variants (compile check)."""
    if held_slot >= 0:
        tlx.async_descriptor_store_wait(0)
        tlx.barrier_arrive(kv_empties[held_slot], 1)
    return -1


@triton.jit
def _opaque(x):
    """x, recomputed where it is used: the compiler cannot hoist what derives from it."""
    return tl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _release_held_q_slot(q_empties, held_q):
    """FUSED_DQ: give the Q/dO slot (held_q >= 0) that staged the previous step's dQ partial back
    to the producer once its TMA reduce-add has read it; returns the new held slot (-1)."""
    if held_q >= 0:
        tlx.async_descriptor_store_wait(0)
        tlx.barrier_arrive(q_empties[held_q], 1)
    return -1


@triton.jit
def jfa_bwd_dkdv_kernel(
    desc_q, desc_do, desc_k, desc_v,   # TMA: q [rows_q, Hq*D], do [total_out, Hq*D], k/v [total_kv, Hkv*D]
    desc_dk, desc_dv,                  # TMA stores of dK/dV [total_kv, Hkv*D] (TMA_EPILOGUE)
    desc_dq,                           # FUSED_DQ: TMA reduce-add target, fp32 dQ [rows_q, Hq*D],
                                       #   box [64, D/2]
    dk_ptr, dv_ptr, lse_ptr, delta_ptr, q_off, k_off, tile_entry, n_entries,
    sm_scale, window, B, HKV, G, q_len, NUM_NB, total_out, tile_window,
    HEAD_DIM: tl.constexpr, NUM_BUF_Q: tl.constexpr, CONSUMER_REGS: tl.constexpr,
    CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
    TMA_EPILOGUE: tl.constexpr, FUSED_DQ: tl.constexpr, EARLY_Q_RELEASE: tl.constexpr,
):
    HALF: tl.constexpr = 64            # KV rows per consumer warpgroup
    BLOCK_N: tl.constexpr = 128        # KV rows per tile (2 consumers)
    BLOCK_MQ: tl.constexpr = 64        # query rows per step
    NUM_BUF_KV: tl.constexpr = 2       # KV tiles in flight
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    HALF_BYTES: tl.constexpr = ELEM * HALF * HEAD_DIM
    STEP_BYTES: tl.constexpr = ELEM * BLOCK_MQ * HEAD_DIM
    DQ_COLS: tl.constexpr = HEAD_DIM // 2  # FUSED_DQ: dQ columns per consumer

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    # ---- shared memory and barriers -------------------------------------------------------
    k_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2 * NUM_BUF_KV)
    v_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2 * NUM_BUF_KV)
    # step slot i: Q tile qdo_tiles[2i], dO tile qdo_tiles[2i + 1] (adjacent: FUSED_DQ stages over them)
    qdo_tiles = tlx.local_alloc((BLOCK_MQ, HEAD_DIM), dtype, 2 * NUM_BUF_Q)
    kv_fulls = tlx.alloc_barriers(num_barriers=2 * NUM_BUF_KV, arrive_count=1)
    kv_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=2)
    # step slot i's row statistics: LSE (base 2, +inf where P = 0) at 2i, delta at 2i + 1
    step_stats = tlx.local_alloc((BLOCK_MQ,), tl.float32, 2 * NUM_BUF_Q)
    # a step's slot is full once its TMA bytes landed (arrival 1) and its statistics are stored
    # (arrival 2)
    q_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_Q, arrive_count=2)
    q_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_Q, arrive_count=2)
    if FUSED_DQ:
        # dS^T of the step, one [64 keys, 64 queries] half per consumer: dQ's A operand (transposed)
        ds_tiles = tlx.local_alloc((HALF, BLOCK_MQ), dtype, 2)
        # consumer c's fp32 dQ partial [64 queries, D/2 columns] is staged over the step's Q tile
        # (c = 0) or dO tile (c = 1): the same bytes, free once both consumers' wgmmas finished
        dq_stage = tlx.local_alloc((BLOCK_MQ, DQ_COLS), tl.float32, 2 * NUM_BUF_Q, reuse=qdo_tiles)
    n_tiles = tl.load(n_entries) * HKV
    n_iter = n_iterations(n_tiles, n_prog, B, 1, False)

    with tlx.async_tasks():
        # ---- producer: K/V halves per tile, Q/dO per step -----------------------------------
        with tlx.async_task("default"):
            cnt_kv = 0
            cnt_q = 0
            for it in range(0, n_iter):
                valid, b, hk, nb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB,
                                           1, tile_window, False)
                if valid:
                    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len,
                                                                       BROADCAST_Q)
                    n0 = nb * BLOCK_N
                    qlo, nsteps = q_block_range(n0, klen, qlen, window, CAUSAL, HAS_WINDOW,
                                                BLOCK_N, BLOCK_MQ)
                    if nsteps > 0:
                        slot, phase = _bufidx_phase(cnt_kv, NUM_BUF_KV)
                        tlx.barrier_wait(kv_empties[slot], phase ^ 1)
                        for c in tl.static_range(2):
                            bar = kv_fulls[2 * slot + c]
                            tlx.barrier_expect_bytes(bar, 2 * HALF_BYTES)
                            tlx.async_descriptor_load(desc_k, k_tiles[2 * slot + c],
                                                      [kv_row0 + n0 + c * HALF, hk * HEAD_DIM], bar)
                            tlx.async_descriptor_load(desc_v, v_tiles[2 * slot + c],
                                                      [kv_row0 + n0 + c * HALF, hk * HEAD_DIM], bar)
                        cnt_kv += 1
                        for s in range(0, G * nsteps):
                            h, i0 = _dkdv_step(s, hk, G, qlo, nsteps, BLOCK_MQ)
                            q_slot, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
                            # the statistics' loads are in flight while the slot drains
                            lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out, out_row0,
                                                     i0 + tl.arange(0, BLOCK_MQ), qlen)
                            tlx.barrier_wait(q_empties[q_slot], q_phase ^ 1)
                            tlx.barrier_expect_bytes(q_fulls[q_slot], 2 * STEP_BYTES)
                            tlx.async_descriptor_load(desc_q, qdo_tiles[2 * q_slot],
                                                      [q_row0 + i0, h * HEAD_DIM], q_fulls[q_slot])
                            tlx.async_descriptor_load(desc_do, qdo_tiles[2 * q_slot + 1],
                                                      [out_row0 + i0, h * HEAD_DIM], q_fulls[q_slot])
                            tlx.local_store(step_stats[2 * q_slot], lse2)
                            tlx.local_store(step_stats[2 * q_slot + 1], delta)
                            # (barrier_arrive syncs the warpgroup first: every thread's stores
                            # precede the release)
                            tlx.barrier_arrive(q_fulls[q_slot], 1)
                            cnt_q += 1

        # ---- consumers: dK, dV of 64 KV rows each --------------------------------------------
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=2):
            cid: tl.constexpr = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            cnt_kv = 0
            cnt_q = 0
            # TMA_EPILOGUE: the K/V slot whose halves a TMA store of dK/dV is still reading (-1:
            # none). It goes back to the producer after the next tile's first query step, so the
            # store drains while that step computes.
            held_slot = -1
            held_q = -1  # FUSED_DQ: likewise the Q/dO slot a dQ reduce-add is still reading
            for it in range(0, n_iter):
                valid, b, hk, nb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB,
                                           1, tile_window, False)
                if valid:
                    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len,
                                                                       BROADCAST_Q)
                    n0 = nb * BLOCK_N
                    qlo, nsteps = q_block_range(n0, klen, qlen, window, CAUSAL, HAS_WINDOW,
                                                BLOCK_N, BLOCK_MQ)
                    kv_pos = n0 + cid * HALF + tl.arange(0, HALF)   # this warpgroup's key rows
                    dk = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
                    dv = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
                    # A TMA store cannot stop at klen: only halves with every row in the sequence
                    # take it (rows past klen belong to the next sequence).
                    tma_store = TMA_EPILOGUE and (n0 + cid * HALF + HALF <= klen)
                    if nsteps > 0:
                        slot, phase = _bufidx_phase(cnt_kv, NUM_BUF_KV)
                        tlx.barrier_wait(kv_fulls[2 * slot + cid], phase)
                        if FUSED_DQ:  # dQ = dS K reads both K halves
                            tlx.barrier_wait(kv_fulls[2 * slot + 1 - cid], phase)
                        k_c = k_tiles[2 * slot + cid]
                        v_c = v_tiles[2 * slot + cid]
                        for s in range(0, G * nsteps):
                            h, i0 = _dkdv_step(s, hk, G, qlo, nsteps, BLOCK_MQ)
                            q_slot, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
                            tlx.barrier_wait(q_fulls[q_slot], q_phase)
                            lse2 = tlx.local_load(step_stats[2 * q_slot])
                            delta = tlx.local_load(step_stats[2 * q_slot + 1])
                            q_t = qdo_tiles[2 * q_slot]
                            do_t = qdo_tiles[2 * q_slot + 1]
                            if FUSED_DQ:
                                # _opaque buffer indices: the compiler recomputes the wgmma
                                # descriptors per step instead of holding them in registers
                                # (D=128: 193 spilled words otherwise, 8-15 with)
                                kv_i = _opaque(2 * slot + cid)
                                st = tlx.async_dot(k_tiles[kv_i], tlx.local_trans(q_t))
                                dpt = tlx.async_dot(v_tiles[kv_i], tlx.local_trans(do_t))
                            else:
                                st = tlx.async_dot(k_c, tlx.local_trans(q_t))
                                dpt = tlx.async_dot(v_c, tlx.local_trans(do_t))
                            if FUSED_DQ and EARLY_Q_RELEASE:
                                held_q = _release_held_q_slot(q_empties, held_q)
                            st = tlx.async_dot_wait(1, st)
                            pt = _dkdv_probs(st, lse2, kv_pos, i0, window, qk_scale, CAUSAL,
                                             HAS_WINDOW, BLOCK_MQ)
                            if FUSED_DQ:
                                # keys past klen are the next sequence's: their dK/dV rows are
                                # dropped, but their dS would reach dQ
                                pt = tl.where((kv_pos < klen)[:, None], pt, 0.0)
                            dpt = tlx.async_dot_wait(0, dpt)
                            dst = (pt * (dpt - delta[None, :])).to(dtype)
                            dv = tlx.async_dot(pt.to(dtype), do_t, dv)
                            dk = tlx.async_dot(dst, q_t, dk)
                            if FUSED_DQ and not EARLY_Q_RELEASE:
                                # the previous step's dQ reduce-add has had this step's S^T/dP^T
                                # and P^T math to read its staging; waiting for it right after
                                # issuing S^T/dP^T stalled the consumers (run 16's counters)
                                held_q = _release_held_q_slot(q_empties, held_q)
                            if FUSED_DQ:
                                # dQ[:, cols of c] = dS K[:, cols of c] = sum over both key halves
                                # j of (dS^T_j)^T K_j[:, cols of c]: publish this half of dS^T,
                                # then read both (rows past qlen have dS = 0: their reduce-add
                                # into the neighbour's rows adds exact zeros; broadcast_q: every
                                # tile adds into the same q_len rows)
                                tlx.fence("async_shared")
                                tlx.local_store(ds_tiles[cid], dst)
                                tlx.fence("async_shared")
                                tlx.named_barrier_wait(DS_READY_BAR, 256)
                                k0 = _opaque(2 * slot)
                                d0 = _opaque(0)
                                dq = tlx.async_dot(
                                    tlx.local_trans(ds_tiles[d0]),
                                    tlx.local_slice(k_tiles[k0], [0, cid * DQ_COLS],
                                                    [HALF, DQ_COLS]))
                                dq = tlx.async_dot(
                                    tlx.local_trans(ds_tiles[d0 + 1]),
                                    tlx.local_slice(k_tiles[k0 + 1], [0, cid * DQ_COLS],
                                                    [HALF, DQ_COLS]), dq)
                            dk = tlx.async_dot_wait(0, dk)
                            dv = tlx.async_dot_wait(0, dv)
                            if TMA_EPILOGUE:
                                held_slot = _release_held_kv_slot(kv_empties, held_slot)
                            if FUSED_DQ:
                                dq = tlx.async_dot_wait(0, dq)
                                # the step's Q/dO tiles and both dS^T halves are read: stage the
                                # partial over them and reduce-add it into dQ by TMA
                                tlx.named_barrier_wait(STEP_DONE_BAR, 256)
                                stage = dq_stage[2 * q_slot + cid]
                                tlx.fence("async_shared")
                                tlx.local_store(stage, dq * sm_scale)
                                tlx.fence("async_shared")
                                tlx.async_descriptor_store(desc_dq, stage,
                                                           [q_row0 + i0, h * HEAD_DIM + cid * DQ_COLS],
                                                           store_reduce="add")
                                held_q = q_slot
                            else:
                                tlx.barrier_arrive(q_empties[q_slot], 1)
                            cnt_q += 1
                        # This warpgroup's K/V halves are free (its last wgmma was waited on;
                        # FUSED_DQ: the other's too, STEP_DONE_BAR): stage dK, dV there
                        tlx.fence("async_shared")
                        tlx.local_store(k_c, (dk * sm_scale).to(dtype))
                        tlx.local_store(v_c, dv.to(dtype))
                        tlx.fence("async_shared")
                        if tma_store:  # and store them by TMA, off the critical path
                            row = kv_row0 + n0 + cid * HALF
                            tlx.async_descriptor_store(desc_dk, k_c, [row, hk * HEAD_DIM])
                            tlx.async_descriptor_store(desc_dv, v_c, [row, hk * HEAD_DIM])
                            held_slot = slot
                        else:
                            # a half that straddles klen (a TMA box cannot stop there): read it
                            # back in the masked store's layout (no relayout scratch)
                            _store_kv_rows(dk_ptr, dv_ptr, tlx.local_load(k_c), tlx.local_load(v_c),
                                           n0 + cid * HALF, klen, kv_row0, hk, HKV, HEAD_DIM, HALF)
                            tlx.barrier_arrive(kv_empties[slot], 1)
                        cnt_kv += 1
                    if nsteps == 0:  # no query sees these keys
                        zero = tl.zeros([HALF, HEAD_DIM], dtype=dtype)
                        _store_kv_rows(dk_ptr, dv_ptr, zero, zero, n0 + cid * HALF, klen, kv_row0,
                                       hk, HKV, HEAD_DIM, HALF)
            if TMA_EPILOGUE or FUSED_DQ:
                tlx.async_descriptor_store_wait(0)  # the last stores finish before the CTA exits


@triton.jit
def jfa_bwd_dq_kernel(
    desc_q, desc_do, desc_k, desc_v, desc_part,  # desc_part: the fp32 partials [n_prog * BLOCK_M, D] (resident)
    dq_ptr, dq_acc_ptr, lse_ptr, delta_ptr, q_off, k_off, tile_entry, n_entries,
    sm_scale, window, B, H, G, q_len, NUM_MB, total_out, ctas_per_pair, tile_window,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NUM_GROUPS: tl.constexpr,
    NUM_BUF_KV: tl.constexpr, CONSUMER_REGS: tl.constexpr, CAUSAL: tl.constexpr,
    HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr, RESIDENT: tl.constexpr,
):
    """dq_ptr: dQ in q's dtype (non-broadcast); desc_part: fp32 per-CTA partials [n_prog * BLOCK_M, D]
    (broadcast, resident); dq_acc_ptr: fp32 [q_len, H, D] atomics target (broadcast, not resident)."""
    BM_SPLIT: tl.constexpr = 64
    BLOCK_M: tl.constexpr = BM_SPLIT * NUM_GROUPS
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    Q_BYTES: tl.constexpr = ELEM * BM_SPLIT * HEAD_DIM
    KV_BYTES: tl.constexpr = ELEM * BLOCK_N * HEAD_DIM

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    # group g's Q tile is qdo_tiles[2g], its dO tile qdo_tiles[2g + 1]: adjacent, so that in resident
    # mode the group's fp32 dQ partial (the same bytes as the two) is staged over them at the end
    qdo_tiles = tlx.local_alloc((BM_SPLIT, HEAD_DIM), dtype, 2 * NUM_GROUPS)
    if RESIDENT:
        dq_stage = tlx.local_alloc((BM_SPLIT, HEAD_DIM), tl.float32, NUM_GROUPS, reuse=qdo_tiles)
    k_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_BUF_KV)
    v_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_BUF_KV)
    q_fulls = tlx.alloc_barriers(num_barriers=NUM_GROUPS, arrive_count=1)
    q_empties = tlx.alloc_barriers(num_barriers=NUM_GROUPS, arrive_count=1)
    kv_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=1)
    kv_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=NUM_GROUPS)
    n_tiles = tl.load(n_entries) * H
    n_iter = n_iterations(n_tiles, n_prog, B, ctas_per_pair, RESIDENT)

    with tlx.async_tasks():
        # ---- producer: Q/dO slices per tile, K/V blocks -------------------------------------
        with tlx.async_task("default"):
            cnt_kv = 0
            cnt_q = 0
            for it in range(0, n_iter):
                valid, b, h, mb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                          ctas_per_pair, tile_window, RESIDENT)
                if valid:
                    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len,
                                                                       BROADCAST_Q)
                    m0 = mb * BLOCK_M
                    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW,
                                              BLOCK_M, BLOCK_N)
                    if nblk > 0:
                        q_phase = cnt_q & 1
                        for g in tl.static_range(NUM_GROUPS):
                            tlx.barrier_wait(q_empties[g], q_phase ^ 1)
                            tlx.barrier_expect_bytes(q_fulls[g], 2 * Q_BYTES)
                            tlx.async_descriptor_load(desc_q, qdo_tiles[2 * g],
                                                      [q_row0 + m0 + g * BM_SPLIT, h * HEAD_DIM],
                                                      q_fulls[g])
                            tlx.async_descriptor_load(desc_do, qdo_tiles[2 * g + 1],
                                                      [out_row0 + m0 + g * BM_SPLIT, h * HEAD_DIM],
                                                      q_fulls[g])
                        cnt_q += 1
                        kv_col = (h // G) * HEAD_DIM
                        for j in range(0, nblk):
                            slot, phase = _bufidx_phase(cnt_kv, NUM_BUF_KV)
                            row = kv_row0 + lo + j * BLOCK_N
                            tlx.barrier_wait(kv_empties[slot], phase ^ 1)
                            tlx.barrier_expect_bytes(kv_fulls[slot], 2 * KV_BYTES)
                            tlx.async_descriptor_load(desc_k, k_tiles[slot], [row, kv_col],
                                                      kv_fulls[slot])
                            tlx.async_descriptor_load(desc_v, v_tiles[slot], [row, kv_col],
                                                      kv_fulls[slot])
                            cnt_kv += 1

        # ---- consumers: dQ of 64 query rows each --------------------------------------------
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=NUM_GROUPS):
            cid: tl.constexpr = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            cnt_kv = 0
            cnt_q = 0
            offs_d = tl.arange(0, HEAD_DIM)
            dq = tl.zeros([BM_SPLIT, HEAD_DIM], dtype=tl.float32)
            for it in range(0, n_iter):
                valid, b, h, mb = tile_at(it, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                          ctas_per_pair, tile_window, RESIDENT)
                if valid:
                    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len,
                                                                       BROADCAST_Q)
                    m0 = mb * BLOCK_M
                    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW,
                                              BLOCK_M, BLOCK_N)
                    rows = m0 + cid * BM_SPLIT + tl.arange(0, BM_SPLIT)
                    if not RESIDENT:
                        dq = tl.zeros([BM_SPLIT, HEAD_DIM], dtype=tl.float32)
                    if nblk > 0:
                        lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out, out_row0, rows,
                                                 qlen)
                        tlx.barrier_wait(q_fulls[cid], cnt_q & 1)
                        q_c = qdo_tiles[2 * cid]
                        do_c = qdo_tiles[2 * cid + 1]
                        for j in range(0, nblk):
                            slot, phase = _bufidx_phase(cnt_kv, NUM_BUF_KV)
                            tlx.barrier_wait(kv_fulls[slot], phase)
                            s_ = tlx.async_dot(q_c, tlx.local_trans(k_tiles[slot]))
                            dp = tlx.async_dot(do_c, tlx.local_trans(v_tiles[slot]))
                            s_ = tlx.async_dot_wait(1, s_)
                            p = tl.math.exp2(s_ * qk_scale - lse2[:, None])
                            start_n = lo + j * BLOCK_N
                            cols = tl.arange(0, BLOCK_N)[None, :]
                            rel = (rows - start_n)[:, None]      # query position - block start
                            vis = cols < klen - start_n
                            if CAUSAL:
                                vis = vis & (cols <= rel)
                            if HAS_WINDOW:
                                vis = vis & (cols >= rel - window) & (cols <= rel + window)
                            p = tl.where(vis, p, 0.0)
                            dp = tlx.async_dot_wait(0, dp)
                            ds = p * (dp - delta[:, None])
                            dq = tlx.async_dot(ds.to(dtype), k_tiles[slot], dq)
                            dq = tlx.async_dot_wait(0, dq)
                            tlx.barrier_arrive(kv_empties[slot], 1)
                            cnt_kv += 1
                        tlx.barrier_arrive(q_empties[cid], 1)
                        cnt_q += 1
                    if not BROADCAST_Q:
                        ok = rows < qlen
                        offs = ((q_row0 + rows).to(tl.int64)[:, None] * (H * HEAD_DIM)
                                + h * HEAD_DIM + offs_d[None, :])
                        tl.store(dq_ptr + offs, (dq * sm_scale).to(dtype), mask=ok[:, None])
                    elif not RESIDENT:
                        ok = rows < qlen
                        offs = rows.to(tl.int64)[:, None] * (H * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
                        tl.atomic_add(dq_acc_ptr + offs, dq * sm_scale, mask=ok[:, None], sem="relaxed")
            if RESIDENT:  # one fp32 partial per CTA: rows of its q-block, summed by _jfa_dq_reduce_kernel
                # The group's Q/dO tiles are free: its last tile's MMAs were waited on, and the
                # producer loads nothing after the last tile.
                stage = dq_stage[cid]
                tlx.local_store(stage, dq * sm_scale)
                tlx.fence("async_shared")
                tlx.async_descriptor_store(desc_part, stage, [pid * BLOCK_M + cid * BM_SPLIT, 0])
                tlx.async_descriptor_store_wait(0)


@triton.jit
def _jfa_dq_reduce_kernel(part_ptr, dq_ptr, q_len, H, ctas_per_pair, HEAD_DIM: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, NUM_STAGES: tl.constexpr):
    """dq[i, h] = sum over the CTAs of pair (h, q-block of i) of their partials, in CTA order.

    Each program sums BLOCK_R rows, its loads software-pipelined NUM_STAGES deep (cp.async through
    shared memory): with one load in flight per program, 8 programs of 64 rows were latency-bound
    on PMA q128 (0.03 ms in run 22's profiles). The adds stay in CTA order."""
    pair = tl.program_id(1)            # = mb * H + h, the resident pair index
    h = pair % H
    mb = pair // H
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)   # row within the q-block
    ok = (r < BLOCK_M) & (mb * BLOCK_M + r < q_len)
    offs_d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([BLOCK_R, HEAD_DIM], dtype=tl.float32)
    for c in tl.range(0, ctas_per_pair, num_stages=NUM_STAGES):
        cta = pair * ctas_per_pair + c
        p = part_ptr + (cta * BLOCK_M + r).to(tl.int64)[:, None] * HEAD_DIM + offs_d[None, :]
        acc += tl.load(p, mask=ok[:, None], other=0.0)
    out = dq_ptr + (mb * BLOCK_M + r).to(tl.int64)[:, None] * (H * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
    tl.store(out, acc.to(dq_ptr.dtype.element_ty), mask=ok[:, None])
