"""TLX Hopper (sm_90) jagged flash-attention backward: the pipelined dK/dV pass.

Same contract, tiling and outputs as `tlx_hopper_bwd.jfa_bwd_dkdv_kernel` (the "serial" pass, kept
for the A/B): a tile is (batch b, KV head hk, KV block of 128 rows), consumer warpgroup c owns KV
rows 64c..64c+63 and keeps their dK, dV in fp32 registers while it walks every query step (64 rows)
of every q head of the GQA group that sees the block (`q_block_range`); dK, dV are written once, no
atomics, so the result is bitwise the serial pass's (same products, same accumulation order).
What changes is the schedule of the work:

1. Ping-pong: the two consumer warpgroups issue their wgmma groups in turn (named barriers
   PINGPONG_BAR, PINGPONG_BAR + 1, the forward's helpers). Per query step a warpgroup has two
   groups, {S^T = K Q^T, dP^T = V dO^T} and {dV += P^T dO, dK += dS^T Q}; with the turns the
   tensor cores run one warpgroup's group while the other computes exp2/dS (or its epilogue),
   instead of both warpgroups doing their softmax (and their waits) at the same time.
2. PIPELINE (constexpr; D=64, where the registers allow it): inside a warpgroup, step s's S^T and
   dP^T are issued together with step s-1's dV and dK (one group of four wgmma), and step s's
   softmax runs while dP^T(s), dV(s-1), dK(s-1) execute. Costs the registers of P^T and dS^T of
   step s-1 (bf16 register A operands, live until their wgmma completes) next to S^T, dP^T of
   step s: ~64 more than the serial pass, too many with D=128's 128 accumulator registers.
   Each Q/dO slot is released one step later, so the ring needs NUM_BUF_Q >= 3 to run ahead.
3. Tile info (schedule entry, sequence bounds) is prefetched one/two tiles ahead in every role,
   as in the forward: no dependent global loads at a tile boundary (PMA q128 tiles have 2 steps).

Barrier bookkeeping (why it cannot hang): every role derives the tiles and the step count of a tile
from the same helpers (`tile_at`, `seq_bounds`, `q_block_range`, `_dkdv_step`), so producer and
consumers agree on every mbarrier phase; counters never reset. Both consumers walk the same tiles
with the same step counts, so they execute the same number of ping-pong turns (PIPELINE: G*nsteps+1
per tile; otherwise 2*G*nsteps; 0 for a tile without steps or an invalid one); consumer 1 hands the
first turn to consumer 0 at the start and the last hand-over stays unconsumed at exit, as in the
forward. No turn is ever taken while holding a resource the other warpgroup needs: a warpgroup waits
for its Q/dO slot before it waits for its turn.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_hopper_bwd import LOG2E, _dkdv_probs, _dkdv_step, _row_stats, _store_dkdv
from kernels.tlx_hopper_fwd import PINGPONG_BAR, _bufidx_phase, _pingpong_enter, _pingpong_leave
from kernels.tlx_schedule import n_iterations, q_block_range, seq_bounds, tile_at


@triton.jit
def jfa_bwd_dkdv_pipelined_kernel(
    desc_q, desc_do, desc_k, desc_v,   # TMA: q [rows_q, Hq*D], do [total_out, Hq*D], k/v [total_kv, Hkv*D]
    dk_ptr, dv_ptr, lse_ptr, delta_ptr, q_off, k_off, tile_entry, n_entries,
    sm_scale, window, B, HKV, G, q_len, NUM_NB, total_out,
    HEAD_DIM: tl.constexpr, NUM_BUF_Q: tl.constexpr, CONSUMER_REGS: tl.constexpr,
    CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
    PIPELINE: tl.constexpr,
):
    HALF: tl.constexpr = 64            # KV rows per consumer warpgroup
    BLOCK_N: tl.constexpr = 128        # KV rows per tile (2 consumers)
    BLOCK_MQ: tl.constexpr = 64        # query rows per step
    NUM_BUF_KV: tl.constexpr = 2       # KV tiles in flight
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    HALF_BYTES: tl.constexpr = ELEM * HALF * HEAD_DIM
    STEP_BYTES: tl.constexpr = ELEM * BLOCK_MQ * HEAD_DIM

    # PIPELINE releases a Q/dO slot one step late: with one slot the consumer would wait for a
    # step the producer can only load after that very consumer released the slot (deadlock)
    tl.static_assert(NUM_BUF_Q >= 2 or not PIPELINE)

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    n_tiles = tl.load(n_entries) * HKV
    n_iter = n_iterations(n_tiles, n_prog, B, 1, False)

    # ---- shared memory and barriers -------------------------------------------------------
    k_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2 * NUM_BUF_KV)
    v_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2 * NUM_BUF_KV)
    q_tiles = tlx.local_alloc((BLOCK_MQ, HEAD_DIM), dtype, NUM_BUF_Q)
    do_tiles = tlx.local_alloc((BLOCK_MQ, HEAD_DIM), dtype, NUM_BUF_Q)
    kv_fulls = tlx.alloc_barriers(num_barriers=2 * NUM_BUF_KV, arrive_count=1)
    kv_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=2)
    q_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_Q, arrive_count=1)
    q_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_Q, arrive_count=2)

    with tlx.async_tasks():
        # ---- producer: K/V halves per tile, Q/dO per step -----------------------------------
        with tlx.async_task("default"):
            cnt_kv = 0
            cnt_q = 0
            # tile it+1's entry is loaded one iteration ahead, its bounds at the start of tile it
            valid, b, hk, nb = tile_at(0, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB, 1, False)
            q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q)
            n_valid, n_b, n_hk, n_nb = tile_at(1, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB,
                                               1, False)
            for it in range(0, n_iter):
                nn_valid, nn_b, nn_hk, nn_nb = tile_at(it + 2, pid, n_prog, tile_entry, n_tiles, B,
                                                       HKV, NUM_NB, 1, False)
                n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(
                    n_b, q_off, k_off, q_len, BROADCAST_Q)
                if valid:
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
                            tlx.barrier_wait(q_empties[q_slot], q_phase ^ 1)
                            tlx.barrier_expect_bytes(q_fulls[q_slot], 2 * STEP_BYTES)
                            tlx.async_descriptor_load(desc_q, q_tiles[q_slot],
                                                      [q_row0 + i0, h * HEAD_DIM], q_fulls[q_slot])
                            tlx.async_descriptor_load(desc_do, do_tiles[q_slot],
                                                      [out_row0 + i0, h * HEAD_DIM], q_fulls[q_slot])
                            cnt_q += 1
                valid, b, hk, nb = n_valid, n_b, n_hk, n_nb
                q_row0, out_row0, qlen, kv_row0, klen = n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen
                n_valid, n_b, n_hk, n_nb = nn_valid, nn_b, nn_hk, nn_nb

        # ---- consumers: dK, dV of 64 KV rows each, in ping-pong ------------------------------
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=2):
            cid: tl.constexpr = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            cnt_kv = 0
            cnt_q = 0
            if cid == 1:
                tlx.named_barrier_arrive(PINGPONG_BAR, 256)  # consumer 0 takes the first turn
            valid, b, hk, nb = tile_at(0, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB, 1, False)
            q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q)
            n_valid, n_b, n_hk, n_nb = tile_at(1, pid, n_prog, tile_entry, n_tiles, B, HKV, NUM_NB,
                                               1, False)
            for it in range(0, n_iter):
                nn_valid, nn_b, nn_hk, nn_nb = tile_at(it + 2, pid, n_prog, tile_entry, n_tiles, B,
                                                       HKV, NUM_NB, 1, False)
                n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(
                    n_b, q_off, k_off, q_len, BROADCAST_Q)
                if valid:
                    n0 = nb * BLOCK_N
                    qlo, nsteps = q_block_range(n0, klen, qlen, window, CAUSAL, HAS_WINDOW,
                                                BLOCK_N, BLOCK_MQ)
                    kv_pos = n0 + cid * HALF + tl.arange(0, HALF)   # this warpgroup's key rows
                    dk = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
                    dv = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
                    if nsteps > 0:
                        n_s = G * nsteps
                        slot, phase = _bufidx_phase(cnt_kv, NUM_BUF_KV)
                        tlx.barrier_wait(kv_fulls[2 * slot + cid], phase)
                        k_c = k_tiles[2 * slot + cid]
                        v_c = v_tiles[2 * slot + cid]
                        if PIPELINE:
                            # step 0: S^T, dP^T alone (nothing to overlap with yet)
                            h, i0 = _dkdv_step(0, hk, G, qlo, nsteps, BLOCK_MQ)
                            lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out, out_row0,
                                                     i0 + tl.arange(0, BLOCK_MQ), qlen)
                            q_slot, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
                            tlx.barrier_wait(q_fulls[q_slot], q_phase)
                            _pingpong_enter(cid, 2)
                            st = tlx.async_dot(k_c, tlx.local_trans(q_tiles[q_slot]))
                            dpt = tlx.async_dot(v_c, tlx.local_trans(do_tiles[q_slot]))
                            _pingpong_leave(cid, 2)
                            st = tlx.async_dot_wait(1, st)
                            pt = _dkdv_probs(st, lse2, kv_pos, i0, window, qk_scale, CAUSAL,
                                             HAS_WINDOW, BLOCK_MQ)
                            dpt = tlx.async_dot_wait(0, dpt)
                            dst = pt * (dpt - delta[None, :])
                            p_prev = pt.to(dtype)
                            ds_prev = dst.to(dtype)
                            # steady state: S^T(s), dP^T(s), dV(s-1), dK(s-1) in one turn
                            for s in range(1, n_s):
                                prev = cnt_q % NUM_BUF_Q           # Q/dO slot of step s-1
                                cnt_q += 1
                                h, i0 = _dkdv_step(s, hk, G, qlo, nsteps, BLOCK_MQ)
                                lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out,
                                                         out_row0, i0 + tl.arange(0, BLOCK_MQ),
                                                         qlen)
                                q_slot, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
                                tlx.barrier_wait(q_fulls[q_slot], q_phase)
                                _pingpong_enter(cid, 2)
                                st = tlx.async_dot(k_c, tlx.local_trans(q_tiles[q_slot]))
                                dpt = tlx.async_dot(v_c, tlx.local_trans(do_tiles[q_slot]))
                                dv = tlx.async_dot(p_prev, do_tiles[prev], dv)
                                dk = tlx.async_dot(ds_prev, q_tiles[prev], dk)
                                _pingpong_leave(cid, 2)
                                st = tlx.async_dot_wait(3, st)
                                pt = _dkdv_probs(st, lse2, kv_pos, i0, window, qk_scale, CAUSAL,
                                                 HAS_WINDOW, BLOCK_MQ)
                                dpt = tlx.async_dot_wait(2, dpt)
                                dst = pt * (dpt - delta[None, :])
                                p_new = pt.to(dtype)
                                ds_new = dst.to(dtype)
                                dk = tlx.async_dot_wait(0, dk)   # dV(s-1), dK(s-1) done
                                dv = tlx.async_dot_wait(0, dv)
                                tlx.barrier_arrive(q_empties[prev], 1)
                                p_prev = p_new
                                ds_prev = ds_new
                            # last step's dV, dK
                            last = cnt_q % NUM_BUF_Q
                            _pingpong_enter(cid, 2)
                            dv = tlx.async_dot(p_prev, do_tiles[last], dv)
                            dk = tlx.async_dot(ds_prev, q_tiles[last], dk)
                            _pingpong_leave(cid, 2)
                            dk = tlx.async_dot_wait(0, dk)
                            dv = tlx.async_dot_wait(0, dv)
                            tlx.barrier_arrive(q_empties[last], 1)
                            cnt_q += 1
                        else:
                            for s in range(0, n_s):
                                h, i0 = _dkdv_step(s, hk, G, qlo, nsteps, BLOCK_MQ)
                                lse2, delta = _row_stats(lse_ptr, delta_ptr, h, total_out,
                                                         out_row0, i0 + tl.arange(0, BLOCK_MQ),
                                                         qlen)
                                q_slot, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
                                tlx.barrier_wait(q_fulls[q_slot], q_phase)
                                _pingpong_enter(cid, 2)
                                st = tlx.async_dot(k_c, tlx.local_trans(q_tiles[q_slot]))
                                dpt = tlx.async_dot(v_c, tlx.local_trans(do_tiles[q_slot]))
                                _pingpong_leave(cid, 2)
                                st = tlx.async_dot_wait(1, st)
                                pt = _dkdv_probs(st, lse2, kv_pos, i0, window, qk_scale, CAUSAL,
                                                 HAS_WINDOW, BLOCK_MQ)
                                dpt = tlx.async_dot_wait(0, dpt)
                                dst = pt * (dpt - delta[None, :])
                                _pingpong_enter(cid, 2)
                                dv = tlx.async_dot(pt.to(dtype), do_tiles[q_slot], dv)
                                dk = tlx.async_dot(dst.to(dtype), q_tiles[q_slot], dk)
                                _pingpong_leave(cid, 2)
                                dk = tlx.async_dot_wait(0, dk)
                                dv = tlx.async_dot_wait(0, dv)
                                tlx.barrier_arrive(q_empties[q_slot], 1)
                                cnt_q += 1
                        tlx.barrier_arrive(kv_empties[slot], 1)
                        cnt_kv += 1
                    _store_dkdv(dk_ptr, dv_ptr, dk, dv, kv_pos, klen, kv_row0, hk, HKV, sm_scale,
                                HEAD_DIM)
                valid, b, hk, nb = n_valid, n_b, n_hk, n_nb
                q_row0, out_row0, qlen, kv_row0, klen = n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen
                n_valid, n_b, n_hk, n_nb = nn_valid, nn_b, nn_hk, nn_nb
