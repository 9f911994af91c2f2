"""DLRM baseline: pooled embeddings + dense MLP -> DCNv2 -> over-arch -> one head per task.

The no-attention baseline: behaviour sequences are sum-pooled into bags, so the model cannot
relate individual events to the candidate ad. With `use_sequence: false` it has no sequence tables at
all and ignores `Batch.sequence` (the "no sequence features" arm of the quality experiments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torchrec.modules.crossnet import LowRankCrossNet
from torchrec.modules.mlp import MLP

from data import Batch, Schema
from gem.models.embeddings import bag_collection, stack_features
from gem.models.heads import TaskHeads


@dataclass
class DLRMConfig:
    name: str = "dlrm"
    embedding_dim: int = 32
    dense_arch: list[int] = field(default_factory=lambda: [64])  # then a projection to embedding_dim
    dcn_layers: int = 2
    dcn_low_rank: int = 64
    over_arch: list[int] = field(default_factory=lambda: [256, 128])
    head_arch: list[int] = field(default_factory=lambda: [64])
    task_weights: dict[str, float] = field(default_factory=dict)
    task_chain: dict[str, str] = field(default_factory=dict)  # task -> its parent (ESMM; heads.TaskHeads)
    use_sequence: bool = True  # false: no sequence tables, the behaviour sequence is ignored


class DLRM(nn.Module):
    """Args:
        cfg: the `model` config section.
        schema: the dataset's feature layout.

    Input: a `Batch`; output: logits `[B, len(schema.tasks)]`.

    Example::

        model = DLRM(DLRMConfig(), dataset.schema)  # tables on meta: shard with DMP before use
    """

    def __init__(self, cfg: DLRMConfig, schema: Schema) -> None:
        super().__init__()
        d = cfg.embedding_dim
        self.sparse_arch = bag_collection(schema.sparse, d, prefix="sparse")
        self.sequence_arch = bag_collection(schema.sequence, d, prefix="seqbag") if cfg.use_sequence else None
        self.sparse_names = list(schema.sparse)
        self.sequence_names = list(schema.sequence) if cfg.use_sequence else []
        self.dense_arch = nn.Sequential(MLP(schema.num_dense, cfg.dense_arch), nn.Linear(cfg.dense_arch[-1], d))
        num_vectors = 1 + len(self.sparse_names) + len(self.sequence_names)
        self.interaction = LowRankCrossNet(num_vectors * d, cfg.dcn_layers, cfg.dcn_low_rank)
        self.over_arch = MLP(num_vectors * d, cfg.over_arch)
        self.heads = TaskHeads(cfg.over_arch[-1], schema.tasks, cfg.head_arch, cfg.task_chain)

    def forward(self, batch: Batch) -> torch.Tensor:
        pooled_sparse = stack_features(self.sparse_arch(batch.sparse), self.sparse_names)  # [B, F, d]
        dense = self.dense_arch(batch.dense)  # [B, d]
        vectors = [dense, pooled_sparse.flatten(1)]
        if self.sequence_arch is not None:
            vectors.append(stack_features(self.sequence_arch(batch.sequence), self.sequence_names).flatten(1))  # [B, S*d]
        x = torch.cat(vectors, dim=1)
        return self.heads(self.over_arch(self.interaction(x)))
