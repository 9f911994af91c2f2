"""What a dataset promises the model: feature names, vocabularies, dense width, tasks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schema:
    """Feature layout shared by a dataset and the models built for it.

    Args:
        sparse: non-sequence categorical features, name -> vocabulary size (keys of `Batch.sparse`,
            in this order).
        candidate: the names in `sparse` that describe the candidate ad (ad id first).
        sequence: per-event sequence fields, name -> vocabulary size (keys of `Batch.sequence`, in
            this order; item id first).
        num_dense: width of `Batch.dense`.
        tasks: label columns of `Batch.labels`, in order.
        seq_max_len: no sequence is longer than this.
    """

    sparse: dict[str, int]
    candidate: tuple[str, ...]
    sequence: dict[str, int]
    num_dense: int
    tasks: tuple[str, ...]
    seq_max_len: int

    def __post_init__(self) -> None:
        missing = [name for name in self.candidate if name not in self.sparse]
        if missing:
            raise ValueError(f"Schema.candidate: {missing} are not sparse features")
        if not self.sequence:
            raise ValueError("Schema.sequence: at least one sequence field is required")
