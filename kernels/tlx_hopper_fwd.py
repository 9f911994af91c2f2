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
read by both groups; the producer loads K/V in tile order into the one ring, and a group steps its
ring counter over the other group's blocks.
HEAD_PAIRS (`FwdConfig.head_pairs`, off; split tiles with Hq == Hkv even): a tile is one batch
element's q-block of two adjacent heads instead, group c computing head 2h + c from its own
resident Q tile, and each ring slot holds both heads' K/V blocks (the first head's in tile i, the
second's in NUM_BUF_KV + i), loaded under one barrier: the producer requests 512 contiguous bytes of
each key row instead of one head's 256, which the resident schedule otherwise reads from other SMs
at other times. PAIR_PINGPONG: the pair's groups take turns issuing QK^T as in the ping-pong tile
(they walk the same blocks), so one's softmax overlaps the other's wgmmas.
Off-by-default candidates for the short-key PMA forward (session 47, not yet GPU-measured):
SHIFT_TAIL loads a sequence's partial last K/V block ending at its last key (its first rows are
the previous block's, masked) instead of reading the next sequence's rows; CLAIM_TILES lets the
resident CTAs of a (head, q-block) pair claim its batch elements from an atomic counter, the
producer handing each claimed tile to the consumers through a small shared-memory ring;
FREE_GROUP gives a split tile to whichever group reaches it first; LOCAL_ORDER has every CTA
write the batch's schedule itself (`write_schedule`, the build kernel's body) instead of waiting
for a build kernel. PREFETCH_HEADS (session 48) has the CTAs of every few heads prefetch the other
heads' K/V slices of the rows they load into L2, so DRAM sees whole rows requested together.
KV blocks per tile come from `kv_block_range`, shared by every role; the blocks outside
`kv_unmasked_range` (block 0 included, unless every real row sees all its keys) run the masked
softmax, the rest without any mask.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from kernels.tlx_schedule import (PRIORITY_BUCKETS, claim_ticket, claimed_entry, kv_block_range,
                                  kv_unmasked_range, n_iterations, release_claims, seq_bounds,
                                  tile_at, wait_for_previous_kernel, write_schedule)
from kernels.tlx_timeline import (ENTRY, GROUP_END, READY, mark, mark_sm, mark_tile, now,
                                  store_stamp)

BM_SPLIT = tl.constexpr(64)  # query rows per consumer group of a ping-pong tile (wgmma M)
PINGPONG_BAR = tl.constexpr(9)  # named barriers PINGPONG_BAR + c, c < NUM_GROUPS
O_STAGE_BAR = tl.constexpr(12)  # broadcast TMA_STORE_O: group c's O tile is free (O_STAGE_BAR + c)
# FREE_GROUP (the split tile, two groups, no ping-pong: PINGPONG_BAR's ids are free): group c's
# decision sync (FREE_GROUP_BAR + c, 128 threads) and both groups' start (FREE_INIT_BAR, 256)
FREE_GROUP_BAR = tl.constexpr(9)
FREE_INIT_BAR = tl.constexpr(11)
NUM_BUF_F = tl.constexpr(16)  # FREE_GROUP: tiles whose owner the ring of flags remembers
SCHEDULE_BUCKETS = tl.constexpr(PRIORITY_BUCKETS)  # LOCAL_ORDER: the build's work classes


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
def _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window, CAUSAL: tl.constexpr,
                   HAS_WINDOW: tl.constexpr, MASK: tl.constexpr, BLOCK_N: tl.constexpr,
                   LAZY_RESCALE: tl.constexpr, col_lo=0, SHIFT_TAIL: tl.constexpr = False):
    """Online-softmax update for one score block; returns (p fp32, alpha, m_i, l_i).

    m_i is the running max of the base-2 scaled scores (with LAZY_RESCALE, the max in use: up to
    RESCALE_SLACK below the true one); -inf while a row has seen no visible key. SHIFT_TAIL (a
    shifted last block, `_kv_block_start`: it ends at the sequence's last key, no causal/window
    mask): the columns below col_lo repeat the previous block's keys, the only ones masked.
    """
    if MASK:
        # compare block-local columns with per-row thresholds: nothing 2-D is loop invariant,
        # so the compiler cannot hoist (and spill) a [rows, cols] mask out of the KV loop
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
        qk = tl.where(vis, qk, float("-inf"))
    m_blk = tl.max(qk, 1) * qk_scale
    if LAZY_RESCALE:
        m_new = tl.where(m_blk > m_i + RESCALE_SLACK, m_blk, m_i)
    else:
        m_new = tl.maximum(m_i, m_blk)
    if MASK:
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # fully masked so far: p = 0
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
              NUM_BUF_KV: tl.constexpr, PINGPONG: tl.constexpr, KV_SLOT0: tl.constexpr):
    """(QK^T in flight, its K slot) of K/V ring turn cnt, issued once K landed (PINGPONG: in this
    group's turn); the group's K tiles start at KV_SLOT0 (HEAD_PAIRS: its head's)."""
    k_idx, k_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    tlx.barrier_wait(k_fulls[k_idx], k_phase)
    if PINGPONG:
        _pingpong_enter(cid, NUM_GROUPS)
    qk = tlx.async_dot(q_buf, tlx.local_trans(k_tiles[KV_SLOT0 + k_idx]))
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
                      KV_SLOT0: tl.constexpr, col_lo=0, SHIFT_TAIL: tl.constexpr = False):
    """Steady state: QK^T of block cnt overlapped with PV of block cnt-1 (p holds its probs: in
    the MMA dtype, or fp32 with LATE_P_CAST, cast only once this block's QK^T is issued, so the
    cast runs beside the tensor core instead of before the issue, as the TLX tutorial does).
    Returns (acc, p, m_i, l_i, cnt + 1). The PV is waited for within the step: an accumulator in
    flight across a loop iteration makes ptxas serialise every wgmma (C7514, session 40), and
    unrolled chains that wait later (`pv_chain`, run 42) were slower."""
    qk, k_idx = _issue_qk(q_buf, k_tiles, k_fulls, cnt, cid, NUM_GROUPS, NUM_BUF_KV, PINGPONG,
                          KV_SLOT0)
    if LATE_P_CAST:
        p = p.to(dtype)
    v_idx, v_phase = _bufidx_phase(cnt - 1, NUM_BUF_KV)
    tlx.barrier_wait(v_fulls[v_idx], v_phase)
    acc = tlx.async_dot(p, v_tiles[KV_SLOT0 + v_idx], acc)
    qk = tlx.async_dot_wait(1, qk)
    tlx.barrier_arrive(k_empties[k_idx], 1)
    p, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, qk_scale, rows, start_n, klen, window,
                                        CAUSAL, HAS_WINDOW, MASK, BLOCK_N, LAZY_RESCALE, col_lo,
                                        SHIFT_TAIL)
    acc = tlx.async_dot_wait(0, acc)  # PV done: V slot free, acc safe to rescale
    tlx.barrier_arrive(v_empties[v_idx], 1)
    acc = _rescale(acc, alpha, LAZY_RESCALE)
    if not LATE_P_CAST:
        p = p.to(dtype)
    return acc, p, m_i, l_i, cnt + 1


@triton.jit
def _pass_kv_blocks(k_fulls, k_empties, v_fulls, v_empties, cnt, nblk, cid: tl.constexpr,
                    NUM_GROUPS: tl.constexpr, NUM_BUF_KV: tl.constexpr, PINGPONG: tl.constexpr):
    """K/V blocks cnt .. cnt+nblk-1 passed without math: each waited for (so the next wait on its
    slot cannot see this load's phase as an older one) and released; with PINGPONG the group keeps
    its turns with the others. Returns cnt + nblk."""
    for j in range(0, nblk):
        kv_idx, kv_phase = _bufidx_phase(cnt, NUM_BUF_KV)
        tlx.barrier_wait(k_fulls[kv_idx], kv_phase)
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
                 PINGPONG: tl.constexpr, KV_SLOT0: tl.constexpr):
    """A tile's first block (ROWS query rows): the QK^T of K/V block cnt and its softmax from an
    empty row state, no PV yet; returns (p fp32, m_i, l_i)."""
    m_i = tl.zeros([ROWS], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    qk, k_idx = _issue_qk(q_buf, k_tiles, k_fulls, cnt, cid, NUM_GROUPS, NUM_BUF_KV, PINGPONG,
                          KV_SLOT0)
    qk = tlx.async_dot_wait(0, qk)
    tlx.barrier_arrive(k_empties[k_idx], 1)
    # a runtime branch: the mask costs ~100 instructions per consumer and tile (sm_90 SASS), the
    # per-tile code where ours outgrew the tutorial's
    if first_full:  # every real row sees all its keys: the mask is a no-op
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
                       KV_SLOT0: tl.constexpr, SHIFT_TAIL: tl.constexpr):
    """A tile's K/V blocks j0 .. j1 - 1 (`_consume_kv_block` each) as one of its peeled loops:
    MASK a compile-time choice per loop, so the unmasked bulk compiles without any mask.
    SHIFT_TAIL: the blocks start where the producer loads them (`_kv_block_start`), their columns
    below the first key not yet seen masked. Returns (acc, p, m_i, l_i, cnt)."""
    for j in range(j0, j1):
        start_n = _kv_block_start(lo, j, klen, BLOCK_N, SHIFT_TAIL)
        acc, p, m_i, l_i, cnt = _consume_kv_block(
            q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc, p, m_i, l_i,
            cnt, start_n, rows, klen, window, qk_scale, cid, NUM_GROUPS, NUM_BUF_KV, CAUSAL,
            HAS_WINDOW, MASK, BLOCK_N, LATE_P_CAST, LAZY_RESCALE, dtype, PINGPONG, KV_SLOT0,
            lo + j * BLOCK_N - start_n, SHIFT_TAIL)
    return acc, p, m_i, l_i, cnt


@triton.jit
def _finish_last_pv(p, acc, v_tiles, v_fulls, v_empties, cnt, NUM_BUF_KV: tl.constexpr,
                    dtype: tl.constexpr, KV_SLOT0: tl.constexpr):
    """A tile's epilogue PV: p over K/V block cnt's V into acc, waited; the V slot goes back."""
    v_idx, v_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    tlx.barrier_wait(v_fulls[v_idx], v_phase)
    acc = tlx.async_dot(p.to(dtype), v_tiles[KV_SLOT0 + v_idx], acc)
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
                   row, col, prefetcher, HEAD_DIM: tl.constexpr, NUM_BUF_KV: tl.constexpr,
                   KV_BYTES: tl.constexpr, KV_HEADS: tl.constexpr, PREFETCH_HEADS: tl.constexpr):
    """The producer's turn cnt of the K/V ring: K and V rows row.. of KV_HEADS adjacent heads from
    column col, head g into tile g * NUM_BUF_KV + slot, once the consumers gave the slot back
    (HEAD_PAIRS: KV_HEADS = 2, a head pair's rows requested together under one barrier).
    PREFETCH_HEADS (where prefetcher): the same rows of the next PREFETCH_HEADS heads into L2."""
    kv_idx, kv_phase = _bufidx_phase(cnt, NUM_BUF_KV)
    _load_ring_slot(desc_k, k_tiles, k_fulls, k_empties, kv_idx, kv_phase, row, col, prefetcher,
                    HEAD_DIM, NUM_BUF_KV, KV_BYTES, KV_HEADS, PREFETCH_HEADS)
    _load_ring_slot(desc_v, v_tiles, v_fulls, v_empties, kv_idx, kv_phase, row, col, prefetcher,
                    HEAD_DIM, NUM_BUF_KV, KV_BYTES, KV_HEADS, PREFETCH_HEADS)


@triton.jit
def _load_ring_slot(desc, tiles, fulls, empties, idx, phase, row, col, prefetcher,
                    HEAD_DIM: tl.constexpr, NUM_BUF_KV: tl.constexpr, KV_BYTES: tl.constexpr,
                    KV_HEADS: tl.constexpr, PREFETCH_HEADS: tl.constexpr):
    """One tensor's (K's or V's) part of `_load_kv_block`: its slot idx once free, its heads' rows
    loaded under the slot's full barrier, the next heads' rows prefetched (PREFETCH_HEADS)."""
    tlx.barrier_wait(empties[idx], phase ^ 1)
    tlx.barrier_expect_bytes(fulls[idx], KV_HEADS * KV_BYTES)
    for g in tl.static_range(KV_HEADS):
        tlx.async_descriptor_load(desc, tiles[g * NUM_BUF_KV + idx], [row, col + g * HEAD_DIM],
                                  fulls[idx])
    for g in tl.static_range(KV_HEADS, KV_HEADS + PREFETCH_HEADS):
        tlx.async_descriptor_prefetch_tensor(desc, [row, col + g * HEAD_DIM], pred=prefetcher)


@triton.jit
def _q_coords(row, h, g, HEAD_DIM: tl.constexpr, HEAD_PAIRS: tl.constexpr):
    """TMA coordinates of a tile's Q slice g: rows g*64.. of head h, or (HEAD_PAIRS) the whole
    q-block of head 2h + g."""
    if HEAD_PAIRS:
        return row, (h * 2 + g) * HEAD_DIM
    else:
        return row + g * BM_SPLIT, h * HEAD_DIM


@triton.jit
def _produce_tile(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties, k_fulls,
                  k_empties, v_fulls, v_empties, cnt_kv, cnt_q, last_q, h, mb, q_row0, qlen,
                  kv_row0, klen, window, H, G, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr,
                  TILE_GROUPS: tl.constexpr, CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
                  Q_BYTES: tl.constexpr, KV_BYTES: tl.constexpr, HEAD_PAIRS: tl.constexpr,
                  SHIFT_TAIL: tl.constexpr, PREFETCH_HEADS: tl.constexpr):
    """The producer's loads of one tile: its Q slices (once per q-block while it stays resident;
    HEAD_PAIRS: both heads' whole q-blocks, h the pair), then its K/V blocks (PREFETCH_HEADS: the
    CTAs of every (PREFETCH_HEADS + 1)-th head also prefetch the next heads' slices of the rows).
    Returns (cnt_kv, cnt_q, last_q)."""
    m0 = mb * BLOCK_M
    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW, BLOCK_M, BLOCK_N)
    if nblk > 0:
        q_key = (q_row0 + m0) * H + h
        if q_key != last_q:
            q_idx, q_phase = _bufidx_phase(cnt_q, NUM_BUF_Q)
            for g in tl.static_range(TILE_GROUPS):
                slot = g * NUM_BUF_Q + q_idx
                q_r, q_c = _q_coords(q_row0 + m0, h, g, HEAD_DIM, HEAD_PAIRS)
                tlx.barrier_wait(q_empties[slot], q_phase ^ 1)
                tlx.barrier_expect_bytes(q_fulls[slot], Q_BYTES)
                tlx.async_descriptor_load(desc_q, q_tiles[slot], [q_r, q_c], q_fulls[slot])
            cnt_q += 1
            last_q = q_key
        kv_col = (h * 2 if HEAD_PAIRS else h // G) * HEAD_DIM  # HEAD_PAIRS: G == 1
        prefetcher = h % (PREFETCH_HEADS + 1) == 0  # PREFETCH_HEADS: G == 1
        for j in range(0, nblk):
            _load_kv_block(desc_k, desc_v, k_tiles, v_tiles, k_fulls, k_empties, v_fulls,
                           v_empties, cnt_kv,
                           kv_row0 + _kv_block_start(lo, j, klen, BLOCK_N, SHIFT_TAIL),
                           kv_col, prefetcher, HEAD_DIM, NUM_BUF_KV, KV_BYTES,
                           2 if HEAD_PAIRS else 1, PREFETCH_HEADS)
            cnt_kv += 1
    return cnt_kv, cnt_q, last_q


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
                           HEAD_PAIRS: tl.constexpr, SHIFT_TAIL: tl.constexpr,
                           PREFETCH_HEADS: tl.constexpr):
    """The producer over the static schedule: the CTA's tiles in order (`tile_at`)."""
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
        nn_valid, nn_b, nn_h, nn_mb = tile_at(it + 2, pid, n_prog, tile_entry, n_tiles, B, H,
                                              NUM_MB, ctas_per_pair, tile_window, RESIDENT)
        n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(n_b, q_off, k_off, q_len,
                                                                     BROADCAST_Q)
        if valid:
            cnt_kv, cnt_q, last_q = _produce_tile(
                desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties, k_fulls,
                k_empties, v_fulls, v_empties, cnt_kv, cnt_q, last_q, h, mb, q_row0, qlen, kv_row0,
                klen, window, H, G, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, TILE_GROUPS,
                CAUSAL, HAS_WINDOW, Q_BYTES, KV_BYTES, HEAD_PAIRS, SHIFT_TAIL, PREFETCH_HEADS)
        valid, b, h, mb = n_valid, n_b, n_h, n_mb
        q_row0, out_row0, qlen, kv_row0, klen = n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen
        n_valid, n_b, n_h, n_mb = nn_valid, nn_b, nn_h, nn_mb


@triton.jit
def _publish_tile(tile_ids, t_fulls, t_empties, cnt, b, klen, NUM_BUF_T: tl.constexpr):
    """CLAIM_TILES: the producer hands its cnt-th tile (batch element b, -1 when the CTA's tiles
    are done, and its key count) to every consumer group through the tile ring."""
    idx, phase = _bufidx_phase(cnt, NUM_BUF_T)
    tlx.barrier_wait(t_empties[idx], phase ^ 1)
    packed = (b.to(tl.int64) << 32) | klen.to(tl.int64)
    tlx.local_store(tile_ids[idx], tl.full([1], 0, tl.int64) + packed)
    tlx.barrier_arrive(t_fulls[idx], 1)


@triton.jit
def _next_claimed_tile(tile_ids, t_fulls, t_empties, cnt, NUM_BUF_T: tl.constexpr):
    """CLAIM_TILES: a consumer group's cnt-th tile from the tile ring: (b, klen), b = -1 at the
    end. One 8-byte slot per tile, which every thread loads whole: a two-element tensor is spread
    over the threads, and its reduction to scalars spilled ~40 words in the split tile (sm_90). The
    slot goes back once the values are in registers."""
    idx, phase = _bufidx_phase(cnt, NUM_BUF_T)
    tlx.barrier_wait(t_fulls[idx], phase)
    packed = tl.sum(tlx.local_load(tile_ids[idx]), 0)
    b = (packed >> 32).to(tl.int32)
    klen = packed.to(tl.int32)  # the low half
    tlx.barrier_arrive(t_empties[idx], 1)
    return b, klen


@triton.jit
def _produce_claimed_tiles(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties,
                           k_fulls, k_empties, v_fulls, v_empties, tile_ids, t_fulls, t_empties,
                           claims, pid, n_prog, tile_entry, B, H, G, ctas_per_pair, k_off, q_len,
                           window, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, NUM_BUF_Q: tl.constexpr,
                           NUM_BUF_KV: tl.constexpr, NUM_BUF_T: tl.constexpr,
                           TILE_GROUPS: tl.constexpr, CAUSAL: tl.constexpr,
                           HAS_WINDOW: tl.constexpr, Q_BYTES: tl.constexpr,
                           KV_BYTES: tl.constexpr, HEAD_PAIRS: tl.constexpr,
                           SHIFT_TAIL: tl.constexpr, PREFETCH_HEADS: tl.constexpr):
    """CLAIM_TILES (resident broadcast Q): the producer claims its pair's tiles at run time, each
    handed to the consumers through the tile ring before its loads, then a -1 that ends their
    loops. A claim waits for its atomic's answer, so the claims run three tiles ahead of the loads
    and a tile's element and bounds loads one and two (no load's latency at a tile boundary)."""
    pair = pid // ctas_per_pair
    h = pair % H
    mb = pair // H
    cnt_kv = 0
    cnt_q = 0
    last_q = -1
    ticket = claim_ticket(claims, pair, pid >= 0, B)  # tile 0's
    valid, b = claimed_entry(ticket, tile_entry, mb, B)
    ticket = claim_ticket(claims, pair, valid, B)  # tile 1's
    n_valid, n_b = claimed_entry(ticket, tile_entry, mb, B)
    ticket = claim_ticket(claims, pair, n_valid, B)  # tile 2's
    q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, k_off, k_off, q_len, True)
    cnt_t = 0
    more = pid >= 0
    while more:
        nn_valid, nn_b = claimed_entry(ticket, tile_entry, mb, B)  # tile it+2
        ticket = claim_ticket(claims, pair, nn_valid, B)  # tile it+3's
        n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(n_b, k_off, k_off, q_len,
                                                                     True)
        _publish_tile(tile_ids, t_fulls, t_empties, cnt_t, tl.where(valid, b, -1), klen, NUM_BUF_T)
        if valid:
            cnt_kv, cnt_q, last_q = _produce_tile(
                desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls, q_empties, k_fulls,
                k_empties, v_fulls, v_empties, cnt_kv, cnt_q, last_q, h, mb, q_row0, qlen, kv_row0,
                klen, window, H, G, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, TILE_GROUPS,
                CAUSAL, HAS_WINDOW, Q_BYTES, KV_BYTES, HEAD_PAIRS, SHIFT_TAIL, PREFETCH_HEADS)
        more = valid
        cnt_t += 1
        valid, b = n_valid, n_b
        q_row0, out_row0, qlen, kv_row0, klen = n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen
        n_valid, n_b = nn_valid, nn_b
    release_claims(claims, n_prog)


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
def _taken_by_other(owned, decided, it, cid: tl.constexpr):
    """FREE_GROUP: whether the CTA's other group took its it-th tile first; if not, this group
    takes it (flag owned[it % NUM_BUF_F] = it + 1). The flag is read without a lock, so both
    groups may take a tile when they reach it together (each then computes the same rows and
    stores the same bytes), but never neither: a group leaves a tile only once it has read the
    other's flag. Each thread's reading becomes the group's one decision (a warpgroup must agree
    on every wgmma): stored by one thread to the group's scratch word, synced, read back (two
    words per group by tile parity, so a thread ahead cannot overwrite the one being read)."""
    slot = it % NUM_BUF_F
    seen = tl.sum(tlx.local_load(owned[slot]), 0)
    word = cid * 2 + it % 2
    tlx.local_store(decided[word], tl.full([1], 0, tl.int32) + (seen == it + 1).to(tl.int32))
    tlx.named_barrier_wait(FREE_GROUP_BAR + cid, 128)
    theirs = tl.sum(tlx.local_load(decided[word]), 0) != 0
    if not theirs:
        tlx.local_store(owned[slot], tl.full([1], 0, tl.int32) + (it + 1))
    return theirs


@triton.jit
def _consume_tile(q_tiles, k_tiles, v_tiles, o_tiles, q_fulls, q_empties, k_fulls, k_empties,
                  v_fulls, v_empties, owned, decided, desc_o, out_ptr, lse_ptr, timeline,
                  timeline_stride, it, b, h, mb, q_row0, out_row0, qlen, klen, window, qk_scale, H,
                  total_out, cnt_kv, cnt_q, last_q, held_o, work, cid: tl.constexpr, NUM_GROUPS: tl.constexpr,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr, Q_ROWS: tl.constexpr,
                  ROW_OFF: tl.constexpr, Q_SLOT0: tl.constexpr, KV_SLOT0: tl.constexpr,
                  CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
                  TMA_STORE_O: tl.constexpr, O_IN_Q: tl.constexpr, O_TMA_ONLY: tl.constexpr,
                  SKIP_IDLE_GROUPS: tl.constexpr, LATE_P_CAST: tl.constexpr,
                  LAZY_RESCALE: tl.constexpr, RCP_NORMALISE: tl.constexpr,
                  FAST_EPILOGUE: tl.constexpr, SPLIT_TILES: tl.constexpr, HEAD_PAIRS: tl.constexpr,
                  BALANCED_SPLIT: tl.constexpr, SPLIT_TILE_COST: tl.constexpr,
                  FREE_GROUP: tl.constexpr, PINGPONG: tl.constexpr, SHIFT_TAIL: tl.constexpr,
                  TIMELINE: tl.constexpr, dtype: tl.constexpr):
    """Consumer group cid's part of the CTA's it-th tile (batch element b, schedule head h, q-block
    mb): its rows' QK^T, online softmax, PV and epilogue, or, for the split tile's other group
    (and idle groups), its K/V blocks passed in the ring. Returns (cnt_kv, cnt_q, last_q, held_o,
    work): the rings' counters, the Q slot state and BALANCED_SPLIT's work balance."""
    m0 = mb * BLOCK_M
    lo, nblk = kv_block_range(m0, qlen, klen, window, CAUSAL, HAS_WINDOW,
                              BLOCK_M, BLOCK_N)
    theirs = False  # SPLIT_TILES: the other group's tile (else a compile-time False)
    if BALANCED_SPLIT:
        # both groups walk every tile and agree on its owner: the one behind
        owner = (work < 0).to(tl.int32)
        work += tl.where(owner == 0, -1, 1) * (nblk + SPLIT_TILE_COST)
        theirs = owner != cid
    elif FREE_GROUP:
        theirs = _taken_by_other(owned, decided, it, cid)
    elif SPLIT_TILES and not HEAD_PAIRS:
        theirs = it % NUM_GROUPS != cid
    if theirs:  # its K/V blocks pass by in the ring: each waited for, released
        cnt_kv = _pass_kv_blocks(k_fulls, k_empties, v_fulls, v_empties, cnt_kv,
                                 nblk, cid, NUM_GROUPS, NUM_BUF_KV, False)
    else:
        head = h  # this group's query head (h is the schedule's)
        if HEAD_PAIRS:
            head = h * 2 + cid
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
                                         PINGPONG)
            else:
                first_full, a, c = kv_unmasked_range(
                    m0, qlen, klen, window, lo, nblk, CAUSAL, HAS_WINDOW, BLOCK_M,
                    BLOCK_N)
                # prologue: QK^T of block 0 and its softmax, no PV yet
                p_f32, m_i, l_i = _first_block(
                    q_buf, k_tiles, k_fulls, k_empties, cnt_kv, first_full, lo, rows,
                    klen, window, qk_scale, cid, NUM_GROUPS, NUM_BUF_KV, CAUSAL,
                    HAS_WINDOW, BLOCK_N, LAZY_RESCALE, Q_ROWS, PINGPONG,
                    KV_SLOT0)
                acc = tl.zeros([Q_ROWS, HEAD_DIM], dtype=tl.float32)
                p = p_f32 if LATE_P_CAST else p_f32.to(dtype)
                cnt_kv += 1
                if O_IN_Q:
                    _release_staged_q_slot(q_empties, release, held_o)
                held_o = 0
                # masked head [1, a), unmasked bulk [a, c), masked tail [c, nblk) (SHIFT_TAIL:
                # only the last block is masked there, with a block before it: the shifted one)
                acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                    1, a, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc,
                    p, m_i, l_i, cnt_kv, lo, rows, klen, window, qk_scale, cid, NUM_GROUPS,
                    NUM_BUF_KV, CAUSAL, HAS_WINDOW, True, BLOCK_N, LATE_P_CAST, LAZY_RESCALE,
                    dtype, PINGPONG, KV_SLOT0, False)
                acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                    a, c, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties, acc,
                    p, m_i, l_i, cnt_kv, lo, rows, klen, window, qk_scale, cid, NUM_GROUPS,
                    NUM_BUF_KV, CAUSAL, HAS_WINDOW, False, BLOCK_N, LATE_P_CAST, LAZY_RESCALE,
                    dtype, PINGPONG, KV_SLOT0, False)
                acc, p, m_i, l_i, cnt_kv = _consume_kv_blocks(
                    c, nblk, q_buf, k_tiles, v_tiles, k_fulls, k_empties, v_fulls, v_empties,
                    acc, p, m_i, l_i, cnt_kv, lo, rows, klen, window, qk_scale, cid, NUM_GROUPS,
                    NUM_BUF_KV, CAUSAL, HAS_WINDOW, True, BLOCK_N, LATE_P_CAST, LAZY_RESCALE,
                    dtype, PINGPONG, KV_SLOT0, SHIFT_TAIL)
                # epilogue: PV of the last block
                acc = _finish_last_pv(p, acc, v_tiles, v_fulls, v_empties, cnt_kv - 1,
                                      NUM_BUF_KV, dtype, KV_SLOT0)
                o, lse = _normalise(acc, m_i, l_i, RCP_NORMALISE, FAST_EPILOGUE, dtype)
                if O_IN_Q:
                    if tma_o:  # stage O in the Q tile: its last QK^T was waited on
                        tlx.fence("async_shared")
                        _tma_store_o(desc_o, q_buf, o, out_row0 + m0 + ROW_OFF,
                                     head * HEAD_DIM)
                        held_o = 1
        _store_o_lse(desc_o, o_tiles, out_ptr, lse_ptr, o, lse, m0 + ROW_OFF,
                     out_row0, head, qlen, total_out, tma_o, cid, H, HEAD_DIM,
                     TMA_STORE_O, BROADCAST_Q, O_TMA_ONLY, FAST_EPILOGUE, Q_ROWS)
        if TIMELINE:
            mark_tile(timeline, timeline_stride, it * NUM_GROUPS + cid, nblk, b)
    return cnt_kv, cnt_q, last_q, held_o, work


@triton.jit
def jfa_fwd_kernel(
    desc_q, desc_k, desc_v,          # TMA: q [rows_q, Hq*D], k/v [total_kv, Hkv*D]
    desc_o,                          # TMA store of out [total_out, Hq*D] (TMA_STORE_O)
    out_ptr, lse_ptr,                # out [total_out, Hq, D]; lse fp32 [Hq, total_out]
    q_off, k_off,                    # [B+1] (q_off unused with BROADCAST_Q)
    tile_entry, n_entries,           # schedule (tlx_schedule.build_schedule)
    sm_scale, window, B, H, G, q_len, NUM_MB, total_out, ctas_per_pair, tile_window,
    timeline, timeline_stride,       # TIMELINE: int64 [n_prog, timeline_stride] (tlx_timeline)
    claims,                          # CLAIM_TILES: int32 [tlx_schedule.CLAIM_SLOTS], zero
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, NUM_GROUPS: tl.constexpr,
    NUM_BUF_Q: tl.constexpr, NUM_BUF_KV: tl.constexpr, CONSUMER_REGS: tl.constexpr,
    CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, BROADCAST_Q: tl.constexpr,
    RESIDENT: tl.constexpr, TMA_STORE_O: tl.constexpr, SKIP_IDLE_GROUPS: tl.constexpr,
    LATE_P_CAST: tl.constexpr, O_TMA_ONLY: tl.constexpr, WARP_ARRIVE: tl.constexpr,
    LAZY_RESCALE: tl.constexpr, RCP_NORMALISE: tl.constexpr, PDL: tl.constexpr,
    FAST_EPILOGUE: tl.constexpr, SPLIT_TILES: tl.constexpr, HEAD_PAIRS: tl.constexpr,
    PAIR_PINGPONG: tl.constexpr, BALANCED_SPLIT: tl.constexpr, SPLIT_TILE_COST: tl.constexpr,
    SHIFT_TAIL: tl.constexpr, CLAIM_TILES: tl.constexpr, FREE_GROUP: tl.constexpr,
    PREFETCH_HEADS: tl.constexpr, LOCAL_ORDER: tl.constexpr, ORDER_BLOCK: tl.constexpr, ORDER_FIELDS: tl.constexpr,
    ORDER_FIELD_BITS: tl.constexpr, TIMELINE: tl.constexpr,
):
    BLOCK_M: tl.constexpr = BM_SPLIT * NUM_GROUPS
    # SPLIT_TILES: a group computes all BLOCK_M rows of its own tiles from one resident Q tile (the
    # launcher's conditions: broadcast Q, resident, q_len == BLOCK_M, no mask, O by TMA only)
    tl.static_assert(not SPLIT_TILES or (BROADCAST_Q and RESIDENT and O_TMA_ONLY and not CAUSAL
                                         and not HAS_WINDOW))
    Q_ROWS: tl.constexpr = BLOCK_M if SPLIT_TILES else BM_SPLIT  # query rows per group and tile
    # HEAD_PAIRS (split tiles, two groups, Hq == Hkv even): a tile is a batch element's q-block of
    # two adjacent heads, group c computing head 2h + c; the producer requests both heads' K/V rows
    # together (512 contiguous bytes of each row instead of 256)
    tl.static_assert(not HEAD_PAIRS or (SPLIT_TILES and NUM_GROUPS == 2))
    # consumer groups sharing a tile: its Q tiles per q-block
    TILE_GROUPS: tl.constexpr = NUM_GROUPS if HEAD_PAIRS or not SPLIT_TILES else 1
    H_TILES = H // 2 if HEAD_PAIRS else H  # the schedule's heads: head pairs with HEAD_PAIRS
    # the groups take turns issuing QK^T (named barriers PINGPONG_BAR + c): every tile of the
    # ping-pong tile, and with PAIR_PINGPONG the head pairs' (both groups walk the same blocks)
    tl.static_assert(not PAIR_PINGPONG or HEAD_PAIRS)
    # BALANCED_SPLIT: a split tile goes to the group with less estimated work so far (its blocks
    # plus SPLIT_TILE_COST per tile)
    tl.static_assert(not BALANCED_SPLIT or (SPLIT_TILES and not HEAD_PAIRS))
    PINGPONG: tl.constexpr = not SPLIT_TILES or PAIR_PINGPONG
    # CLAIM_TILES: the resident CTAs of a (head, q-block) pair claim its batch elements at run time
    # (tlx_schedule's claimed deal), the producer handing each to the consumers through a ring of
    # NUM_BUF_T (b, klen) slots: up to that many tiles ahead of them (one-block tiles: 8 blocks)
    tl.static_assert(not CLAIM_TILES or (RESIDENT and BROADCAST_Q))
    NUM_BUF_T: tl.constexpr = 8
    # FREE_GROUP: a split tile goes to whichever group reaches it first (`_taken_by_other`)
    tl.static_assert(not FREE_GROUP or (SPLIT_TILES and NUM_GROUPS == 2 and not HEAD_PAIRS
                                        and not BALANCED_SPLIT))
    # PREFETCH_HEADS (resident broadcast Q, Hq == Hkv, one head per tile): the CTAs of every
    # (PREFETCH_HEADS + 1)-th head prefetch the next heads' K/V slices of the rows they load, which
    # those heads' CTAs, walking the same elements in the same order, then read from L2
    tl.static_assert(PREFETCH_HEADS == 0 or (RESIDENT and BROADCAST_Q and not HEAD_PAIRS))
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
    # HEAD_PAIRS: ring slot i holds the pair's first head in tile i, its second in NUM_BUF_KV + i
    KV_HEADS: tl.constexpr = 2 if HEAD_PAIRS else 1
    k_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, KV_HEADS * NUM_BUF_KV)
    v_tiles = tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, KV_HEADS * NUM_BUF_KV)
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
    if CLAIM_TILES:  # the tile ring: every group reads every tile (the split tile's other too)
        tile_ids = tlx.local_alloc((1,), tl.int64, NUM_BUF_T)  # b << 32 | klen
        t_fulls = tlx.alloc_barriers(num_barriers=NUM_BUF_T, arrive_count=1)
        t_empties = tlx.alloc_barriers(num_barriers=NUM_BUF_T, arrive_count=NUM_GROUPS)
    else:
        tile_ids, t_fulls, t_empties = q_tiles, q_fulls, q_empties  # not used
    if FREE_GROUP:  # each tile's owner flag, and each group's two decision words
        owned = tlx.local_alloc((1,), tl.int32, NUM_BUF_F)
        decided = tlx.local_alloc((1,), tl.int32, 2 * NUM_GROUPS)
    else:
        owned, decided = q_tiles, q_tiles  # not used
    wait_for_previous_kernel(PDL)
    if TIMELINE:  # stored after the PDL wait, before which a kernel writes no global memory
        store_stamp(timeline, timeline_stride, ENTRY, entry)
        mark(timeline, timeline_stride, READY)
        mark_sm(timeline, timeline_stride)
    if LOCAL_ORDER:
        # no build kernel ahead of this one: every CTA writes the schedule the build would have
        # (the same values, `tlx_schedule.write_schedule`) and reads its own tiles' entries back
        # (`FwdConfig.local_order`). TLX runs this code in the default warpgroup alone; the
        # consumers' first reads follow TLX's CTA-wide barrier at the tasks' start
        write_schedule(q_off, k_off, tile_entry, n_entries, B, q_len, NUM_MB, window, CAUSAL,
                       HAS_WINDOW, BROADCAST_Q, False, BLOCK_M, BLOCK_N, ORDER_BLOCK,
                       SCHEDULE_BUCKETS, ORDER_FIELDS, ORDER_FIELD_BITS)
        tl.debug_barrier()
    n_tiles = tl.load(n_entries) * H_TILES  # generic schedule: (entry, head) tiles
    n_iter = n_iterations(n_tiles, n_prog, B, ctas_per_pair, RESIDENT)

    with tlx.async_tasks():
        # ---- producer: TMA loads of Q (when it changes) and K/V ----------------------------
        with tlx.async_task("default"):
            if CLAIM_TILES:
                _produce_claimed_tiles(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls,
                                       q_empties, k_fulls, k_empties, v_fulls, v_empties, tile_ids,
                                       t_fulls, t_empties, claims, pid, n_prog, tile_entry, B,
                                       H_TILES, G, ctas_per_pair, k_off, q_len, window, HEAD_DIM,
                                       BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, NUM_BUF_T,
                                       TILE_GROUPS, CAUSAL, HAS_WINDOW, Q_BYTES, KV_BYTES,
                                       HEAD_PAIRS, SHIFT_TAIL, PREFETCH_HEADS)
            else:
                _produce_in_tile_order(desc_q, desc_k, desc_v, q_tiles, k_tiles, v_tiles, q_fulls,
                                       q_empties, k_fulls, k_empties, v_fulls, v_empties, n_iter,
                                       pid, n_prog, tile_entry, n_tiles, B, H_TILES, G, NUM_MB,
                                       ctas_per_pair, tile_window, q_off, k_off, q_len, window,
                                       HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV,
                                       TILE_GROUPS, CAUSAL, HAS_WINDOW, BROADCAST_Q, RESIDENT,
                                       Q_BYTES, KV_BYTES, HEAD_PAIRS, SHIFT_TAIL,
                                       PREFETCH_HEADS)

        # ---- consumers: QK^T, online softmax, PV, epilogue -------------------------------
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=NUM_GROUPS):
            cid: tl.constexpr = tlx.async_task_replica_id()
            # this group's first query row in a tile and its Q slots (SPLIT_TILES: the whole tile,
            # from the one resident Q tile; HEAD_PAIRS: its head's) and K/V tiles
            ROW_OFF: tl.constexpr = 0 if SPLIT_TILES else cid * BM_SPLIT
            Q_SLOT0: tl.constexpr = cid * NUM_BUF_Q if HEAD_PAIRS or not SPLIT_TILES else 0
            KV_SLOT0: tl.constexpr = cid * NUM_BUF_KV if HEAD_PAIRS else 0  # its K/V tiles
            qk_scale = sm_scale * 1.4426950408889634  # scores in base 2
            cnt_kv = 0
            cnt_q = 0
            last_q = -1
            held_o = 0  # O_IN_Q: the last Q slot holds an O slice a TMA store may still read
            work = 0  # BALANCED_SPLIT: group 1's estimated work so far minus group 0's
            if PINGPONG and cid == NUM_GROUPS - 1:
                tlx.named_barrier_arrive(PINGPONG_BAR, 256)  # group 0 issues first
            if FREE_GROUP:  # no flag may read as a tile's (n + 1) before group 0 clears them
                if cid == 0:
                    for i in tl.static_range(NUM_BUF_F):
                        tlx.local_store(owned[i], tl.zeros([1], tl.int32))
                tlx.named_barrier_wait(FREE_INIT_BAR, 256)
            if CLAIM_TILES:  # the producer's claims, in the order it hands them over
                pair = pid // ctas_per_pair
                h = pair % H_TILES
                mb = pair // H_TILES
                b, klen = _next_claimed_tile(tile_ids, t_fulls, t_empties, 0, NUM_BUF_T)
                it = 0
                while b >= 0:
                    # broadcast Q: q_row0 0, out_row0 b * q_len, qlen q_len (seq_bounds')
                    cnt_kv, cnt_q, last_q, held_o, work = _consume_tile(
                        q_tiles, k_tiles, v_tiles, o_tiles, q_fulls, q_empties, k_fulls, k_empties,
                        v_fulls, v_empties, owned, decided, desc_o, out_ptr, lse_ptr, timeline,
                        timeline_stride, it, b, h, mb, 0, b * q_len, q_len, klen, window, qk_scale,
                        H, total_out, cnt_kv, cnt_q, last_q, held_o, work, cid, NUM_GROUPS,
                        HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV, Q_ROWS, ROW_OFF, Q_SLOT0,
                        KV_SLOT0, CAUSAL, HAS_WINDOW, BROADCAST_Q, TMA_STORE_O, O_IN_Q, O_TMA_ONLY,
                        SKIP_IDLE_GROUPS, LATE_P_CAST, LAZY_RESCALE, RCP_NORMALISE, FAST_EPILOGUE,
                        SPLIT_TILES, HEAD_PAIRS, BALANCED_SPLIT, SPLIT_TILE_COST, FREE_GROUP,
                        PINGPONG, SHIFT_TAIL, TIMELINE, dtype)
                    it += 1
                    b, klen = _next_claimed_tile(tile_ids, t_fulls, t_empties, it, NUM_BUF_T)
            else:
                valid, b, h, mb = tile_at(0, pid, n_prog, tile_entry, n_tiles, B, H_TILES,
                                          NUM_MB, ctas_per_pair, tile_window, RESIDENT)
                q_row0, out_row0, qlen, kv_row0, klen = seq_bounds(b, q_off, k_off, q_len,
                                                                   BROADCAST_Q)
                n_valid, n_b, n_h, n_mb = tile_at(1, pid, n_prog, tile_entry, n_tiles, B, H_TILES,
                                                  NUM_MB, ctas_per_pair, tile_window, RESIDENT)
                for it in range(0, n_iter):
                    nn_valid, nn_b, nn_h, nn_mb = tile_at(it + 2, pid, n_prog, tile_entry, n_tiles,
                                                          B, H_TILES, NUM_MB, ctas_per_pair,
                                                          tile_window, RESIDENT)
                    n_q_row0, n_out_row0, n_qlen, n_kv_row0, n_klen = seq_bounds(
                        n_b, q_off, k_off, q_len, BROADCAST_Q)
                    if valid:
                        cnt_kv, cnt_q, last_q, held_o, work = _consume_tile(
                            q_tiles, k_tiles, v_tiles, o_tiles, q_fulls, q_empties, k_fulls,
                            k_empties, v_fulls, v_empties, owned, decided, desc_o, out_ptr, lse_ptr,
                            timeline, timeline_stride, it, b, h, mb, q_row0, out_row0, qlen, klen,
                            window, qk_scale, H, total_out, cnt_kv, cnt_q, last_q, held_o, work,
                            cid, NUM_GROUPS, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_BUF_Q, NUM_BUF_KV,
                            Q_ROWS, ROW_OFF, Q_SLOT0, KV_SLOT0, CAUSAL, HAS_WINDOW, BROADCAST_Q,
                            TMA_STORE_O, O_IN_Q, O_TMA_ONLY, SKIP_IDLE_GROUPS, LATE_P_CAST,
                            LAZY_RESCALE, RCP_NORMALISE, FAST_EPILOGUE, SPLIT_TILES, HEAD_PAIRS,
                            BALANCED_SPLIT, SPLIT_TILE_COST, FREE_GROUP, PINGPONG, SHIFT_TAIL,
                            TIMELINE, dtype)
                    valid, b, h, mb = n_valid, n_b, n_h, n_mb
                    q_row0, out_row0, qlen, kv_row0, klen = (n_q_row0, n_out_row0, n_qlen,
                                                             n_kv_row0, n_klen)
                    n_valid, n_b, n_h, n_mb = nn_valid, nn_b, nn_h, nn_mb
            if TMA_STORE_O:
                tlx.async_descriptor_store_wait(0)  # the last O stores finish before the CTA exits
            if TIMELINE:
                mark(timeline, timeline_stride, GROUP_END + 2 * cid)
