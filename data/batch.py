"""The batch every dataset in `data/` yields and every model in `gem/` consumes."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Iterator

import torch
from torch.utils.data import DataLoader, IterableDataset
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
from torchrec.streamable import Pipelineable


@dataclass
class Batch(Pipelineable):
    """One (per-rank) mini-batch of ranking examples.

    Args:
        sparse: non-sequence categorical features, one key per feature (user attributes, some
            multi-hot, and the candidate ad's id / advertiser / category); `stride() == B`.
        sequence: the user behaviour sequence, one key per event field (item id, action type,
            time-gap bucket). All keys share the same per-example lengths (the sequence length,
            0 for users with no history), events in chronological order, oldest first::

                lengths  [2, 0, 3]           (B = 3)
                offsets  [0, 2, 2, 5]        (B + 1)
                values   [a0 a1 | | c0 c1 c2] (sum(lengths) = 5 per key)

        dense: float32 `[B, num_dense]`.
        labels: float32 `[B, num_tasks]` in {0, 1}.
        sequence_max_len: the longest sequence in this batch, at least 1 (no kernel sees a zero
            bound), a host int. Always computed from the lengths when they are on the CPU (so a
            copy with new sequences cannot keep a stale value); a batch built elsewhere must be
            given it. The attention kernels size their grids and schedules by it, and reading it
            from device lengths would be a host sync in every step.
    """

    sparse: KeyedJaggedTensor
    sequence: KeyedJaggedTensor
    dense: torch.Tensor
    labels: torch.Tensor
    sequence_max_len: int = -1

    def __post_init__(self) -> None:
        # TorchRec's input distribution needs each key's total length on the host. Computed here,
        # where the batch is built on the CPU, it travels with the KJT through pin_memory() and
        # .to(cuda); left for later it is a device->host sync inside every training step.
        for kjt in (self.sparse, self.sequence):
            if kjt.values().device.type == "cpu":
                kjt.sync()
        lengths = self.sequence.lengths()
        if lengths.device.type == "cpu":
            self.sequence_max_len = max(int(lengths.max()) if lengths.numel() else 0, 1)
        elif self.sequence_max_len < 1:
            raise ValueError("Batch.sequence_max_len: must be given (>= 1) for a batch built off the CPU "
                             "(reading device lengths would stall the stream)")

    @property
    def batch_size(self) -> int:
        return self.dense.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        return Batch(
            sparse=self.sparse.to(device=device, non_blocking=non_blocking),
            sequence=self.sequence.to(device=device, non_blocking=non_blocking),
            dense=self.dense.to(device=device, non_blocking=non_blocking),
            labels=self.labels.to(device=device, non_blocking=non_blocking),
            sequence_max_len=self.sequence_max_len,
        )

    def record_stream(self, stream: torch.Stream) -> None:
        """Keep the tensors alive until `stream`'s work on them is done (TorchRec's train pipelines
        copy and distribute a batch on side streams)."""
        for kjt in (self.sparse, self.sequence):
            kjt.record_stream(stream)
        self.dense.record_stream(stream)
        self.labels.record_stream(stream)

    def pin_memory(self) -> "Batch":
        """Called by DataLoader(pin_memory=True) so that `.to(cuda, non_blocking=True)` is async."""
        return Batch(
            sparse=self.sparse.pin_memory(),
            sequence=self.sequence.pin_memory(),
            dense=self.dense.pin_memory(),
            labels=self.labels.pin_memory(),
            sequence_max_len=self.sequence_max_len,
        )


def _ignore_sigterm(worker_id: int) -> None:
    """A scheduler's preemption notice (SIGTERM) often goes to the whole process group: the data
    workers must outlive it, so that the trainer can finish its step and write the preemption
    checkpoint instead of dying on "DataLoader worker ... killed by signal: Terminated". The
    trainer still stops them (its shutdown path), and they exit when it dies (PyTorch's watchdog)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def load_batches(stream: IterableDataset, num_workers: int) -> Iterator[Batch]:
    """Iterate over a dataset's ready-made batches, produced by `num_workers` processes (0: in this
    one), pinned when a GPU is present so that `Batch.to(cuda, non_blocking=True)` is async."""
    loader = DataLoader(stream, batch_size=None, num_workers=num_workers, pin_memory=torch.cuda.is_available(),
                        worker_init_fn=_ignore_sigterm if num_workers else None)
    return iter(loader)
