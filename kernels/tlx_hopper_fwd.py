"""TLX warp-specialised jagged flash-attention forward for Hopper (sm_90).

One persistent CTA per SM walks the device-built schedule of `tlx_schedule` (tiles = batch, q-head,
q-block of NUM_GROUPS*64 query rows). Warp roles:

- producer (the default warpgroup): TMA loads of the Q tile (one 64-row slice per consumer, skipped
  while the tile's Q is already resident) and of the K/V blocks into NUM_BUF_KV-deep shared-memory
  rings, each slot guarded by a full/empty mbarrier pair.
- NUM_GROUPS consumer warpgroups (2 or 3), 64 query rows each, in ping-pong: the QK^T wgmma of the
  groups is issued in turn (named barriers 9, 10, 11 in a ring) so that one group's softmax overlaps
  the other's tensor-core work. Online softmax in registers (base-2, scale folded in), the PV wgmma
  of block j-1 overlapped with the QK^T of block j.

Jagged handling (see ../shared/kernels/HOPPER_JFA_PITFALLS.md): TMA boxes read packed
[total, H*D] rows, so rows past a sequence's end are the neighbour's; scores past klen (and outside
the causal/window band) are masked to -inf before the row max, with the row max guarded so fully
masked rows give p = 0 instead of NaN; O/LSE rows past qlen are never stored.

Epilogue (TMA_STORE_O): a group whose 64 rows all lie inside the sequence writes its O slice with
a TMA store. Self/cross attention stage it in the group's own Q tile (free after the tile's last
QK^T); the Q slot goes back to the producer only after the next tile's first QK^T, once the store
has read it. Broadcast Q stays resident across tiles, so each group stages O in a tile of its own,
reused once the previous tile's store has read it (`fwd_config`: at D=128). A TMA box cannot
stop at qlen, so the slice that straddles it, and LSE, take a masked tl.store; broadcast Q with
q_len a multiple of 64 has no such slice (O_TMA_ONLY: every O slice by TMA, zeros too).
SPLIT_TILES (`FwdConfig.split_tiles`; broadcast Q, resident, q_len = NUM_GROUPS*64, no mask): each
consumer warpgroup owns whole tiles, all NUM_GROUPS*64 rows of its batch elements (group c takes the
CTA's tiles it with it % NUM_GROUPS == c), instead of every group taking its 64 rows of each tile in
ping-pong. Short key sequences leave a ping-pong tile a few blocks between epilogues, and the two
groups wait for each other at every block; split, two tiles are in flight per CTA and a group's
softmax overlaps the other's wgmmas without a rendezvous. Q is one resident [NUM_GROUPS*64, D] tile
read by both groups; the producer loads K/V in tile order into the one ring, and a group waits for
and releases the other group's blocks unread.
SHIFT_TAIL (`FwdConfig.shift_tail`; broadcast Q without a causal/window mask) loads a sequence's
partial last K/V block ending at its last key (its first rows are the previous block's, masked)
instead of reading the next sequence's rows (`fwd_config`'s choice at D = 128: run 47).
KV blocks per tile come from `kv_block_range`, shared by every role; the blocks outside
`kv_unmasked_range` (block 0 included, unless every real row sees all its keys) run the masked
softmax, the rest without any mask.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_schedule import (kv_block_range, kv_unmasked_range, n_iterations, seq_bounds,
                                  tile_at, wait_for_previous_kernel)
from kernels.tlx_timeline import (ENTRY, GROUP_END, READY, mark, mark_epilogue, mark_ring_turn,
                                  mark_sm, mark_tile, now, store_stamp)

BM_SPLIT = tl.constexpr(64)  # query rows per consumer group of a ping-pong tile (wgmma M)
PINGPONG_BAR = tl.constexpr(9)  # named barriers PINGPONG_BAR + c, c < NUM_GROUPS
O_STAGE_BAR = tl.constexpr(12)  # broadcast TMA_STORE_O: group c's O tile is free (O_STAGE_BAR + c)


# LAZY_RESCALE: a row's running max moves only when a block raises it by more than this (base-2
# score units), so p = exp2(s - m) <= 2^8 (exact in fp32, and bf16/fp16 keep their relative
# precision there); between moves alpha == 1 and a thread whose rows all have alpha == 1 branches
# over the accumulator's rescale (FlashAttention-4's trick; Triton has no warp-uniform branch on
# a tensor, so the branch is PTX)
RESCALE_SLACK = tl.constexpr(8.0)


def _rescale_asm(n: int) -> tuple[str, str]:
    """PTX for `_rescale_lazily` over one thread's n accumulator elements: outputs $0..$n-1 (tied to
    the inputs $n..$2n-1), their row factors $2n..$3n-1 and the thread's flag (all n equal) from
    $3n. The label takes LLVM's per-asm-instance ${:uid}."""
    muls = "\n".join(f"mul.f32 ${i}, ${i}, ${2 * n + i};" for i in range(n))
    asm = ("{\n.reg .pred %skip;\n"
           f"setp.eq.s32 %skip, ${3 * n}, 0;\n"
           "@%skip bra jfa_rescale_done_${:uid};\n"
           f"{muls}\n"
           "jfa_rescale_done_${:uid}:\n}")
    constraints = ",".join(["=f"] * n + [str(i) for i in range(n)] + ["f"] * n + ["r"] * n)
    return asm, constraints


# one thread holds HEAD_DIM / 2 of a 64-row fp32 accumulator (wgmma m64, 128 threads)
RESCALE_ASM_D64, RESCALE_CONSTRAINTS_D64 = (tl.constexpr(x) for x in _rescale_asm(32))
RESCALE_ASM_D128, RESCALE_CONSTRAINTS_D128 = (tl.constexpr(x) for x in _rescale_asm(64))
# 1 in both outputs when either of the thread's two rows (wgmma m64: rows r and r + 8) has
# alpha != 1; the GPU tests that let single rows' maxima move late check this grouping
ROWS_MOVED_ASM = tl.constexpr(
    "{ .reg .pred %a, %b; setp.neu.f32 %a, $2, 0f3F800000; setp.neu.f32 %b, $3, 0f3F800000; "
    "or.pred %a, %a, %b; selp.s32 $0, 1, 0, %a; mov.b32 $1, $0; }")


@triton.jit
def _rescale_lazily(acc, alpha):
    """acc * alpha[:, None], skipped by a thread whose rows all kept their max (alpha == 1): with
    LAZY_RESCALE most blocks after the first, so a warp seldom executes the HEAD_DIM / 2 FMULs."""
    moved = tl.inline_asm_elementwise(ROWS_MOVED_ASM, "=r,=r,f,f", [alpha], dtype=tl.int32,
                                      is_pure=True, pack=2)
    alpha2 = tl.broadcast_to(alpha[:, None], acc.shape)
    moved2 = tl.broadcast_to(moved[:, None], acc.shape)
    tl.static_assert(acc.shape[1] == 64 or acc.shape[1] == 128)
    d128: tl.constexpr = acc.shape[1] == 128
    return tl.inline_asm_elementwise(RESCALE_ASM_D128 if d128 else RESCALE_ASM_D64,
                                     RESCALE_CONSTRAINTS_D128 if d128 else RESCALE_CONSTRAINTS_D64,
                                     [acc, alpha2, moved2], dtype=tl.float32, is_pure=True,
                                     pack=acc.shape[1] // 2)


@triton.jit
def _bufidx_phase(cnt, NUM_BUF: tl.constexpr):
    return cnt % NUM_BUF, (cnt // NUM_BUF) & 1


@triton.jit
def _pingpong_enter(cid: tl.constexpr, NUM_GROUPS: tl.constexpr):
    tlx.named_barrier_wait(PINGPONG_BAR + cid, 256)


@triton.jit
def _pingpong_leave(cid: tl.constexpr, NUM_GROUPS: tl.constexpr):
    tlx.named_barrier_arrive(PINGPONG_BAR + (cid + 1) % NUM_GROUPS, 256)


@triton.jit
def _mask_block(qk, rows, start_n, klen, window, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                BLOCK_N: tl.constexpr, col_lo, SHIFT_TAIL: tl.constexpr):
    """qk with its invisible scores at -inf: keys past klen (SHIFT_TAIL: the columns below col_lo,
    which repeat the previous block's keys), and the causal / window bounds."""
    # compare block-local columns with per-row thresholds: nothing 2-D is loop invariant, so the
    # compiler cannot hoist (and spill) a [rows, cols] mask out of the KV loop
    cols = tl.arange(0, BLOCK_N)[None, :]
    if SHIFT_TAIL:
        vis = cols >= col_lo
    else:
        vis = cols < klen - start_n
    rel = (rows - start_n)[:, None]  # query position relative to the block start
    if CAUSAL:
        vis = vis & (cols <= rel)
    if HAS_WINDOW:
        vis = vis & (cols >= rel - window) & (cols <= rel + window)
    return tl.where(vis, qk, float("-inf"))


@triton.jit
def _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window, CAUSAL: tl.constexpr,
                   HAS_WINDOW: tl.constexpr, MASK: tl.constexpr, BLOCK_N: tl.constexpr,
                   LAZY_RESCALE: tl.constexpr, col_lo=0, SHIFT_TAIL: tl.constexpr = False,
                   TAIL_BRANCH: tl.constexpr = False, FIRST_BRANCH: tl.constexpr = False,
                   first_full=True):
    """Online-softmax update for one score block; returns (p fp32, alpha, m_i, l_i).

    m_i is the running max of the base-2 scaled scores (with LAZY_RESCALE, the max in use: up to
    RESCALE_SLACK below the true one); -inf while a row has seen no visible key. MASK: the block
    masked (`_mask_block`) at compile time; FIRST_BRANCH (`FwdConfig.first_branch`, a tile's first
    block): the same under a run-time branch taken only where not first_full. SHIFT_TAIL (a
    shifted last block, `_kv_block_start`: it ends at the sequence's last key, no causal/window
    mask): the columns below col_lo repeat the previous block's keys, the only ones masked.
    TAIL_BRANCH (`FwdConfig.tail_branch`, an unmasked bulk block that may be the shifted one):
    that mask under a run-time branch taken only where col_lo > 0.
    """
    if TAIL_BRANCH:  # shift_tail calls have no causal / window mask
        if col_lo > 0:
            qk = _mask_block(qk, rows, start_n, klen, window, False, False, BLOCK_N, col_lo, True)
    if MASK:
        qk = _mask_block(qk, rows, start_n, klen, window, CAUSAL, HAS_WINDOW, BLOCK_N, col_lo,
                         SHIFT_TAIL)
    elif FIRST_BRANCH:
        if not first_full:
            qk = _mask_block(qk, rows, start_n, klen, window, CAUSAL, HAS_WINDOW, BLOCK_N,
                             col_lo, SHIFT_TAIL)
    m_blk = tl.max(qk, 1) * qk_scale
    if LAZY_RESCALE:
        m_new = tl.where(m_blk > m_i + RESCALE_SLACK, m_blk, m_i)
    else:
        m_new = tl.maximum(m_i, m_blk)
    if MASK or FIRST_BRANCH:  # rows may be fully masked so far: p = 0
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    p = tl.math.exp2(qk * qk_scale - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, m_new, l_i


@triton.jit
def _wait_o_tile_read(cid: tl.constexpr):
    """Broadcast TMA_STORE_O: group cid's O tile is free once its previous TMA store read it."""
    tlx.async_descriptor_store_wait(0)  # the issuing thread's store
    tlx.named_barrier_wait(O_STAGE_BAR + cid, 128)  # then all 128 threads know it


@triton.jit
def _tma_store_o(desc_o, o_buf, o, row, col):
    """TMA_STORE_O: O slice o staged in o_buf and stored from there to out[row, col]."""
    tlx.local_store(o_buf, o)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(desc_o, o_buf, [row, col])


@triton.jit
def _release_staged_q_slot(q_empties, release, held_o):
    """TMA_STORE_O: give the previous tile's Q slot (release >= 0) back to the producer once the
    TMA store of the O slice staged in it (held_o) has read it."""
    if release >= 0:
        if held_o != 0:
            tlx.async_descriptor_store_wait(0)
        tlx.barrier_arrive(q_empties[release], 1)


@triton.jit
def _rescale(acc, alpha, LAZY_RESCALE: tl.constexpr):
    """acc * alpha[:, None] (LAZY_RESCALE: skipped by threads whose rows kept their max)."""
    if LAZY_RESCALE:
        acc = _rescale_lazily(acc, alpha)
    else:
        acc = acc * alpha[:, None]
    return acc


@triton.jit
def _issue_qk(q_buf, k_tiles, k_fulls, cnt, cid: tl.constexpr, NUM_GROUPS: tl.constexpr,
              NUM_BUF_KV: tl.constexpr, PINGPONG: tl.constexpr, timeline, timeline_stride,
              TIMELINE: tl.constexpr):
    """(QK^T in flight, its K slot) of K/V ring turn cnt, issued once K landed (PINGPONG: in this
    group's turn)."""
    k_idx, k_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    tlx.barrier_wait(k_fulls[k_idx], k_phase)
    if TIMELINE:
        mark_ring_turn(timeline, timeline_stride, cnt, 1 + cid)
    if PINGPONG:
        _pingpong_enter(cid, NUM_GROUPS)
    qk = tlx.async_dot(q_buf, tlx.local_trans(k_tiles[k_idx]))
    if PINGPONG:
        _pingpong_leave(cid, NUM_GROUPS)
    return qk, k_idx


@triton.jit
def _consume_kv_block(q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc, p,
                      m_i, l_i, cnt, start_n, rows, klen, window, qk_scale,
                      cid: tl.constexpr, NUM_GROUPS: tl.constexpr, NUM_BUF_KV: tl.constexpr,
                      CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASK: tl.constexpr,
                      BLOCK_N: tl.constexpr, LATE_P_CAST: tl.constexpr,
                      LAZY_RESCALE: tl.constexpr, dtype: tl.constexpr, PINGPONG: tl.constexpr,
                      timeline, timeline_stride, TIMELINE: tl.constexpr, col_lo=0,
                      SHIFT_TAIL: tl.constexpr = False, TAIL_BRANCH: tl.constexpr = False):
    """Steady state: QK^T of block cnt overlapped with PV of block cnt-1 (p holds its probs: in
    the MMA dtype, or fp32 with LATE_P_CAST, cast only once this block's QK^T is issued, so the
    cast runs beside the tensor core instead of before the issue, as the TLX tutorial does).
    Returns (acc, p, m_i, l_i, cnt + 1). The PV is waited for within the step: an accumulator in
    flight across a loop iteration makes ptxas serialise every wgmma (C7514, session 40), and
    unrolled chains that wait later (`pv_chain`, run 42) were slower."""
    qk, k_idx = _issue_qk(q_buf, k_tiles, k_fulls, cnt, cid, NUM_GROUPS, NUM_BUF_KV, PINGPONG,
                          timeline, timeline_stride, TIMELINE)
    if LATE_P_CAST:
        p = p.to(dtype)
    v_idx, v_phase = _bufidx_phase(cnt - 1, NUM_BUF_KV)
    tlx.barrier_wait(v_fulls[v_idx], v_phase)
    acc = tlx.async_dot(p, v_tiles[v_idx], acc)
    qk = tlx.async_dot_wait(1, qk)
    tlx.barrier_arrive(k_empties[k_idx], 1)
    p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window,
                                        CAUSAL, HAS_WINDOW, MASK, BLOCK_N, LAZY_RESCALE, col_lo,
                                        SHIFT_TAIL, TAIL_BRANCH)
    acc = tlx.async_dot_wait(0, acc)  # PV done: V slot free, acc safe to rescale
    tlx.barrier_arrive(v_empties[v_idx], 1)
    acc = _rescale(acc, alpha, LAZY_RESCALE)
    if not LATE_P_CAST:
        p = p.to(dtype)
    return acc, p, m_i, l_i, cnt + 1


@triton.jit
def _pass_kv_blocks(k_fulls, k_empties, v_fulls, v_empties, cnt, nblk, cid: tl.constexpr,
                    NUM_GROUPS: tl.constexpr, NUM_BUF_KV: tl.constexpr, PINGPONG: tl.constexpr,
                    timeline, timeline_stride, TIMELINE: tl.constexpr):
    """K/V blocks cnt .. cnt+nblk-1 passed without math: each waited for (so the next wait on its
    slot cannot see this load's phase as an older one) and released; with PINGPONG the group keeps
    its turns with the others. Returns cnt + nblk."""
    for j in range(0, nblk):
        kv_idx, kv_phase = _bufidx_phase(cnt, NUM_BUF_KV)
        tlx.barrier_wait(k_fulls[kv_idx], kv_phase)
        if TIMELINE:
            mark_ring_turn(timeline, timeline_stride, cnt, 1 + cid)
        if PINGPONG:
            _pingpong_enter(cid, NUM_GROUPS)
            _pingpong_leave(cid, NUM_GROUPS)
        tlx.barrier_arrive(k_empties[kv_idx], 1)
        tlx.barrier_wait(v_fulls[kv_idx], kv_phase)  # this block's V
        tlx.barrier_arrive(v_empties[kv_idx], 1)
        cnt += 1
    return cnt


@triton.jit
def _first_block(q_buf, k_tiles, k_fulls, k_empties, cnt, first_full, start_n, rows, klen, window,
                 qk_scale, cid: tl.constexpr, NUM_GROUPS: tl.constexpr,
                 NUM_BUF_KV: tl.constexpr, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                 BLOCK_N: tl.constexpr, LAZY_RESCALE: tl.constexpr, ROWS: tl.constexpr,
                 PINGPONG: tl.constexpr, timeline, timeline_stride, TIMELINE: tl.constexpr,
                 FIRST_BRANCH: tl.constexpr = False):
    """A tile's first block (ROWS query rows): the QK^T of K/V block cnt and its softmax from an
    empty row state, no PV yet; returns (p fp32, m_i, l_i). FIRST_BRANCH: one softmax whose mask
    sits under the run-time branch, instead of a masked and an unmasked copy."""
    m_i = tl.zeros([ROWS], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    qk, k_idx = _issue_qk(q_buf, k_tiles, k_fulls, cnt, cid, NUM_GROUPS, NUM_BUF_KV, PINGPONG,
                          timeline, timeline_stride, TIMELINE)
    qk = tlx.async_dot_wait(0, qk)
    tlx.barrier_arrive(k_empties[k_idx], 1)
    # a runtime branch: the mask costs ~100 instructions per consumer and tile (sm_90 SASS), the
    # per-tile code where ours outgrew the tutorial's
    if FIRST_BRANCH:
        p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window,
                                            CAUSAL, HAS_WINDOW, False, BLOCK_N, LAZY_RESCALE,
                                            FIRST_BRANCH=True, first_full=first_full)
    elif first_full:  # every real row sees all its keys: the mask is a no-op
        p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window,
                                            CAUSAL, HAS_WINDOW, False, BLOCK_N, LAZY_RESCALE)
    else:
        p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window,
                                            CAUSAL, HAS_WINDOW, True, BLOCK_N, LAZY_RESCALE)
    return p, m_i, l_i


@triton.jit
def _consume_kv_blocks(j0, j1, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                       acc, p, m_i, l_i, cnt, lo, rows, klen, window, qk_scale,
                       cid: tl.constexpr, NUM_GROUPS: tl.constexpr, NUM_BUF_KV: tl.constexpr,
                       CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASK: tl.constexpr,
                       BLOCK_N: tl.constexpr, LATE_P_CAST: tl.constexpr,
                       LAZY_RESCALE: tl.constexpr, dtype: tl.constexpr, PINGPONG: tl.constexpr,
                       SHIFT_TAIL: tl.constexpr, timeline, timeline_stride,
                       TIMELINE: tl.constexpr, TAIL_BRANCH: tl.constexpr = False):
    """A tile's K/V blocks j0 .. j1 - 1 (`_consume_kv_block` each) as one of its peeled loops:
    MASK a compile-time choice per loop, so the unmasked bulk compiles without any mask.
    SHIFT_TAIL: the blocks start where the producer loads them (`_kv_block_start`), their columns
    below the first key not yet seen masked (with MASK, or TAIL_BRANCH: under a run-time branch
    in an unmasked loop). Returns (acc, p, m_i, l_i, cnt)."""
    for j in range(j0, j1):
        start_n = _kv_block_start(lo, j, klen, BLOCK_N, SHIFT_TAIL)
        acc, p, m_i, l_i, cnt = _consume_kv_block(
            q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc, p, m_i, l_i,
            cnt, start_n, rows, klen, window, qk_scale, cid, NUM_GROUPS, NUM_BUF_KV, CAUSAL,
            HAS_WINDOW, MASK, BLOCK_N, LATE_P_CAST, LAZY_RESCALE, dtype, PINGPONG, timeline,
            timeline_stride, TIMELINE, lo + j * BLOCK_N - start_n, SHIFT_TAIL, TAIL_BRANCH)
    return acc, p, m_i, l_i, cnt


@triton.jit
def _finish_last_pv(p, acc, v_tiles, v_fulls, v_empties, cnt, NUM_BUF_KV: tl.constexpr,
                    dtype: tl.constexpr):
    """A tile's epilogue PV: p over K/V block cnt's V into acc, waited; the V slot goes back."""
    v_idx, v_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    tlx.barrier_wait(v_fulls[v_idx], v_phase)
    acc = tlx.async_dot(p.to(dtype), v_tiles[v_idx], acc)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empties[v_idx], 1)
    return acc


@triton.jit
def _kv_block_start(lo, j, klen, BLOCK_N: tl.constexpr, SHIFT_TAIL: tl.constexpr):
    """Key position of a tile's K/V block j (blocks from lo on). SHIFT_TAIL (broadcast Q, no
    causal/window mask, so lo == 0): a partial last block of a sequence with BLOCK_N keys or more
    ends at its last key instead of reading the next sequence's rows; its first rows repeat the
    previous block's, just read by this CTA (an L2 hit), and are masked (`_softmax_block`)."""
    if SHIFT_TAIL:
        return tl.minimum(lo + j * BLOCK_N, tl.maximum(klen - BLOCK_N, 0))
    else:
        return lo + j * BLOCK_N


@triton.jit
def _load_kv_block(desc_k, desc_v, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, cnt,
                   row, col, NUM_BUF_KV: tl.constexpr, KV_BYTES: tl.constexpr, timeline,
                   timeline_stride, TIMELINE: tl.constexpr):
    """The producer's turn cnt of the K/V ring: K and V rows row.. at column col, each into its
    slot once the consumers gave it back."""
    kv_idx, kv_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    _load_ring_slot(desc_k, k_tiles, k_fulls, k_empties, kv_idx, kv_phase, row, col, KV_BYTES)
    if TIMELINE:
        mark_ring_turn(timeline, timeline_stride, cnt, 0)
    _load_ring_slot(desc_v, v_tiles, v_fulls, v_empties, kv_idx, kv_phase, row, col, KV_BYTES)


@triton.jit
def _load_ring_slot(desc, tiles, fulls, empties, idx, phase, row, col, KV_BYTES: tl.constexpr):
    """One tensor's (K's or V's) part of `_load_kv_block`: its slot idx once free, the rows loaded
    under the slot's full barrier."""
    tlx.barrier_wait(empties[idx], phase ^ 1)
    tlx.barrier_expect_bytes(fulls[idx], KV_BYTES)
    tlx.async_descriptor_load(desc, tiles[idx], [row, col], fulls[idx])


@triton.jit
def _produce_tile(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties, k_fulls,
                  k_empties, v_fulls, v_empties, cnt_kv, cnt_q, last_q, h, mb, q_row0, qlen,
                  kv_row0, klen, window, H, G, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr,
                  TILE_GROUPS: tl.constexpr, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                  Q_BYTES: tl.constexpr, KV_BYTES: tl.constexpr, SHIFT_TAIL: tl.constexpr,
                  timeline, timeline_stride, TIMELINE: tl.constexpr):
    """The producer's loads of one tile: its Q slices (once per q-block while it stays resident),
    then its K/V blocks. Returns (cnt_kv, cnt_q, last_q)."""
    m0 = mb * BLOCK_M
    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW, BLOCK_M, BLOCK_N)
    if nblk > 0:
        q_key = (q_row0 + m0) * H + h
        if q_key != last_q:
            q_idx, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
            for g in tl.static_range(TILE_GROUPS):
                slot = g * NUM_BUF_Q + q_idx
                tlx.barrier_wait(q_empties[slot], q_phase ^ 1)
                tlx.barrier_expect_bytes(q_fulls[slot], Q_BYTES)
                tlx.async_descriptor_load(desc_q, q_tiles[slot],
                                          [q_row0 + m0 + g * BM_SPLIT, h * HEAD_DIM], q_fulls[slot])
            cnt_q += 1
            last_q = q_key
        kv_col = (h // G) * HEAD_DIM
        for j in range(0, nblk):
            _load_kv_block(desc_k, desc_v, k_tiles, v_tiles, k_fulls, k_empties, v_fulls,
                           v_empties, cnt_kv,
                           kv_row0 + _kv_block_start(lo, j, klen, BLOCK_N, SHIFT_TAIL), kv_col,
                           NUM_BUF_KV, KV_BYTES, timeline, timeline_stride, TIMELINE)
            cnt_kv += 1
    return cnt_kv, cnt_q, last_q


@triton.jit
def _tile_order(it, SWAP_PAIRS: tl.constexpr):
    """The position in the CTA's tile list of its it-th tile: it, or with SWAP_PAIRS (FwdConfig.
    swap_pairs) every second pair swapped, 0, 1, 3, 2, 4, 5, 7, 6, ... Positions 0 and 1 stay, so
    the prologues' tile_at(0) / tile_at(1) need no call of this."""
    if SWAP_PAIRS:
        it = it ^ ((it >> 1) & 1)
    return it


@triton.jit
def _produce_in_tile_order(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties,
                           k_fulls, k_empties, v_fulls, v_empties, n_iter, pid, n_prog,
                           tile_entry, n_tiles, B, H, G, NUM_MB, ctas_per_pair, tile_window, q_off,
                           k_off, q_len, window, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, NUM_BUF_Q: tl.constexpr,
                           NUM_BUF_KV: tl.constexpr, TILE_GROUPS: tl.constexpr,
                           CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                           BROADCAST_Q: tl.constexpr, RESIDENT: tl.constexpr,
                           Q_BYTES: tl.constexpr, KV_BYTES: tl.constexpr,
                           SHIFT_TAIL: tl.constexpr, SWAP_PAIRS: tl.constexpr, timeline,
                           timeline_stride, TIMELINE: tl.constexpr):
    """The producer over the static schedule: the CTA's tiles in order (`tile_at`, `_tile_order`)."""
    cnt_kv = 0
    cnt_q = 0
    last_q = -1
    # tile info is prefetched: tile it+1's entry one iteration ahead, its bounds at the start of
    # tile it, so no global-load latency sits at a tile boundary
    valid, b, h, mb = tile_at(0, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB, ctas_per_pair,
                              tile_window, RESIDENT)
    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q)
    n_valid, n_b, n_h, n_mb = tile_at(1, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                      ctas_per_pair, tile_window, RESIDENT)
    for it in range(0, n_iter):
        nn_valid, nn_b, nn_h, nn_mb = tile_at(_tile_order(it + 2, SWAP_PAIRS), pid, n_prog,
                                              tile_entry, n_tiles, B, H, NUM_MB, ctas_per_pair,
                                              tile_window, RESIDENT)
        n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(n_b, q_off, k_off, q_len,
                                                                     BROADCAST_Q)
        if valid:
            cnt_kv, cnt_q, last_q = _produce_tile(
                desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties, k_fulls,
                k_empties, v_fulls, v_empties, cnt_kv, cnt_q, last_q, h, mb, q_row0, qlen, kv_row0,
                klen, window, H, G, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, TILE_GROUPS,
                CAUSAL, HAS_WINDOW, Q_BYTES, KV_BYTES, SHIFT_TAIL, timeline, timeline_stride,
                TIMELINE)
        valid, b, h, mb = n_valid, n_b, n_h, n_mb
        q_row0, out_row0, qlen, kv_row0, klen = n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen
        n_valid, n_b, n_h, n_mb = nn_valid, nn_b, nn_h, nn_mb


@triton.jit
def _mufu(x, ASM: tl.constexpr):
    """One fp32 MUFU approximation per element (FAST_EPILOGUE's rcp / lg2)."""
    return tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _normalise(acc, m_i, l_i, RCP_NORMALISE: tl.constexpr, FAST_EPILOGUE: tl.constexpr,
               dtype: tl.constexpr):
    """(O in the MMA dtype, LSE) of a finished tile; rows that saw no visible key keep O = 0 and
    LSE = -inf. A row with a visible key has l_i >= 1 (its largest p is exp2(0), or up to 2^8 with
    the lazy rescale), so FAST_EPILOGUE's flush-to-zero approximations never see a denormal."""
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    if FAST_EPILOGUE:  # rcp.approx (1 ulp) and lg2.approx (2^-22): one MUFU each per row
        o = (acc * _mufu(l_safe, "rcp.approx.ftz.f32 $0, $1;")[:, None]).to(dtype)
        log2_l = _mufu(l_safe, "lg2.approx.ftz.f32 $0, $1;")
    else:
        if RCP_NORMALISE:  # one reciprocal per row, not a division per element
            o = (acc * (1.0 / l_safe)[:, None]).to(dtype)
        else:
            o = (acc / l_safe[:, None]).to(dtype)  # cast before the store's relayout
        log2_l = tl.math.log2(l_safe)
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + log2_l) * 0.6931471805599453)
    return o, lse


# FAST_EPILOGUE: LSE stored from the accumulator's row layout (each row by its quad's four threads,
# one address) instead of tl.store's coalesced layout, which costs a relayout through shared memory
# and two warpgroup barriers per tile
STORE_ROW_ASM = tl.constexpr(
    "{ .reg .pred %p; setp.ne.s32 %p, $3, 0; @%p st.global.f32 [$1], $2; mov.b32 $0, 0; }")


@triton.jit
def _store_o_lse(desc_o, o_tiles, out_ptr, lse_ptr, o, lse, row0, out_row0, h, qlen, total_out,
                 tma_o, cid: tl.constexpr, H, HEAD_DIM: tl.constexpr, TMA_STORE_O: tl.constexpr,
                 BROADCAST_Q: tl.constexpr, O_TMA_ONLY: tl.constexpr, FAST_EPILOGUE: tl.constexpr,
                 ROWS: tl.constexpr):
    """Group cid's O slice, query rows row0 .. row0 + ROWS - 1 (broadcast Q: by TMA from the
    group's staging tile when tma_o; self/cross staged theirs in the Q tile already) and its LSE,
    rows < qlen only: the rows past it belong to the next sequence."""
    if TMA_STORE_O and BROADCAST_Q:
        if tma_o:  # in the group's O tile, once its previous store read it
            _wait_o_tile_read(cid)
            _tma_store_o(desc_o, o_tiles[cid], o, out_row0 + row0, h * HEAD_DIM)
    rows = row0 + tl.arange(0, ROWS)
    row_ok = rows < qlen
    out_rows = (out_row0 + rows).to(tl.int64)
    if not O_TMA_ONLY:
        if not tma_o:
            offs_d = tl.arange(0, HEAD_DIM)
            o_ptrs = out_ptr + out_rows[:, None] * (H * HEAD_DIM) + h * HEAD_DIM + offs_d[None, :]
            tl.store(o_ptrs, o, mask=row_ok[:, None])
    lse_ptrs = lse_ptr + h.to(tl.int64) * total_out + out_rows
    if FAST_EPILOGUE:
        tl.inline_asm_elementwise(STORE_ROW_ASM, "=r,l,f,r",
                                  [lse_ptrs.to(tl.int64), lse, row_ok.to(tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.store(lse_ptrs, lse, mask=row_ok)


@triton.jit
def _consume_tile(q_tiles, k_tiles, v_tiles, o_tiles, q_fulls, q_empties, k_fulls, k_empties,
                  v_fulls, v_empties, desc_o, out_ptr, lse_ptr, timeline, timeline_stride, it, b, h,
                  mb, q_row0, out_row0, qlen, klen, window, qk_scale, H, total_out, cnt_kv, cnt_q,
                  last_q, held_o, cid: tl.constexpr, NUM_GROUPS: tl.constexpr,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr, Q_ROWS: tl.constexpr,
                  ROW_OFF: tl.constexpr, Q_SLOT0: tl.constexpr, CAUSAL: tl.constexpr,
                  HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr, TMA_STORE_O: tl.constexpr,
                  O_IN_Q: tl.constexpr, O_TMA_ONLY: tl.constexpr, SKIP_IDLE_GROUPS: tl.constexpr,
                  LATE_P_CAST: tl.constexpr, LAZY_RESCALE: tl.constexpr,
                  RCP_NORMALISE: tl.constexpr, FAST_EPILOGUE: tl.constexpr,
                  SPLIT_TILES: tl.constexpr, PINGPONG: tl.constexpr, SHIFT_TAIL: tl.constexpr,
                  TAIL_BRANCH: tl.constexpr, FIRST_BRANCH: tl.constexpr, TIMELINE: tl.constexpr,
                  dtype: tl.constexpr):
    """Consumer group cid's part of the CTA's it-th tile (batch element b, head h, q-block mb): its
    rows' QK^T, online softmax, PV and epilogue, or, for the split tile's other group (and idle
    groups), its K/V blocks passed in the ring. Returns (cnt_kv, cnt_q, last_q, held_o): the
    rings' counters and the Q slot state."""
    m0 = mb * BLOCK_M
    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW,
                              BLOCK_M, BLOCK_N)
    theirs = False  # SPLIT_TILES: the other group's tile (else a compile-time False)
    if SPLIT_TILES:
        theirs = it % NUM_GROUPS != cid
    if theirs:  # its K/V blocks pass by in the ring: each waited for, released
        cnt_kv = _pass_kv_blocks(k_fulls, k_empties, v_fulls, v_empties, cnt_kv,
                                 nblk, cid, NUM_GROUPS, NUM_BUF_KV, False, timeline,
                                 timeline_stride, TIMELINE)
    else:
        rows = m0 + ROW_OFF + tl.arange(0, Q_ROWS)
        o = tl.zeros([Q_ROWS, HEAD_DIM], dtype=dtype)  # rows that see no key
        if O_TMA_ONLY:  # a whole slice inside the sequence, or none of it
            tma_o = m0 + ROW_OFF < qlen
        elif TMA_STORE_O:  # this group's O slice leaves by TMA store
            tma_o = (nblk > 0) & (m0 + (cid + 1) * BM_SPLIT <= qlen)
        else:
            tma_o: tl.constexpr = False
        lse = tl.zeros([Q_ROWS], dtype=tl.float32) - float("inf")
        if nblk > 0:
            q_key = (q_row0 + m0) * H + h
            release = -1  # the previous Q slot, once no longer needed
            if q_key != last_q:
                if cnt_q > 0:
                    release = Q_SLOT0 + (cnt_q - 1) % NUM_BUF_Q
                    if not O_IN_Q:
                        tlx.barrier_arrive(q_empties[release], 1)
                cnt_q += 1
                last_q = q_key
            q_idx, q_phase = _bufidx_phase(cnt_q - 1, NUM_BUF_Q)
            q_buf = q_tiles[Q_SLOT0 + q_idx]
            tlx.barrier_wait(q_fulls[Q_SLOT0 + q_idx], q_phase)
            idle = False  # a compile-time False unless enabled: no branch at all
            if SKIP_IDLE_GROUPS:
                idle = m0 + ROW_OFF >= qlen
            if idle:
                # every row of this group lies past qlen (the last q-block of a
                # sequence): keep the K/V rings' and the ping-pong's protocol with the
                # other groups, block by block, without the math
                if O_IN_Q:
                    _release_staged_q_slot(q_empties, release, held_o)
                held_o = 0
                cnt_kv = _pass_kv_blocks(k_fulls, k_empties, v_fulls, v_empties,
                                         cnt_kv, nblk, cid, NUM_GROUPS, NUM_BUF_KV,
                                         PINGPONG, timeline, timeline_stride, TIMELINE)
            else:
                first_full, a, c = kv_unmasked_range(
                    m0, qlen, klen, window, lo, nblk, CAUSAL, HAS_WINDOW, BLOCK_M,
                    BLOCK_N)
                # prologue: QK^T of block 0 and its softmax, no PV yet
                p_f32, m_i, l_i = _first_block(
                    q_buf, k_tiles, k_fulls, k_empties, cnt_kv, first_full, lo, rows,
                    klen, window, qk_scale, cid, NUM_GROUPS, NUM_BUF_KV, CAUSAL,
                    HAS_WINDOW, BLOCK_N, LAZY_RESCALE, Q_ROWS, PINGPONG, timeline,
                    timeline_stride, TIMELINE, FIRST_BRANCH)
                acc = tl.zeros([Q_ROWS, HEAD_DIM], dtype=tl.float32)
                p = p_f32 if LATE_P_CAST else p_f32.to(dtype)
                cnt_kv += 1
                if O_IN_Q:
                    _release_staged_q_slot(q_empties, release, held_o)
                held_o = 0
                # masked head [1, a), unmasked bulk [a, c), masked tail [c, nblk) (SHIFT_TAIL:
                # only the last block is masked there, with a block before it: the shifted one;
                # TAIL_BRANCH: the bulk loop runs it, its mask under a run-time branch)
                acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                    1, a, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc,
                    p, m_i, l_i, cnt_kv, lo, rows, klen, window, qk_scale, cid, NUM_GROUPS,
                    NUM_BUF_KV, CAUSAL, HAS_WINDOW, True, BLOCK_N, LATE_P_CAST, LAZY_RESCALE,
                    dtype, PINGPONG, False, timeline, timeline_stride,
                    TIMELINE)
                acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                    a, nblk if TAIL_BRANCH else c, q_buf, k_tiles, v_tiles, k_fulls, k_empties,
                    v_fulls, v_empties, acc, p, m_i, l_i, cnt_kv, lo, rows, klen, window,
                    qk_scale, cid, NUM_GROUPS, NUM_BUF_KV, CAUSAL, HAS_WINDOW, False, BLOCK_N,
                    LATE_P_CAST, LAZY_RESCALE, dtype, PINGPONG, TAIL_BRANCH, timeline,
                    timeline_stride, TIMELINE, TAIL_BRANCH)
                if not TAIL_BRANCH:
                    acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                        c, nblk, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                        acc, p, m_i, l_i, cnt_kv, lo, rows, klen, window, qk_scale, cid,
                        NUM_GROUPS, NUM_BUF_KV, CAUSAL, HAS_WINDOW, True, BLOCK_N, LATE_P_CAST,
                        LAZY_RESCALE, dtype, PINGPONG, SHIFT_TAIL, timeline, timeline_stride,
                        TIMELINE)
                # epilogue: PV of the last block
                acc = _finish_last_pv(p, acc, v_tiles, v_fulls, v_empties, cnt_kv - 1,
                                      NUM_BUF_KV, dtype)
                if TIMELINE:
                    mark_epilogue(timeline, timeline_stride, it, cid, 0, SPLIT_TILES)
                o, lse = _normalise(acc, m_i, l_i, RCP_NORMALISE, FAST_EPILOGUE, dtype)
                if TIMELINE:
                    mark_epilogue(timeline, timeline_stride, it, cid, 1, SPLIT_TILES)
                if O_IN_Q:
                    if tma_o:  # stage O in the Q tile: its last QK^T was waited on
                        tlx.fence("async_shared")
                        _tma_store_o(desc_o, q_buf, o, out_row0 + m0 + ROW_OFF,
                                     h * HEAD_DIM)
                        held_o = 1
        _store_o_lse(desc_o, o_tiles, out_ptr, lse_ptr, o, lse, m0 + ROW_OFF,
                     out_row0, h, qlen, total_out, tma_o, cid, H, HEAD_DIM,
                     TMA_STORE_O, BROADCAST_Q, O_TMA_ONLY, FAST_EPILOGUE, Q_ROWS)
        if TIMELINE:
            mark_tile(timeline, timeline_stride, it * NUM_GROUPS + cid, nblk, b)
    return cnt_kv, cnt_q, last_q, held_o


@triton.jit
def jfa_fwd_kernel(
    desc_q, desc_k, desc_v,          # TMA: q [rows_q, Hq*D], k/v [total_kv, Hkv*D]
    desc_o,                          # TMA store of out [total_out, Hq*D] (TMA_STORE_O)
    out_ptr, lse_ptr,                # out [total_out, Hq, D]; lse fp32 [Hq, total_out]
    q_off, k_off,                    # [B+1] (q_off unused with BROADCAST_Q)
    tile_entry, n_entries,           # schedule (tlx_schedule.build_schedule)
    sm_scale, window, B, H, G, q_len, NUM_MB, total_out, ctas_per_pair, tile_window,
    timeline, timeline_stride,       # TIMELINE: int64 [n_prog, timeline_stride] (tlx_timeline)
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NUM_GROUPS: tl.constexpr,
    NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr, CONSUMER_REGS: tl.constexpr,
    CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
    RESIDENT: tl.constexpr, TMA_STORE_O: tl.constexpr, SKIP_IDLE_GROUPS: tl.constexpr,
    LATE_P_CAST: tl.constexpr, O_TMA_ONLY: tl.constexpr, WARP_ARRIVE: tl.constexpr,
    LAZY_RESCALE: tl.constexpr, RCP_NORMALISE: tl.constexpr, PDL: tl.constexpr,
    FAST_EPILOGUE: tl.constexpr, SPLIT_TILES: tl.constexpr, SHIFT_TAIL: tl.constexpr,
    TAIL_BRANCH: tl.constexpr, FIRST_BRANCH: tl.constexpr, SWAP_PAIRS: tl.constexpr,
    TIMELINE: tl.constexpr,
):
    BLOCK_M: tl.constexpr = BM_SPLIT * NUM_GROUPS
    # SPLIT_TILES: a group computes all BLOCK_M rows of its own tiles from one resident Q tile (the
    # launcher's conditions: broadcast Q, resident, q_len == BLOCK_M, no mask, O by TMA only)
    tl.static_assert(not SPLIT_TILES or (BROADCAST_Q and RESIDENT and O_TMA_ONLY and not CAUSAL
                                         and not HAS_WINDOW))
    tl.static_assert(not TAIL_BRANCH or SHIFT_TAIL)  # FwdConfig.tail_branch
    tl.static_assert(not SWAP_PAIRS or SPLIT_TILES)  # FwdConfig.swap_pairs
    Q_ROWS: tl.constexpr = BLOCK_M if SPLIT_TILES else BM_SPLIT  # query rows per group and tile
    # consumer groups sharing a tile: its Q tiles per q-block
    TILE_GROUPS: tl.constexpr = 1 if SPLIT_TILES else NUM_GROUPS
    # the groups take turns issuing QK^T (named barriers PINGPONG_BAR + c) in the ping-pong tile
    PINGPONG: tl.constexpr = not SPLIT_TILES
    dtype: tl.constexpr = tlx.dtype_of(desc_k)
    ELEM_BYTES: tl.constexpr = tlx.size_of(dtype)
    Q_BYTES: tl.constexpr = ELEM_BYTES * Q_ROWS * HEAD_DIM
    KV_BYTES: tl.constexpr = ELEM_BYTES * BLOCK_N * HEAD_DIM

    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    if TIMELINE:  # a diagnostic's timestamps (kernels/tlx_timeline.py)
        entry = now()
    # ---- shared memory and barriers -------------------------------------------------------
    q_tiles = tlx.local_alloc((Q_ROWS, HEAD_DIM), dtype, TILE_GROUPS * NUM_BUF_Q)
    k_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_BUF_KV)
    v_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, NUM_BUF_KV)
    q_fulls = tlx.alloc_barriers(num_barriers=NUM_GROUPS * NUM_BUF_Q, arrive_count=1)
    q_empties = tlx.alloc_barriers(num_barriers=NUM_GROUPS * NUM_BUF_Q, arrive_count=1)
    k_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=1)
    v_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=1)
    # a K/V slot goes back to the producer once every group has passed its block, the split tile's
    # other group too (it waits for the block and releases it unread): with the owner's release
    # alone, a group stepping over more than NUM_BUF_KV blocks of the other's tiles could wait on
    # a slot whose previous load has not landed yet, and a parity-only mbarrier then reads that
    # earlier phase as done (stale K/V, and a release that corrupts the ring's protocol)
    if WARP_ARRIVE:
        # every consumer thread arrives on its own once its wgmma that read the slot was waited on:
        # no warpgroup sync before each arrive (a plain mbarrier takes one thread's arrival after a
        # bar.sync of its 128 threads, two per arrive in the sm_90 SASS)
        k_empties = tlx.alloc_warp_barrier(num_barriers=NUM_BUF_KV, num_warps=4 * NUM_GROUPS)
        v_empties = tlx.alloc_warp_barrier(num_barriers=NUM_BUF_KV, num_warps=4 * NUM_GROUPS)
    else:
        k_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=NUM_GROUPS)
        v_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_KV, arrive_count=NUM_GROUPS)
    # TMA_STORE_O: self/cross attention stage O in the group's Q tile (NUM_BUF_Q >= 2: the next
    # tile's Q arrives in the other slot while the store drains); broadcast Q stays resident, so
    # each group stages it in a tile of its own, reused once the previous tile's store read it
    O_IN_Q: tl.constexpr = TMA_STORE_O and not BROADCAST_Q
    # O_TMA_ONLY (broadcast Q, q_len a multiple of 64): no slice straddles a sequence end, so every
    # slice inside one, zeros too, leaves by TMA store and the masked tl.store of O is not compiled
    # (its relayout took 16 KB of shared memory scratch, and the q192 build spilled)
    tl.static_assert(not O_TMA_ONLY or (TMA_STORE_O and BROADCAST_Q))
    if TMA_STORE_O and BROADCAST_Q:
        o_tiles = tlx.local_alloc((Q_ROWS, HEAD_DIM), dtype, NUM_GROUPS)
    else:
        o_tiles = q_tiles  # not used
    wait_for_previous_kernel(PDL)
    if TIMELINE:  # stored after the PDL wait, before which a kernel writes no global memory
        store_stamp(timeline, timeline_stride, ENTRY, entry)
        mark(timeline, timeline_stride, READY)
        mark_sm(timeline, timeline_stride)
    n_tiles = tl.load(n_entries) * H  # generic schedule: (entry, head) tiles
    n_iter = n_iterations(n_tiles, n_prog, B, ctas_per_pair, RESIDENT)
    if SWAP_PAIRS:  # an even count: a last pair's swapped-away tile runs at the extra position
        n_iter += n_iter % 2

    with tlx.async_tasks():
        # ---- producer: TMA loads of Q (when it changes) and K/V ----------------------------
        with tlx.async_task("default"):
            _produce_in_tile_order(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls,
                                   q_empties, k_fulls, k_empties, v_fulls, v_empties, n_iter, pid,
                                   n_prog, tile_entry, n_tiles, B, H, G, NUM_MB, ctas_per_pair,
                                   tile_window, q_off, k_off, q_len, window, HEAD_DIM, BLOCK_M,
                                   BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, TILE_GROUPS, CAUSAL, HAS_WINDOW,
                                   BROADCAST_Q, RESIDENT, Q_BYTES, KV_BYTES, SHIFT_TAIL,
                                   SWAP_PAIRS, timeline, timeline_stride, TIMELINE)

        # ---- consumers: QK^T, online softmax, PV, epilogue -------------------------------
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=NUM_GROUPS):
            cid: tl.constexpr = tlx.async_task_replica_id()
            # this group's first query row in a tile and its Q slots (SPLIT_TILES: the whole tile,
            # from the one resident Q tile)
            ROW_OFF: tl.constexpr = 0 if SPLIT_TILES else cid * BM_SPLIT
            Q_SLOT0: tl.constexpr = 0 if SPLIT_TILES else cid * NUM_BUF_Q
            qk_scale = sm_scale * 1.4426950408889634  # scores in base 2
            cnt_kv = 0
            cnt_q = 0
            last_q = -1
            held_o = 0  # O_IN_Q: the last Q slot holds an O slice a TMA store may still read
            if PINGPONG and cid == NUM_GROUPS - 1:
                tlx.named_barrier_arrive(PINGPONG_BAR, 256)  # group 0 issues first
            valid, b, h, mb = tile_at(0, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                      ctas_per_pair, tile_window, RESIDENT)
            q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len, BROADCAST_Q)
            n_valid, n_b, n_h, n_mb = tile_at(1, pid, n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                              ctas_per_pair, tile_window, RESIDENT)
            for it in range(0, n_iter):
                nn_valid, nn_b, nn_h, nn_mb = tile_at(_tile_order(it + 2, SWAP_PAIRS), pid,
                                                      n_prog, tile_entry, n_tiles, B, H, NUM_MB,
                                                      ctas_per_pair, tile_window, RESIDENT)
                n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(
                    n_b, q_off, k_off, q_len, BROADCAST_Q)
                if valid:
                    cnt_kv, cnt_q, last_q, held_o = _consume_tile(
                        q_tiles, k_tiles, v_tiles, o_tiles, q_fulls, q_empties, k_fulls, k_empties,
                        v_fulls, v_empties, desc_o, out_ptr, lse_ptr, timeline, timeline_stride,
                        it, b, h, mb, q_row0, out_row0, qlen, klen, window, qk_scale, H,
                        total_out, cnt_kv, cnt_q, last_q, held_o, cid, NUM_GROUPS, HEAD_DIM,
                        BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, Q_ROWS, ROW_OFF, Q_SLOT0, CAUSAL,
                        HAS_WINDOW, BROADCAST_Q, TMA_STORE_O, O_IN_Q, O_TMA_ONLY,
                        SKIP_IDLE_GROUPS, LATE_P_CAST, LAZY_RESCALE, RCP_NORMALISE, FAST_EPILOGUE,
                        SPLIT_TILES, PINGPONG, SHIFT_TAIL, TAIL_BRANCH, FIRST_BRANCH, TIMELINE,
                        dtype)
                valid, b, h, mb = n_valid, n_b, n_h, n_mb
                q_row0, out_row0, qlen, kv_row0, klen = (n_q_row0, n_out_row0, n_qlen, n_kv_row0,
                                                         n_klen)
                n_valid, n_b, n_h, n_mb = nn_valid, nn_b, nn_h, nn_mb
            if TMA_STORE_O:
                tlx.async_descriptor_store_wait(0)  # the last O stores finish before the CTA exits
            if TIMELINE:
                mark(timeline, timeline_stride, GROUP_END + 2 * cid)
