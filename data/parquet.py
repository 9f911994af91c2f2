"""Ranking examples from Parquet files with a declared schema, streamed with pyarrow.

Format: one row per example; the config (`FeaturesConfig`) names the columns of each kind, and the
column names become the feature names. Other columns are ignored.

    sparse      integer scalar (one id), or list<integer> if named in `multi_hot` (any number of ids)
    sequence    list<integer> per event field, oldest event first; the lists of one row have equal
                length (the number of events, 0 for no history)
    dense       integer or floating scalar, served as float32
    labels      integer, floating or boolean scalar in {0, 1}, one column per task

Ids lie in [0, vocab). A sequence longer than `seq_max_len` keeps its most recent `seq_max_len`
events (the last ones of each list).

Order (a function of the files and the seed only: the same for every world size and worker count)::

    files       the union of the `train` / `eval` glob matches under `root`, sorted by path
    epoch e     the valid rows of the row groups, in file and row-group order; with
                shuffle_row_groups the row groups are permuted by (seed, e); with shuffle_window = S > 0
                the epoch is cut into windows of S consecutive rows, each permuted by (seed, e, window)
    train       epochs 0, 1, 2, ... back to back (a batch may span two epochs); global step s takes
                stream rows [s B, (s+1) B) and rank r of W the contiguous B / W of them at s B + r B / W
    eval        one pass over the eval files in file order, never shuffled, in global batches of B;
                the last, shorter batch is split evenly over the ranks, leaving out its last
                (rows mod W) < W rows so that every rank runs the same number of equal batches

Bad data. Before anything is served, `ParquetDataset` checks every file's Arrow schema against the
config (a missing column, a wrong type, a list where a scalar is declared or the reverse raise
`ParquetSchemaError` naming the column and the file) and then reads every row group once to find
the malformed rows. A row is malformed for the first of these reasons it has (`BAD_ROW_REASONS`):

    null                        a null value, list or list element in a declared column
    id_out_of_range             a sparse or sequence id outside [0, vocab)
    sequence_length_mismatch    the sequence lists of the row differ in length
    non_finite_dense            a NaN or infinite dense value
    label_not_binary            a label other than 0 or 1

`bad_rows: fail` raises `BadRowError` at the first one (file, row, column, reason, value);
`bad_rows: skip` leaves them out of every epoch, counts them per split and reason
(`ParquetDataset.bad_row_counts`), and logs the counts with the first offender of each reason.
Because this happens up front, the positions of the valid rows are known: resuming at a step seeks
through row-group counts instead of re-reading the skipped data, and nothing fails mid-epoch.

Memory: a reader holds one row group (decoded, the declared columns only) and one shuffle window;
every rank and DataLoader worker reads the whole split each epoch and keeps its own rows.
"""

from __future__ import annotations

import glob
import itertools
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from data.batch import Batch, load_batches
from data.schema import Schema

log = logging.getLogger(__name__)

BAD_ROW_REASONS = ("null", "id_out_of_range", "sequence_length_mismatch", "non_finite_dense", "label_not_binary")
SPLITS = ("train", "eval")


class ParquetSchemaError(ValueError):
    """A file's columns do not match the declared schema."""


class BadRowError(ValueError):
    """A malformed row under `bad_rows: fail`."""


# --------------------------------------------------------------------------------------- config


@dataclass
class FeaturesConfig:
    """Which columns feed which part of a `Batch`; column names are the feature names.

    Args:
        sparse: non-sequence categorical columns, name -> vocabulary size, in `Batch.sparse` order.
        multi_hot: the `sparse` columns that hold list<integer> (several ids per example).
        candidate: the `sparse` columns that describe the candidate ad (ad id first).
        sequence: list<integer> event fields, name -> vocabulary size (item id first).
        dense: numeric columns, in `Batch.dense` order.
        labels: binary label columns, one per task, in `Batch.labels` order.
    """

    sparse: dict[str, int] = field(default_factory=dict)
    multi_hot: list[str] = field(default_factory=list)
    candidate: list[str] = field(default_factory=list)
    sequence: dict[str, int] = field(default_factory=dict)
    dense: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for group in ("sparse", "sequence"):
            for name, size in getattr(self, group).items():
                if size < 1:
                    raise ValueError(f"data.features.{group}.{name}: vocabulary size must be >= 1, got {size}")
        for group in ("multi_hot", "candidate"):
            stray = [name for name in getattr(self, group) if name not in self.sparse]
            if stray:
                raise ValueError(f"data.features.{group}: {stray} are not in data.features.sparse")
        counts = Counter(self.columns)
        repeated = sorted(name for name, n in counts.items() if n > 1)
        if repeated:
            raise ValueError(f"data.features: columns {repeated} are declared more than once")

    @property
    def columns(self) -> list[str]:
        """Every declared column, in validation order: sparse, sequence, dense, labels."""
        return [*self.sparse, *self.sequence, *self.dense, *self.labels]


@dataclass
class ParquetConfig:
    """The `data` config section of a Parquet dataset (`conf/data/movielens.yaml` is an example).

    Args:
        name: dataset selector for `data.build_dataset`.
        batch_size: GLOBAL examples per step, over all ranks; divisible by the world size.
        seed: fixes the shuffle order.
        num_workers: DataLoader worker processes per rank (0: read in the training process).
        root: directory that relative `train` / `eval` patterns are resolved against.
        train, eval: file paths or glob patterns; each must match at least one file.
        features: the declared schema.
        seq_max_len: longer sequences keep their most recent `seq_max_len` events.
        shuffle_window: rows per training shuffle window (0: file order).
        shuffle_row_groups: permute the training row groups every epoch.
        bad_rows: `skip` (count and leave out malformed rows) or `fail` (raise at the first one).
    """

    name: str = "parquet"
    batch_size: int = 256
    seed: int = 0
    num_workers: int = 0
    root: str = "."
    train: list[str] = field(default_factory=list)
    eval: list[str] = field(default_factory=list)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    seq_max_len: int = 64
    shuffle_window: int = 0
    shuffle_row_groups: bool = False
    bad_rows: str = "skip"

    def __post_init__(self) -> None:
        checks = (
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("seed", self.seed >= 0, ">= 0"),
            ("num_workers", self.num_workers >= 0, ">= 0"),
            ("seq_max_len", self.seq_max_len >= 1, ">= 1"),
            ("shuffle_window", self.shuffle_window >= 0, ">= 0"),
            ("bad_rows", self.bad_rows in ("skip", "fail"), "'skip' or 'fail'"),
        )
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"data.{name} must be {expected}, got {getattr(self, name)!r}")


# ------------------------------------------------------------------------------ schema check


def _find_files(root: str, patterns: list[str], split: str) -> list[str]:
    """The sorted union of the files matched by `patterns` (relative ones under `root`)."""
    files: set[str] = set()
    for pattern in patterns:
        path = os.path.join(root, pattern)  # an absolute pattern ignores root
        matches = [m for m in glob.glob(path, recursive=True) if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"data.{split}: {pattern!r} matches no file (looked for {path!r})")
        files.update(os.path.abspath(m) for m in matches)
    return sorted(files)


def _is_int_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


# column kind -> (what the error message asks for, the Arrow types that serve it)
_KINDS = {
    "sparse": ("an integer scalar", pa.types.is_integer),
    "multi_hot": ("list<integer> (multi_hot)", _is_int_list),
    "sequence": ("list<integer> (sequence field)", _is_int_list),
    "dense": ("an integer or floating scalar (dense)", _is_number),
    "label": ("an integer, floating or boolean scalar (label)", lambda t: _is_number(t) or pa.types.is_boolean(t)),
}


def _check_schema(path: str, schema: pa.Schema, features: FeaturesConfig) -> None:
    kinds = {
        **{name: "multi_hot" if name in features.multi_hot else "sparse" for name in features.sparse},
        **dict.fromkeys(features.sequence, "sequence"),
        **dict.fromkeys(features.dense, "dense"),
        **dict.fromkeys(features.labels, "label"),
    }
    for name, kind in kinds.items():
        wanted, serves = _KINDS[kind]
        index = schema.get_field_index(name)
        if index < 0:
            raise ParquetSchemaError(f"{path}: column {name!r} is missing (declared as {wanted})")
        t = schema.field(index).type
        if not serves(t):
            hint = ""
            if kind == "sparse" and _is_int_list(t):
                hint = "; name it in data.features.multi_hot if it is a multi-hot feature"
            raise ParquetSchemaError(f"{path}: column {name!r} has type {t}, expected {wanted}{hint}")


# ------------------------------------------------------------------------------- bad rows


def _numbers(array: pa.Array) -> np.ndarray:
    """The values as numpy, nulls read as 0 (they are flagged separately)."""
    if pa.types.is_boolean(array.type):
        array = pc.cast(array, pa.int8())
    return pc.fill_null(array, 0).to_numpy(zero_copy_only=False)


def _flat(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The list elements (null lists hold none) and, per element, the index of its row."""
    lengths = _numbers(pc.list_value_length(column))
    return pc.list_flatten(column), np.repeat(np.arange(len(column)), lengths)


def _rows_with(flags: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """[n] bool: rows that own at least one flagged list element."""
    out = np.zeros(n, dtype=bool)
    out[rows[flags]] = True
    return out


def _find_bad_rows(table: pa.Table, features: FeaturesConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the reason it is malformed (1 + index into BAD_ROW_REASONS, 0 if valid) and the
    index into `features.columns` of the column at fault (the first one, for the first reason)."""
    n = table.num_rows
    columns = features.columns
    arrays = {name: table.column(name).combine_chunks() for name in columns}
    lists = {*features.multi_hot, *features.sequence}
    reason = np.zeros(n, dtype=np.int8)
    culprit = np.full(n, -1, dtype=np.int16)

    def flag(code: str, name: str, bad: np.ndarray) -> None:
        new = bad & (reason == 0)
        reason[new] = BAD_ROW_REASONS.index(code) + 1
        culprit[new] = columns.index(name)

    flat = {name: _flat(arrays[name]) for name in lists}
    for name in columns:
        bad = arrays[name].is_null().to_numpy(zero_copy_only=False)
        if name in lists:
            values, rows = flat[name]
            bad |= _rows_with(values.is_null().to_numpy(zero_copy_only=False), rows, n)
        flag("null", name, bad)
    for name, vocab in {**features.sparse, **features.sequence}.items():
        if name in lists:
            values, rows = flat[name]
            ids = _numbers(values)
            flag("id_out_of_range", name, _rows_with((ids < 0) | (ids >= vocab), rows, n))
        else:
            ids = _numbers(arrays[name])
            flag("id_out_of_range", name, (ids < 0) | (ids >= vocab))
    first, *others = features.sequence
    length = _numbers(pc.list_value_length(arrays[first]))
    for name in others:
        flag("sequence_length_mismatch", name, _numbers(pc.list_value_length(arrays[name])) != length)
    for name in features.dense:
        flag("non_finite_dense", name, ~np.isfinite(_numbers(arrays[name]).astype(np.float64)))
    for name in features.labels:
        label = _numbers(arrays[name]).astype(np.float64)
        flag("label_not_binary", name, (label != 0) & (label != 1))
    return reason, culprit


def _describe(value: object) -> str:
    """repr, cut to 80 characters (a list value may be long)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ------------------------------------------------------------------------------------ index


@dataclass(frozen=True)
class _RowGroup:
    file: int  # index into _SplitIndex.files
    index: int  # row group within the file
    valid_rows: int


@dataclass
class _SplitIndex:
    """The row groups of one split that hold valid rows, in file order, and the bad-row counts."""

    files: list[str]
    row_groups: list[_RowGroup]
    bad_rows: dict[str, int]

    @property
    def num_rows(self) -> int:
        return sum(rg.valid_rows for rg in self.row_groups)


def _index_split(files: list[str], features: FeaturesConfig, policy: str) -> _SplitIndex:
    columns = features.columns
    row_groups: list[_RowGroup] = []
    counts = np.zeros(len(BAD_ROW_REASONS) + 1, dtype=np.int64)  # [0]: valid rows
    first_seen: dict[str, str] = {}
    for f, path in enumerate(files):
        parquet = pq.ParquetFile(path)
        start = 0  # row of the file where the row group begins
        for g in range(parquet.num_row_groups):
            table = parquet.read_row_group(g, columns=columns)
            reason, culprit = _find_bad_rows(table, features)

            def where(i: int) -> str:
                column = columns[culprit[i]]
                code, value = BAD_ROW_REASONS[reason[i] - 1], _describe(table.column(column)[i].as_py())
                return f"{path}: row {start + i} (row group {g}): {code} in column {column!r}, value {value}"

            bad = np.flatnonzero(reason)
            if len(bad) and policy == "fail":
                raise BadRowError(f"{where(int(bad[0]))} (data.bad_rows=fail; data.bad_rows=skip leaves such rows out)")
            for code in np.unique(reason[bad]):
                first_seen.setdefault(BAD_ROW_REASONS[code - 1], where(int(bad[reason[bad] == code][0])))
            per_reason = np.bincount(reason, minlength=len(counts))
            counts += per_reason
            if per_reason[0]:
                row_groups.append(_RowGroup(f, g, int(per_reason[0])))
            start += table.num_rows
    bad_rows = {code: int(n) for code, n in zip(BAD_ROW_REASONS, counts[1:]) if n}
    for code, where_first in first_seen.items():
        log.warning("skipping %d malformed rows (%s); the first: %s", bad_rows[code], code, where_first)
    return _SplitIndex(files, row_groups, bad_rows)


# ---------------------------------------------------------------------------------- reading


class _RowStream:
    """Rows of one split by stream position (train: epochs back to back), read lazily.

    Positions within an epoch are cut into windows: shuffle windows, or the row groups themselves
    when there is no shuffle window. A window is read from the row groups that overlap it.
    """

    def __init__(self, index: _SplitIndex, cfg: ParquetConfig, shuffle: bool) -> None:
        self.index, self.cfg, self.shuffle = index, cfg, shuffle
        self.epoch_rows = index.num_rows
        self._file: tuple[int, pq.ParquetFile] | None = None  # one open file at a time
        self._plan: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._row_group: tuple[int, pa.Table] | None = None
        self._window: tuple[tuple[int, int], pa.Table] | None = None

    def rows(self, lo: int, hi: int) -> pa.Table:
        """The rows at stream positions [lo, hi)."""
        parts = []
        while lo < hi:
            epoch, offset = divmod(lo, self.epoch_rows)
            _, _, _, edges = self._epoch_plan(epoch)
            w = int(np.searchsorted(edges, offset, side="right")) - 1
            n = min(hi - lo, int(edges[w + 1]) - offset)
            parts.append(self._read_window(epoch, w).slice(offset - int(edges[w]), n))
            lo += n
        return pa.concat_tables(parts)

    def _epoch_plan(self, epoch: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(epoch, row-group order, first position of each of them [+ end], window edges)."""
        if self._plan is None or self._plan[0] != epoch:
            k = len(self.index.row_groups)
            order = np.arange(k)
            if self.shuffle and self.cfg.shuffle_row_groups:
                order = np.random.default_rng([self.cfg.seed, 0, epoch]).permutation(k)
            sizes = np.array([self.index.row_groups[i].valid_rows for i in order], dtype=np.int64)
            starts = np.concatenate([[0], np.cumsum(sizes)])
            window = self.cfg.shuffle_window if self.shuffle else 0
            edges = np.append(np.arange(0, self.epoch_rows, window), self.epoch_rows) if window else starts
            self._plan = (epoch, order, starts, edges)
        return self._plan

    def _read_window(self, epoch: int, w: int) -> pa.Table:
        if self._window is None or self._window[0] != (epoch, w):
            _, order, starts, edges = self._epoch_plan(epoch)
            lo, hi = int(edges[w]), int(edges[w + 1])
            first = int(np.searchsorted(starts, lo, side="right")) - 1
            last = int(np.searchsorted(starts, hi, side="left"))
            table = pa.concat_tables([self._read_row_group(int(order[i])) for i in range(first, last)])
            table = table.slice(lo - int(starts[first]), hi - lo)
            if self.shuffle and self.cfg.shuffle_window:
                table = table.take(np.random.default_rng([self.cfg.seed, 1, epoch, w]).permutation(hi - lo))
            self._window = ((epoch, w), table)
        return self._window[1]

    def _read_row_group(self, i: int) -> pa.Table:
        """The valid rows of row group i of the index."""
        if self._row_group is None or self._row_group[0] != i:
            rg = self.index.row_groups[i]
            if self._file is None or self._file[0] != rg.file:
                self._file = (rg.file, pq.ParquetFile(self.index.files[rg.file]))
            features = self.cfg.features
            table = self._file[1].read_row_group(rg.index, columns=features.columns)
            reason, _ = _find_bad_rows(table, features)
            table = table.filter(pa.array(reason == 0))
            if table.num_rows != rg.valid_rows:
                raise RuntimeError(f"{self.index.files[rg.file]} changed since it was indexed (row group {rg.index})")
            self._row_group = (i, table)
        return self._row_group[1]


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    return column.combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)


def _list_ids(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of a list<integer> column as int64."""
    array = column.combine_chunks()
    values = pc.list_flatten(array).to_numpy(zero_copy_only=False).astype(np.int64)
    return values, pc.list_value_length(array).to_numpy(zero_copy_only=False).astype(np.int64)


def _to_batch(table: pa.Table, cfg: ParquetConfig) -> Batch:
    """A Batch of valid rows; sequences truncated to their last `seq_max_len` events."""
    features, n = cfg.features, table.num_rows
    values, lengths = [], []
    for name in features.sparse:
        if name in features.multi_hot:
            v, length = _list_ids(table.column(name))
        else:
            v, length = _ids(table.column(name)), np.ones(n, dtype=np.int64)
        values.append(v)
        lengths.append(length)
    sparse = KeyedJaggedTensor(
        keys=list(features.sparse),
        values=torch.from_numpy(np.concatenate(values)),
        lengths=torch.from_numpy(np.concatenate(lengths)),
    )

    fields = {name: _list_ids(table.column(name)) for name in features.sequence}
    full = next(iter(fields.values()))[1]  # equal for every field of a valid row
    kept = np.minimum(full, cfg.seq_max_len)
    ends = np.cumsum(full)
    # element j of row i's kept tail sits at ends[i] - kept[i] + j in the flat values
    out_starts = np.cumsum(kept) - kept
    take = np.repeat(ends - kept - out_starts, kept) + np.arange(int(kept.sum()))
    sequence = KeyedJaggedTensor(
        keys=list(features.sequence),
        values=torch.from_numpy(np.concatenate([v[take] for v, _ in fields.values()])),
        lengths=torch.from_numpy(np.tile(kept, len(fields))),
    )

    def stack(names: list[str]) -> torch.Tensor:
        columns = [table.column(name).combine_chunks().to_numpy(zero_copy_only=False) for name in names]
        if not columns:
            return torch.zeros((n, 0))
        return torch.from_numpy(np.stack(columns, axis=1).astype(np.float32))

    return Batch(sparse=sparse, sequence=sequence, dense=stack(features.dense), labels=stack(features.labels))


class _StepStream(IterableDataset):
    """This rank's batches of global steps start, start + 1, ... (< stop, or forever if stop is None).

    DataLoader worker w of n builds steps start + w, start + w + n, ... with its own readers; the
    DataLoader reads its workers round-robin, so the order is the same for every number of workers.
    """

    def __init__(
        self,
        index: _SplitIndex,
        cfg: ParquetConfig,
        train: bool,
        start: int,
        stop: int | None,
        rank: int,
        world_size: int,
    ) -> None:
        self.index, self.cfg, self.train = index, cfg, train
        self.start, self.stop, self.rank, self.world_size = start, stop, rank, world_size

    def rank_rows(self, step: int) -> tuple[int, int]:
        """Stream positions [lo, hi) of this rank's share of global step `step`."""
        size = self.cfg.batch_size // self.world_size
        if not self.train:  # the last eval batch may be short: split what there is evenly
            size = min(size, (self.index.num_rows - step * self.cfg.batch_size) // self.world_size)
        lo = step * self.cfg.batch_size + self.rank * size
        return lo, lo + size

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        first = self.start + worker
        steps = itertools.count(first, num_workers) if self.stop is None else range(first, self.stop, num_workers)
        rows = _RowStream(self.index, self.cfg, shuffle=self.train)
        for step in steps:
            yield _to_batch(rows.rows(*self.rank_rows(step)), self.cfg)


# ---------------------------------------------------------------------------------- dataset


class ParquetDataset:
    """Examples from Parquet files (format, order and bad-row policy in the module docstring).

    Args:
        cfg: the `data` config section.
        rank, world_size: this process's place among the data-parallel ranks; each rank reads a
            disjoint, contiguous shard of every global batch and the union is the 1-rank stream.

    Raises:
        FileNotFoundError: a `train` / `eval` pattern matches no file.
        ParquetSchemaError: a file lacks a declared column or has the wrong type for it.
        BadRowError: a malformed row under `bad_rows: fail`.

    Example::

        ds = ParquetDataset(ParquetConfig(root="/data/ml", train=["train/*.parquet"],
                                          eval=["eval/*.parquet"], features=...), rank=0, world_size=2)
        batch = next(ds.train_batches())  # B / 2 examples: rows 0 .. B/2 - 1 of step 0
        ds.bad_row_counts()                # {"train": {"null": 3}, "eval": {}}
    """

    def __init__(self, cfg: ParquetConfig, rank: int = 0, world_size: int = 1) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        if cfg.batch_size % world_size:
            raise ValueError(
                f"data.batch_size={cfg.batch_size} is the global batch and must be divisible by the "
                f"world size {world_size}"
            )
        # required here, not in the dataclasses: their empty defaults must construct for OmegaConf
        features = cfg.features
        required = {
            "train": cfg.train,
            "eval": cfg.eval,
            "features.candidate": features.candidate,
            "features.sequence": features.sequence,
            "features.labels": features.labels,
        }
        for key, value in required.items():
            if not value:
                raise ValueError(f"data.{key} must not be empty")
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self._schema = Schema(
            sparse=dict(features.sparse),
            candidate=tuple(features.candidate),
            sequence=dict(features.sequence),
            num_dense=len(features.dense),
            tasks=tuple(features.labels),
            seq_max_len=cfg.seq_max_len,
        )
        files = {split: _find_files(cfg.root, getattr(cfg, split), split) for split in SPLITS}
        for split in SPLITS:  # every schema before any data: a typo fails in seconds
            for path in files[split]:
                try:
                    schema = pq.read_schema(path)
                except pa.ArrowException as err:
                    raise ParquetSchemaError(f"{path}: not a readable Parquet file ({err})") from err
                _check_schema(path, schema, features)
        start = time.perf_counter()
        self._index = {split: _index_split(files[split], features, cfg.bad_rows) for split in SPLITS}
        for split in SPLITS:
            if self._index[split].num_rows == 0:
                raise ValueError(f"data.{split}: no valid rows in {files[split]}")
        if self.eval_steps == 0:
            raise ValueError(f"data.eval: {self._index['eval'].num_rows} valid rows, fewer than the {world_size} ranks")
        log.info(
            "parquet: %d train rows in %d files, %d eval rows in %d files, bad rows %s (indexed in %.1f s)",
            self._index["train"].num_rows, len(files["train"]), self._index["eval"].num_rows,
            len(files["eval"]), self.bad_row_counts(), time.perf_counter() - start,
        )

    @property
    def schema(self) -> Schema:
        return self._schema

    @property
    def train_rows(self) -> int:
        """Valid rows in one training epoch."""
        return self._index["train"].num_rows

    @property
    def eval_steps(self) -> int:
        """Global batches in the eval split (the last one may be short)."""
        rows, batch = self._index["eval"].num_rows, self.cfg.batch_size
        return rows // batch + int((rows % batch) // self.world_size > 0)

    @property
    def eval_size(self) -> int:
        """Eval examples served per pass, over all ranks: the valid eval rows less < W left out."""
        rows, batch = self._index["eval"].num_rows, self.cfg.batch_size
        return rows // batch * batch + (rows % batch) // self.world_size * self.world_size

    def bad_row_counts(self) -> dict[str, dict[str, int]]:
        """Malformed rows left out, per split and reason (empty under `bad_rows: fail`)."""
        return {split: dict(self._index[split].bad_rows) for split in SPLITS}

    def train_batches(self, start_step: int = 0) -> Iterator[Batch]:
        """This rank's batches of global steps start_step, start_step + 1, ... forever.

        A run resumed at step s passes start_step=s and continues the stream exactly.
        """
        stream = _StepStream(self._index["train"], self.cfg, True, start_step, None, self.rank, self.world_size)
        return self._load(stream)

    def eval_batches(self) -> Iterator[Batch]:
        """This rank's share of each of the `eval_steps` global batches of the eval split."""
        stream = _StepStream(self._index["eval"], self.cfg, False, 0, self.eval_steps, self.rank, self.world_size)
        return self._load(stream)

    def bayes_ne(self) -> None:
        """Real data: the optimum is unknown."""
        return None

    def bayes_calibration(self) -> None:
        """Real data: the true probabilities are unknown."""
        return None

    def eval_true_probabilities(self) -> None:
        """Real data: the true probabilities are unknown."""
        return None

    def _load(self, stream: _StepStream) -> Iterator[Batch]:
        return load_batches(stream, self.cfg.num_workers)
