"""The DLRM baseline's `use_sequence` switch: with it off there are no sequence tables and the
behaviour sequence cannot change a prediction; with it on (the default) it does."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torchrec import EmbeddingBagCollection

from data.synthetic import SyntheticConfig, SyntheticDataset
from gem.models.dlrm import DLRM, DLRMConfig
from gem.models.heads import weighted_bce


def batches():
    """Two batches with the same examples except for their behaviour sequences (another data seed
    draws other sequences; the non-sequence features are swapped in from the first batch)."""
    def first(seed: int):
        cfg = SyntheticConfig(batch_size=16, eval_examples=16, seed=seed)
        cfg.seq.max_len, cfg.seq.empty_share = 8, 0.0
        data = SyntheticDataset(cfg)
        return data.schema, next(data.train_batches())
    schema, batch = first(0)
    _, other = first(1)
    return schema, batch, dataclasses.replace(batch, sequence=other.sequence)


def small_dlrm(schema, use_sequence: bool) -> DLRM:
    torch.manual_seed(0)
    model = DLRM(DLRMConfig(embedding_dim=8, dense_arch=[8], dcn_layers=1, dcn_low_rank=4, over_arch=[16],
                            head_arch=[8], use_sequence=use_sequence), schema)
    for module in model.modules():  # unsharded: real storage for the meta tables
        if isinstance(module, EmbeddingBagCollection):
            module.to_empty(device="cpu")
            for table in module.parameters():
                torch.nn.init.uniform_(table, -0.5, 0.5)
    return model


@pytest.mark.parametrize("use_sequence", [True, False])
def test_sequence_switch(use_sequence: bool) -> None:
    schema, batch, swapped = batches()
    assert not torch.equal(batch.sequence.values(), swapped.sequence.values())
    model = small_dlrm(schema, use_sequence)
    tables = {name for name, _ in model.named_parameters() if "embedding_bags" in name}
    assert any("seqbag" in name for name in tables) == use_sequence
    assert any("sparse_" in name for name in tables)

    logits = model(batch)
    assert logits.shape == (16, len(schema.tasks)) and torch.isfinite(logits).all()
    sequence_matters = not torch.allclose(logits, model(swapped))
    assert sequence_matters == use_sequence

    weighted_bce(logits, batch.labels, torch.ones(len(schema.tasks))).backward()
    assert all(p.grad is not None for p in model.parameters())
