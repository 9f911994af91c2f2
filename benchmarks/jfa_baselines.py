"""What a user would run instead of JFA, computing the same function in the same layout.

Each baseline is ``prepare(inputs) -> run``: ``prepare`` does the work that depends only on the
batch structure (cumulative lengths, padding indices, FlexAttention's block mask) and is not
timed; ``run()`` is timed and returns the output ``[total_out, H, D]``, differentiable w.r.t.
``inputs.query/key/value``. The PMA query is expanded per batch element inside ``run``: it is a
learned parameter, so a training step pays for the copy (and its gradient's reduction).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.jfa_workloads import JaggedInputs

Run = Callable[[], Tensor]
FLEX_BLOCK = 128  # FlexAttention's default block size (query and key)


def expand_query(query: Tensor, batch: int) -> Tensor:
    """PMA: the shared [q_len, H, D] query copied once per batch element -> [batch*q_len, H, D]
    (differentiable: its gradient is the batch's sum)."""
    return query.unsqueeze(0).expand(batch, -1, -1, -1).flatten(0, 1)


def _jagged_query(inputs: JaggedInputs) -> Tensor:
    return expand_query(inputs.query, len(inputs.lengths.kv)) if inputs.broadcast_q else inputs.query


def _host_offsets(lengths: Tensor) -> Tensor:
    return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])


def varlen(inputs: JaggedInputs) -> Run:
    """``torch.nn.attention.varlen.varlen_attn`` (FlashAttention varlen; CUDA, fp16/bf16)."""
    from torch.nn.attention.varlen import varlen_attn

    device = inputs.key.device
    cu_seq_q = _host_offsets(inputs.lengths.q).to(device=device, dtype=torch.int32)
    # varlen aligns a causal mask bottom-right; it matches JFA's top-left rule for self-attention.
    window = (-1, 0) if inputs.causal else (-1, -1)

    def run() -> Tensor:
        return varlen_attn(_jagged_query(inputs), inputs.key, inputs.value, cu_seq_q, inputs.key_offset,
                           inputs.max_seq_len_q, inputs.max_seq_len_kv, window_size=window)  # fmt: skip

    return run


def _document_ids(lengths: Tensor, padded_rows: int, padding_id: int) -> tuple[Tensor, Tensor]:
    """Per row: its batch element and its position in it; rows past the end get ``padding_id``."""
    doc = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    pos = torch.arange(len(doc)) - _host_offsets(lengths)[:-1][doc]
    pad = padded_rows - len(doc)
    return torch.cat([doc, doc.new_full((pad,), padding_id)]), torch.cat([pos, pos.new_zeros(pad)])


def _block_list(count: Tensor, index: Callable[[Tensor], Tensor], kv_blocks: int) -> tuple[Tensor, Tensor]:
    """FlexAttention's ``(num_blocks [1, 1, Q], indices [1, 1, Q, kv_blocks])``: query block i
    lists ``index(k)[i]`` for k < count[i]; the rest of its row is unused padding."""
    k = torch.arange(kv_blocks)
    indices = torch.where(k < count[:, None], index(k), 0)
    return count[None, None].int(), indices[None, None].int()


def document_block_mask(inputs: JaggedInputs) -> object:
    """A FlexAttention BlockMask for a batch of documents packed into one sequence, built from the
    offsets directly: each query block visits only the key blocks of the documents it touches;
    key blocks inside the one document of a whole query block are marked full (no mask_mod)."""
    from torch.nn.attention.flex_attention import BlockMask

    q_lengths, kv_lengths = inputs.lengths.q, inputs.lengths.kv
    q_rows, kv_rows = int(q_lengths.sum()), int(kv_lengths.sum())
    q_blocks = -(-q_rows // FLEX_BLOCK)
    kv_offsets = _host_offsets(kv_lengths)
    q_doc, q_pos = _document_ids(q_lengths, q_blocks * FLEX_BLOCK, padding_id=-1)
    kv_blocks = -(-kv_rows // FLEX_BLOCK)
    kv_doc, kv_pos = _document_ids(kv_lengths, kv_blocks * FLEX_BLOCK, padding_id=-2)

    block_start = torch.arange(q_blocks) * FLEX_BLOCK
    last_row = (block_start + FLEX_BLOCK).clamp_max(q_rows) - 1
    first_doc, last_doc = q_doc[block_start], q_doc[last_row]
    kv_lo, kv_hi = kv_offsets[first_doc], kv_offsets[last_doc + 1]
    if inputs.causal:  # the block's last query sees keys up to its own position
        kv_hi = torch.minimum(kv_hi, kv_offsets[last_doc] + q_pos[last_row] + 1)
    lo, hi = kv_lo // FLEX_BLOCK, -(-kv_hi // FLEX_BLOCK)
    # Full blocks: the query block lies in one document and the key block inside that document.
    single_doc = (first_doc == last_doc) & (not inputs.causal)
    full_lo = torch.where(single_doc, (-(-kv_lo // FLEX_BLOCK)).clamp(lo, hi), hi)
    full_hi = torch.where(single_doc, (kv_hi // FLEX_BLOCK).clamp(full_lo, hi), hi)
    # Partial blocks: [lo, full_lo) then [full_hi, hi), as one list per query block.
    before = full_lo - lo
    partial_num, partial_idx = _block_list(
        before + (hi - full_hi),
        lambda k: torch.where(k < before[:, None], lo[:, None] + k, full_hi[:, None] + k - before[:, None]),
        kv_blocks,
    )
    full_num, full_idx = _block_list(full_hi - full_lo, lambda k: full_lo[:, None] + k, kv_blocks)

    device = inputs.key.device
    q_doc, q_pos, kv_doc, kv_pos = (t.to(device) for t in (q_doc, q_pos, kv_doc, kv_pos))

    def same_document(batch: Tensor, head: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        keep = q_doc[q_idx] == kv_doc[kv_idx]
        if inputs.causal:
            keep = keep & (kv_pos[kv_idx] <= q_pos[q_idx])
        return keep

    return BlockMask.from_kv_blocks(
        partial_num.to(device), partial_idx.to(device), full_num.to(device), full_idx.to(device),
        BLOCK_SIZE=FLEX_BLOCK, mask_mod=same_document, seq_lengths=(q_rows, kv_rows),
    )  # fmt: skip


def flex(inputs: JaggedInputs) -> Run:
    """FlexAttention over the packed batch with a document mask (compiled on GPU)."""
    from torch.nn.attention.flex_attention import flex_attention

    block_mask = document_block_mask(inputs)
    attend = torch.compile(flex_attention, dynamic=False) if inputs.key.is_cuda else flex_attention

    def heads_first(x: Tensor) -> Tensor:  # [T, H, D] -> [1, H, T, D]
        return x.transpose(0, 1).unsqueeze(0)

    def run() -> Tensor:
        out = attend(heads_first(_jagged_query(inputs)), heads_first(inputs.key), heads_first(inputs.value),
                     block_mask=block_mask)  # fmt: skip
        return out.squeeze(0).transpose(0, 1)

    return run


def sdpa_padded(inputs: JaggedInputs) -> Run:
    """Pad to [B, H, max_len, D], masked ``scaled_dot_product_attention``, unpad."""
    q_lengths, kv_lengths = inputs.lengths.q, inputs.lengths.kv
    batch, device = len(kv_lengths), inputs.key.device
    max_q, max_kv = inputs.max_seq_len_q, inputs.max_seq_len_kv

    def padded_rows(lengths: Tensor, max_len: int) -> Tensor:
        doc, pos = _document_ids(lengths, int(lengths.sum()), padding_id=0)
        return (doc * max_len + pos).to(device)

    q_rows, kv_rows = padded_rows(q_lengths, max_q), padded_rows(kv_lengths, max_kv)
    key_valid = torch.arange(max_kv) < kv_lengths[:, None]  # [B, max_kv]
    if inputs.causal:
        mask = key_valid[:, None, :] & (torch.arange(max_kv)[None, :] <= torch.arange(max_q)[:, None])
    else:
        mask = key_valid[:, None, :]
    mask = mask[:, None].to(device)  # [B, 1, max_q or 1, max_kv]

    def pad(x: Tensor, rows: Tensor, max_len: int) -> Tensor:  # [T, H, D] -> [B, H, max_len, D]
        padded = x.new_zeros(batch * max_len, *x.shape[1:]).index_copy(0, rows, x)
        return padded.unflatten(0, (batch, max_len)).transpose(1, 2)

    def run() -> Tensor:
        if inputs.broadcast_q:
            query = inputs.query.unsqueeze(0).expand(batch, -1, -1, -1).transpose(1, 2)
        else:
            query = pad(inputs.query, q_rows, max_q)
        key, value = pad(inputs.key, kv_rows, max_kv), pad(inputs.value, kv_rows, max_kv)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(1, 2).flatten(0, 1)
        return out if inputs.broadcast_q else out.index_select(0, q_rows)

    return run


BASELINES: dict[str, Callable[[JaggedInputs], Run]] = {"varlen": varlen, "flex": flex, "sdpa_padded": sdpa_padded}
