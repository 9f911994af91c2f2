"""`data.batch.Batch`: the host-side facts a batch carries so that the step never reads them back
from the GPU."""

from __future__ import annotations

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from data.batch import Batch


def _batch(seq_lengths: list[int], device: str = "cpu", **kwargs) -> Batch:
    n = len(seq_lengths)
    lengths = torch.tensor(seq_lengths * 2, dtype=torch.int64, device=device)  # two event fields
    sequence = KeyedJaggedTensor(keys=["item", "action"], lengths=lengths,
                                 values=torch.zeros(2 * sum(seq_lengths), dtype=torch.int64, device=device))
    sparse = KeyedJaggedTensor(keys=["user"], lengths=torch.ones(n, dtype=torch.int64, device=device),
                               values=torch.arange(n, device=device))
    return Batch(sparse=sparse, sequence=sequence, dense=torch.zeros(n, 2, device=device),
                 labels=torch.zeros(n, 1, device=device), **kwargs)


@pytest.mark.parametrize("seq_lengths, longest", [([3, 0, 7, 1], 7), ([0, 0], 1), ([], 1), ([1], 1)])
def test_the_batch_knows_its_longest_sequence(seq_lengths: list[int], longest: int) -> None:
    batch = _batch(seq_lengths)
    assert batch.sequence_max_len == longest  # at least 1: no kernel sees a zero bound
    assert batch.to("cpu").sequence_max_len == longest  # and keeps it through copies


def test_a_stale_longest_sequence_is_recomputed_from_cpu_lengths() -> None:
    # e.g. dataclasses.replace(batch, sequence=...) copies the old value along
    assert _batch([3, 5], sequence_max_len=9).sequence_max_len == 5
    assert _batch([3, 5], sequence_max_len=2).sequence_max_len == 5


def test_a_batch_built_off_the_cpu_must_be_told_its_longest_sequence() -> None:
    for missing in (-1, 0):
        with pytest.raises(ValueError, match="^Batch.sequence_max_len: must be given"):
            _batch([3, 5], device="meta", sequence_max_len=missing)
    assert _batch([3, 5], device="meta", sequence_max_len=5).sequence_max_len == 5
