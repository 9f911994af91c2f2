"""Jagged rows: `values [total, d]` of B sequences delimited by `offsets [B+1]` (drawn in
gem/models/sequence.py), and the per-row index helpers every jagged op needs."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Jagged(NamedTuple):
    """Packed rows `values [total, d]` of B sequences delimited by `offsets [B+1]`.

    A NamedTuple so that torch.fx can pass it between traced modules (TorchRec's train pipeline
    traces the model's top-level forward).
    """

    values: torch.Tensor
    offsets: torch.Tensor
    max_len: int

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def with_values(self, values: torch.Tensor) -> "Jagged":
        return Jagged(values, self.offsets, self.max_len)


def row_batch_ids(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """The sequence each of the `total` rows belongs to, without a host sync."""
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device), lengths, output_size=total)


def row_positions(offsets: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sequence, position from the sequence's start) of every row."""
    batch_ids = row_batch_ids(offsets, total)
    return batch_ids, torch.arange(total, device=offsets.device) - offsets[batch_ids]


def positions_from_end(offsets: torch.Tensor, total: int) -> torch.Tensor:
    """For every row, how many events came after it in its sequence (0 = most recent)."""
    return offsets[1:][row_batch_ids(offsets, total)] - 1 - torch.arange(total, device=offsets.device)
