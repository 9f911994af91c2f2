"""TorchRec table configs: one table per feature, created on the meta device for DMP to shard."""

from __future__ import annotations

import torch
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, EmbeddingCollection, EmbeddingConfig, KeyedTensor, PoolingType

META = torch.device("meta")


def bag_collection(features: dict[str, int], dim: int, prefix: str) -> EmbeddingBagCollection:
    """Sum-pooled tables, one per feature (`prefix` keeps table names unique across collections)."""
    tables = [
        EmbeddingBagConfig(
            name=f"{prefix}_{name}", embedding_dim=dim, num_embeddings=vocab,
            feature_names=[name], pooling=PoolingType.SUM,
        )
        for name, vocab in features.items()
    ]
    return EmbeddingBagCollection(tables=tables, device=META)


def sequence_collection(features: dict[str, int], dim: int, prefix: str) -> EmbeddingCollection:
    """Unpooled tables: one embedding per event, kept jagged."""
    tables = [
        EmbeddingConfig(name=f"{prefix}_{name}", embedding_dim=dim, num_embeddings=vocab, feature_names=[name])
        for name, vocab in features.items()
    ]
    return EmbeddingCollection(tables=tables, device=META)


def stack_features(pooled: KeyedTensor, names: list[str] | tuple[str, ...]) -> torch.Tensor:
    """Pooled embeddings as tokens `[B, len(names), d]` in the order of `names`.

    A sharded collection returns its keys grouped by sharding type, not in config order, so the
    layout of `pooled.values()` depends on the plan (and hence on the number of ranks).
    """
    return torch.stack([pooled[name] for name in names], dim=1)
