"""GEM: a generative-ads-style ranking model whose user sequences stay jagged end to end.

    non-sequence sparse ──EBC──> one token per feature ─────────────┐
    dense ──linear──> one token ────────────────────────────────────┤
    candidate ad (its features' tokens, summed) ──> target query ───┼─> interaction ─> over-arch ─> heads
    sequence fields ──EC──> per-event embedding (jagged [ΣL, d])    │   (DCNv2 | Wukong)
        ──> N × [jagged self-attention + FFN]                       │
        ──> PMA (k learned queries, broadcast)  ─> [B, k, d] ───────┤
        ──> target-aware attention (ad query)   ─> [B, 2, d] ───────┤  (read-out, ad x read-out)
        ──> K most recent events                ─> [B, K, d] ───────┘

All attention goes through `gem.models.attention` (JFA kernels or a baseline, by config).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torchrec.modules.mlp import MLP

from data import Batch, Schema
from gem.models.attention import AttentionConfig, attention_function
from gem.models.embeddings import bag_collection, sequence_collection, stack_features
from gem.models.heads import TaskHeads
from gem.models.interaction import InteractionConfig, build_interaction
from gem.models.jagged import Jagged, positions_from_end
from gem.models.sequence import LayerStack, TransformerLayer, prepend_tokens
from gem.models.summary import PoolingByAttention, TargetAttention, recent_events
from kernels.common import visible_pairs

# TorchRec's train pipeline traces GEM.forward with torch.fx to find which batch fields feed the
# sharded tables. These helpers branch on and unpack shapes, so the trace records them as opaque calls.
for _helper in ("positions_from_end", "prepend_tokens", "recent_events"):
    torch.fx.wrap(_helper)


@dataclass
class SequenceArchConfig:
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int | None = None  # < num_heads for grouped-query attention; None = num_heads
    causal: bool = False
    window_size: int | None = None  # attend only to events within this many positions
    ffn_mult: int = 2
    cls_tokens: bool = False  # prepend the non-sequence tokens to every sequence


@dataclass
class SummaryConfig:
    pma_queries: int = 4  # learned PMA query tokens (0: no PMA)
    pma_heads: int = 2
    target_attention: bool = True
    target_heads: int = 2
    recent_k: int = 4  # most recent events passed on as tokens (0: none)


@dataclass
class GEMConfig:
    name: str = "gem"
    d_model: int = 64
    event_combine: str = "sum"  # per-event fields: "sum" or "concat" (then a projection)
    sequence: SequenceArchConfig = field(default_factory=SequenceArchConfig)
    summary: SummaryConfig = field(default_factory=SummaryConfig)
    interaction: InteractionConfig = field(default_factory=InteractionConfig)
    over_arch: list[int] = field(default_factory=lambda: [256, 128])
    head_arch: list[int] = field(default_factory=lambda: [64])
    task_weights: dict[str, float] = field(default_factory=dict)
    task_chain: dict[str, str] = field(default_factory=dict)  # task -> its parent (ESMM; heads.TaskHeads)

    def __post_init__(self) -> None:
        if self.event_combine not in ("sum", "concat"):
            raise ValueError(f"model.event_combine must be sum or concat, got {self.event_combine!r}")
        s = self.summary
        if s.pma_queries == 0 and not s.target_attention and s.recent_k == 0 and self.sequence.num_layers == 0:
            raise ValueError("model: the sequence is unused (no layers, no PMA, no target attention, recent_k=0); "
                             "use model=dlrm or the no-sequence experiment instead")


class GEM(nn.Module):
    """Args:
        cfg: the `model` section; attention: the `attention` section (backend); schema: data layout.

    Input: a `Batch`; output: logits `[B, len(schema.tasks)]`.

    Example::

        model = GEM(GEMConfig(d_model=64), AttentionConfig(backend="triton"), dataset.schema)
    """

    def __init__(self, cfg: GEMConfig, attention: AttentionConfig, schema: Schema) -> None:
        super().__init__()
        d, seq_cfg, summ = cfg.d_model, cfg.sequence, cfg.summary
        attend = attention_function(attention)
        self.cfg, self.schema = cfg, schema
        self.candidate = list(schema.candidate)

        self.sparse_arch = bag_collection(schema.sparse, d, prefix="sparse")
        self.sequence_arch = sequence_collection(schema.sequence, d, prefix="seq")
        self.dense_token = nn.Linear(schema.num_dense, d)
        self.event_proj = nn.Linear(len(schema.sequence) * d, d) if cfg.event_combine == "concat" else None
        self.recency = nn.Embedding(schema.seq_max_len, d)
        # At nn.Embedding's N(0, 1) the recency vector would swamp the item / action / time-gap rows
        # (the tables start at U(±1/sqrt(N)), 0.01-0.3): after the LayerNorms every event would look
        # alike and the candidate could not pick its matching items out of the sequence.
        nn.init.normal_(self.recency.weight, std=0.02)

        num_kv_heads = seq_cfg.num_kv_heads or seq_cfg.num_heads
        self.layers = LayerStack(
            TransformerLayer(d, seq_cfg.num_heads, num_kv_heads, seq_cfg.ffn_mult, attend, seq_cfg.causal, seq_cfg.window_size)
            for _ in range(seq_cfg.num_layers)
        )
        self.final_norm = nn.LayerNorm(d)
        self.pma = PoolingByAttention(d, summ.pma_queries, summ.pma_heads, attend) if summ.pma_queries else None
        self.target = TargetAttention(d, summ.target_heads, attend) if summ.target_attention else None

        target_tokens = TargetAttention.num_tokens if summ.target_attention else 0
        self.num_tokens = 1 + len(schema.sparse) + summ.pma_queries + target_tokens + summ.recent_k
        self.interaction = build_interaction(self.num_tokens, d, cfg.interaction)
        self.over_arch = MLP(self.interaction.out_features, cfg.over_arch)
        self.heads = TaskHeads(cfg.over_arch[-1], schema.tasks, cfg.head_arch, cfg.task_chain)

    def embed_events(self, batch: Batch) -> Jagged:
        """Sequence fields -> one d-vector per event (+ a recency embedding), jagged."""
        fields = self.sequence_arch(batch.sequence)  # name -> JaggedTensor, all with the same offsets
        jts = [fields[name] for name in self.schema.sequence]
        if self.event_proj is None:
            values = torch.stack([jt.values() for jt in jts]).sum(0)
        else:
            values = self.event_proj(torch.cat([jt.values() for jt in jts], dim=1))
        offsets = jts[0].offsets()
        recency = positions_from_end(offsets, values.shape[0]).clamp(max=self.schema.seq_max_len - 1)
        # the batch's own longest sequence, not the schema's bound: grids and schedules follow it
        return Jagged(values + self.recency(recency), offsets, batch.sequence_max_len)

    def forward(self, batch: Batch) -> torch.Tensor:
        pooled = self.sparse_arch(batch.sparse)  # KeyedTensor, one [B, d] per feature
        sparse_tokens = stack_features(pooled, list(self.schema.sparse))
        dense_token = self.dense_token(batch.dense).unsqueeze(1)
        non_sequence = torch.cat([dense_token.to(sparse_tokens.dtype), sparse_tokens], dim=1)  # [B, 1+F, d]

        seq = self.embed_events(batch)
        event_starts = seq.offsets[:-1]
        if self.cfg.sequence.cls_tokens:
            seq = prepend_tokens(seq, non_sequence)
            event_starts = seq.offsets[:-1] + non_sequence.shape[1]
        seq = self.layers(seq)
        seq = seq.with_values(self.final_norm(seq.values))

        summaries = []
        if self.pma is not None:
            summaries.append(self.pma(seq))
        if self.target is not None:
            ad = torch.stack([pooled[name] for name in self.candidate]).sum(0)
            summaries.append(self.target(seq, ad))
        if self.cfg.summary.recent_k:
            summaries.append(recent_events(seq, self.cfg.summary.recent_k, event_starts))
        tokens = torch.cat([non_sequence] + [s.to(non_sequence.dtype) for s in summaries], dim=1)
        return self.heads(self.over_arch(self.interaction(tokens)))


@dataclass
class FlopCount:
    """Matmul FLOPs of one forward pass over a batch, split where MFU reports need it."""

    dense: float  # every linear / cross / interaction matmul
    attention: float  # the QKᵀ and PV products over visible pairs

    @property
    def forward(self) -> float:
        return self.dense + self.attention

    @property
    def train(self) -> float:
        # Backward costs 2x the forward matmuls; flash-style attention also recomputes QKᵀ (3.5x).
        return 3.0 * self.dense + 3.5 * self.attention


def _mlp_flops(sizes: list[int]) -> int:
    return sum(2 * a * b for a, b in zip(sizes, sizes[1:]))


def gem_flops(model: GEM, seq_lengths: torch.Tensor) -> FlopCount:
    """Analytic matmul FLOPs of `model`'s forward on a batch whose sequences have `seq_lengths`."""
    cfg, schema = model.cfg, model.schema
    d, s, summ = cfg.d_model, cfg.sequence, cfg.summary
    batch = seq_lengths.numel()
    lengths = seq_lengths.to(torch.int64)
    events = int(lengths.sum())
    num_cls = (1 + len(schema.sparse)) if s.cls_tokens else 0
    rows = events + batch * num_cls
    seq_lengths_cls = lengths + num_cls
    heads, kv_heads = s.num_heads, s.num_kv_heads or s.num_heads
    head_dim = d // heads

    dense = batch * 2 * schema.num_dense * d
    if model.event_proj is not None:
        dense += events * 2 * len(schema.sequence) * d * d
    per_row_layer = 2 * d * (heads + 2 * kv_heads) * head_dim + 2 * d * d + 2 * 2 * d * s.ffn_mult * d
    dense += s.num_layers * rows * per_row_layer
    pairs = int(visible_pairs(seq_lengths_cls, seq_lengths_cls, s.causal, s.window_size).sum())
    attention = s.num_layers * 4 * heads * head_dim * pairs
    if summ.pma_queries:
        dense += rows * 2 * d * 2 * d + batch * summ.pma_queries * 2 * d * d
        attention += 4 * d * summ.pma_queries * int(seq_lengths_cls.sum())
    if summ.target_attention:
        dense += rows * 2 * d * 2 * d + batch * 3 * (2 * d * d)  # kv over the rows; q, out, affinity_out
        attention += 4 * d * int(seq_lengths_cls.sum())

    n = model.num_tokens
    ic = cfg.interaction
    if ic.type == "dcn":
        dense += batch * ic.dcn_layers * 4 * (n * d) * ic.dcn_low_rank
    else:
        n_out = ic.wukong_fm_tokens + ic.wukong_lcb_tokens
        for layer in range(ic.wukong_layers):
            n_in = n if layer == 0 else n_out
            per_example = (4 * n_in * d * ic.wukong_fm_rank
                           + _mlp_flops([n_in * ic.wukong_fm_rank, ic.wukong_mlp, ic.wukong_fm_tokens * d])
                           + 2 * n_in * ic.wukong_lcb_tokens * d
                           + (2 * n_in * n_out * d if n_in != n_out else 0))
            dense += batch * per_example
    dense += batch * _mlp_flops([model.interaction.out_features, *cfg.over_arch])
    dense += batch * len(schema.tasks) * _mlp_flops([cfg.over_arch[-1], *cfg.head_arch, 1])
    return FlopCount(float(dense), float(attention))
