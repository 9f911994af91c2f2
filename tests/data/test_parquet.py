"""Parquet datasets: values and KJT validity, rank sharding, order and resume, schema errors, bad rows."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from omegaconf import OmegaConf

from data import Batch, ParquetConfig, ParquetDataset, build_dataset
from data.parquet import BAD_ROW_REASONS, BadRowError, FeaturesConfig, ParquetSchemaError

ROWS = 50
SEQ_MAX_LEN = 3
# row_id identifies a row in the batches: it is a sparse feature with one id per row
ARROW_SCHEMA = pa.schema(
    [
        ("row_id", pa.int64()),
        ("user", pa.int32()),
        ("interests", pa.list_(pa.int32())),
        ("ad", pa.int64()),
        ("seq_item", pa.list_(pa.int64())),
        ("seq_action", pa.list_(pa.int8())),
        ("x_float", pa.float64()),
        ("x_int", pa.int32()),
        ("click", pa.bool_()),
        ("conversion", pa.int8()),
        ("comment", pa.string()),  # not declared: ignored
    ]
)
FEATURES = FeaturesConfig(
    sparse={"row_id": ROWS, "user": 7, "interests": 5, "ad": 11},
    multi_hot=["interests"],
    candidate=["ad"],
    sequence={"seq_item": 13, "seq_action": 3},
    dense=["x_float", "x_int"],
    labels=["click", "conversion"],
)


def make_rows(n: int = ROWS, seed: int = 0) -> list[dict]:
    """Valid rows; some with no interests or no history, some with more than SEQ_MAX_LEN events."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        length = int(rng.integers(0, 6))
        click = bool(rng.integers(0, 2))
        rows.append(
            {
                "row_id": i,
                "user": int(rng.integers(0, 7)),
                "interests": rng.integers(0, 5, int(rng.integers(0, 4))).tolist(),
                "ad": int(rng.integers(0, 11)),
                "seq_item": rng.integers(0, 13, length).tolist(),
                "seq_action": rng.integers(0, 3, length).tolist(),
                "x_float": float(rng.normal()),
                "x_int": int(rng.integers(-3, 4)),
                "click": click,
                "conversion": int(click and rng.integers(0, 2)),
                "comment": f"row {i}",
            }
        )
    return rows


def write(path: Path, rows: list[dict], row_group_size: int = 7, schema: pa.Schema = ARROW_SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size)
    return path


def dataset_dir(tmp_path: Path, rows: list[dict] | None = None, eval_rows: int = 23) -> Path:
    """train: rows split over two files (sorted names: b/ before c/); eval: the first `eval_rows`."""
    rows = make_rows() if rows is None else rows
    write(tmp_path / "train" / "c.parquet", rows[30:])
    write(tmp_path / "train" / "b.parquet", rows[:30])
    write(tmp_path / "eval.parquet", make_rows(seed=1)[:eval_rows], row_group_size=5)
    return tmp_path


def config(root: Path, **overrides) -> ParquetConfig:
    base = ParquetConfig(
        batch_size=10, root=str(root), train=["train/*.parquet"], eval=["eval.parquet"],
        features=FEATURES, seq_max_len=SEQ_MAX_LEN,
    )
    return dataclasses.replace(base, **overrides)


def take(batches, n: int) -> list[Batch]:
    return list(itertools.islice(batches, n))


def row_ids(batches: list[Batch]) -> list[int]:
    return [int(v) for b in batches for v in b.sparse["row_id"].values()]


def assert_same_rows(parts: list[Batch], whole: Batch) -> None:
    """The batches in `parts`, concatenated in order, hold exactly the rows of `whole`."""
    for kjt in ("sparse", "sequence"):
        for key in getattr(whole, kjt).keys():
            for field in ("lengths", "values"):
                joined = torch.cat([getattr(getattr(p, kjt)[key], field)() for p in parts])
                assert torch.equal(joined, getattr(getattr(whole, kjt)[key], field)()), (kjt, key, field)
    assert torch.equal(torch.cat([p.dense for p in parts]), whole.dense)
    assert torch.equal(torch.cat([p.labels for p in parts]), whole.labels)


# ------------------------------------------------------------------------------------ values


def test_batches_hold_the_rows_in_file_order_as_valid_kjts(tmp_path: Path) -> None:
    rows = make_rows()
    ds = ParquetDataset(config(dataset_dir(tmp_path, rows)))
    schema = ds.schema
    assert list(schema.sparse) == ["row_id", "user", "interests", "ad"] and schema.candidate == ("ad",)
    assert list(schema.sequence) == ["seq_item", "seq_action"] and schema.num_dense == 2
    assert schema.tasks == ("click", "conversion") and schema.seq_max_len == SEQ_MAX_LEN
    assert ds.train_rows == ROWS and ds.bayes_ne() is None and ds.bayes_calibration() is None

    batches = take(ds.train_batches(), 5)  # one epoch
    for batch in batches:
        assert batch.batch_size == 10 and batch.dense.dtype == batch.labels.dtype == torch.float32
        for kjt in (batch.sparse, batch.sequence):
            assert kjt.stride() == 10
            assert kjt.values().dtype == kjt.lengths().dtype == torch.int64
            assert int(kjt.lengths().sum()) == kjt.values().numel()
    assert row_ids(batches) == list(range(ROWS))

    def column(kjt: str, key: str) -> list[list[int]]:
        return [ids.tolist() for b in batches for ids in getattr(b, kjt)[key].to_dense()]

    assert column("sparse", "user") == [[r["user"]] for r in rows]
    assert column("sparse", "interests") == [r["interests"] for r in rows]
    assert column("sparse", "ad") == [[r["ad"]] for r in rows]
    for key in ("seq_item", "seq_action"):  # the most recent SEQ_MAX_LEN events, oldest first
        assert column("sequence", key) == [r[key][-SEQ_MAX_LEN:] for r in rows]
    assert any(len(r["seq_item"]) > SEQ_MAX_LEN for r in rows) and any(not r["seq_item"] for r in rows)
    dense = torch.cat([b.dense for b in batches])
    assert torch.equal(dense, torch.tensor([[r["x_float"], r["x_int"]] for r in rows], dtype=torch.float32))
    labels = torch.cat([b.labels for b in batches])
    assert torch.equal(labels, torch.tensor([[r["click"], r["conversion"]] for r in rows], dtype=torch.float32))


def test_training_repeats_epochs_and_batches_span_them(tmp_path: Path) -> None:
    ds = ParquetDataset(config(dataset_dir(tmp_path), batch_size=16))
    ids = row_ids(take(ds.train_batches(), 7))  # 112 rows: epochs 0, 1 and 12 rows of epoch 2
    assert ids == (list(range(ROWS)) * 3)[:112]


# ---------------------------------------------------------------------------- ranks, order, resume


@pytest.mark.parametrize("world_size", [2, 5])
def test_ranks_split_every_train_batch_into_the_one_rank_stream(tmp_path: Path, world_size: int) -> None:
    cfg = config(dataset_dir(tmp_path), shuffle_window=12, shuffle_row_groups=True)
    whole = take(ParquetDataset(cfg).train_batches(), 8)
    shards = [take(ParquetDataset(cfg, r, world_size).train_batches(), 8) for r in range(world_size)]
    for step, batch in enumerate(whole):
        parts = [shard[step] for shard in shards]
        assert all(p.batch_size == 10 // world_size for p in parts)
        assert_same_rows(parts, batch)


@pytest.mark.parametrize("world_size, steps, size", [(1, 3, 23), (2, 3, 22), (5, 2, 20)])
def test_every_rank_gets_the_same_eval_batches(tmp_path: Path, world_size: int, steps: int, size: int) -> None:
    """23 eval rows in batches of 10: the last 3 are split evenly over the ranks, < W left out."""
    root = dataset_dir(tmp_path)
    whole = list(ParquetDataset(config(root)).eval_batches())
    shards = [ParquetDataset(config(root), r, world_size) for r in range(world_size)]
    assert {(ds.eval_steps, ds.eval_size) for ds in shards} == {(steps, size)}
    batches = [list(ds.eval_batches()) for ds in shards]
    for step in range(steps):
        sizes = {shard[step].batch_size for shard in batches}
        assert len(sizes) == 1, sizes  # equal shapes on every rank: the collectives line up
    assert row_ids([shard[s] for s in range(steps) for shard in batches]) == row_ids(whole)[:size]
    assert all(len(shard) == steps for shard in batches)


@pytest.mark.parametrize("window, row_groups", [(12, False), (0, True), (12, True), (64, False)])
def test_shuffle_is_a_per_epoch_permutation_fixed_by_the_seed(tmp_path: Path, window: int, row_groups: bool) -> None:
    root = dataset_dir(tmp_path)
    cfg = config(root, shuffle_window=window, shuffle_row_groups=row_groups)
    ids = row_ids(take(ParquetDataset(cfg).train_batches(), 10))  # two epochs
    first, second = ids[:ROWS], ids[ROWS:]
    assert sorted(first) == sorted(second) == list(range(ROWS))
    assert first != list(range(ROWS)) and first != second
    assert ids == row_ids(take(ParquetDataset(cfg).train_batches(), 10))
    assert ids != row_ids(take(ParquetDataset(dataclasses.replace(cfg, seed=1)).train_batches(), 10))
    # eval is never shuffled
    assert row_ids(list(ParquetDataset(cfg).eval_batches())) == list(range(23))


@pytest.mark.parametrize("shuffle_window", [0, 12, 64])
def test_resume_and_workers_continue_the_stream_exactly(tmp_path: Path, shuffle_window: int) -> None:
    cfg = config(dataset_dir(tmp_path), shuffle_window=shuffle_window, shuffle_row_groups=shuffle_window > 0)
    expected = take(ParquetDataset(cfg).train_batches(), 14)  # 140 rows: into the third epoch
    rank1 = ParquetDataset(cfg, 1, 2)
    full = take(rank1.train_batches(), 14)
    for start in (1, 4, 5, 9):  # 4, 9: batches that span two epochs; 5: starts exactly at epoch 1
        for a, b in zip(take(rank1.train_batches(start_step=start), 3), full[start:]):
            assert_same_rows([a], b)
    one = ParquetDataset(cfg)
    for a, b in zip(take(one.train_batches(start_step=6), 4), expected[6:10]):
        assert_same_rows([a], b)
    workers = ParquetDataset(dataclasses.replace(cfg, num_workers=2))
    for a, b in zip(take(workers.train_batches(start_step=3), 5), expected[3:8]):
        assert_same_rows([a], b)
    assert row_ids(list(workers.eval_batches())) == list(range(23))


# ------------------------------------------------------------------------------ schema errors


def _retyped(column: str, arrow_type: pa.DataType) -> pa.Schema:
    return ARROW_SCHEMA.set(ARROW_SCHEMA.get_field_index(column), pa.field(column, arrow_type))


@pytest.mark.parametrize(
    "column, arrow_type, message",
    [
        ("ad", None, "column 'ad' is missing"),
        ("user", pa.float32(), "column 'user' has type float, expected an integer scalar"),
        ("user", pa.list_(pa.int32()), "name it in data.features.multi_hot"),
        ("interests", pa.int32(), "column 'interests' has type int32, expected list<integer> (multi_hot)"),
        ("seq_action", pa.int8(), "expected list<integer> (sequence field)"),
        ("seq_item", pa.list_(pa.float32()), "column 'seq_item' has type list<element: float>"),
        ("x_float", pa.string(), "column 'x_float' has type string, expected an integer or floating scalar"),
        ("conversion", pa.string(), "expected an integer, floating or boolean scalar (label)"),
    ],
)
def test_schema_mismatch_names_the_column_and_the_file(
    tmp_path: Path, column: str, arrow_type: pa.DataType | None, message: str
) -> None:
    root = dataset_dir(tmp_path)
    rows = make_rows(10, seed=2)
    if arrow_type is None:
        schema = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index(column))
        rows = [{k: v for k, v in r.items() if k != column} for r in rows]
    else:
        schema = _retyped(column, arrow_type)
        for r in rows:
            value = r[column]
            if pa.types.is_list(arrow_type) and not isinstance(value, list):
                r[column] = [value]
            elif isinstance(value, list) and not pa.types.is_list(arrow_type):
                r[column] = value[0] if value else 0
            if pa.types.is_string(arrow_type):
                r[column] = str(r[column])
    bad = write(root / "eval.parquet", rows, schema=schema)  # the eval split is checked up front too
    with pytest.raises(ParquetSchemaError) as err:
        ParquetDataset(config(root))
    assert str(bad) in str(err.value) and message in str(err.value), err.value


def test_missing_files_and_unreadable_files_are_reported(tmp_path: Path) -> None:
    root = dataset_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"data.eval: 'nothing/\*.parquet' matches no file"):
        ParquetDataset(config(root, eval=["nothing/*.parquet"]))
    (root / "train" / "d.parquet").write_text("not parquet")
    with pytest.raises(ParquetSchemaError, match="d.parquet: not a readable Parquet file"):
        ParquetDataset(config(root))


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    root = dataset_dir(tmp_path)
    section = OmegaConf.structured(config(root))
    assert build_dataset(section).cfg == config(root)
    for key, value, message in [
        ("bad_rows", "drop", "data.bad_rows must be 'skip' or 'fail'"),
        ("features.multi_hot", ["nope"], "data.features.multi_hot: ['nope'] are not in data.features.sparse"),
        ("features.sparse.user", 0, "data.features.sparse.user: vocabulary size must be >= 1"),
        ("features.labels", ["click", "x_int"], "columns ['x_int'] are declared more than once"),
        ("features.candidate", [], "data.features.candidate must not be empty"),
        ("shuffle_window", -1, "data.shuffle_window must be >= 0"),
        ("unknown_key", 1, "unknown_key"),
    ]:
        broken = section.copy()
        OmegaConf.set_struct(broken, False)
        OmegaConf.update(broken, key, value, merge=False)
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            build_dataset(broken)
    with pytest.raises(ValueError, match="divisible by the world size 3"):
        ParquetDataset(config(root), 0, 3)


# ---------------------------------------------------------------------------------- bad rows

# in train/b.parquet (rows 0..29, row groups of 7): row group 3, rows 21..27
BAD_ROW = 23


def _null(column: str):
    return lambda r: r.update({column: None})


CORRUPTIONS = {
    "null scalar": ("null", "user", _null("user")),
    "null list": ("null", "seq_action", _null("seq_action")),
    "null list element": ("null", "interests", lambda r: r.update(interests=[1, None])),
    "null label": ("null", "click", _null("click")),
    "negative id": ("id_out_of_range", "ad", lambda r: r.update(ad=-1)),
    "id = vocab": ("id_out_of_range", "user", lambda r: r.update(user=7)),
    "multi-hot id": ("id_out_of_range", "interests", lambda r: r.update(interests=[0, 5])),
    "sequence id": ("id_out_of_range", "seq_item", lambda r: r.update(seq_item=[0, 13], seq_action=[0, 0])),
    "unequal sequences": (
        "sequence_length_mismatch", "seq_action", lambda r: r.update(seq_item=[1, 2], seq_action=[1])
    ),
    "nan dense": ("non_finite_dense", "x_float", lambda r: r.update(x_float=math.nan)),
    "inf dense": ("non_finite_dense", "x_float", lambda r: r.update(x_float=-math.inf)),
    "label 2": ("label_not_binary", "conversion", lambda r: r.update(conversion=2)),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_skip_counts_a_malformed_row_and_keeps_the_others(tmp_path: Path, case: str) -> None:
    reason, _, corrupt = CORRUPTIONS[case]
    rows = make_rows()
    corrupt(rows[BAD_ROW])
    ds = ParquetDataset(config(dataset_dir(tmp_path, rows), batch_size=7))
    assert ds.bad_row_counts() == {"train": {reason: 1}, "eval": {}}
    assert ds.train_rows == ROWS - 1
    assert row_ids(take(ds.train_batches(), 7)) == [i for i in range(ROWS) if i != BAD_ROW]


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_fail_raises_naming_file_row_column_and_reason(tmp_path: Path, case: str) -> None:
    reason, column, corrupt = CORRUPTIONS[case]
    rows = make_rows()
    corrupt(rows[BAD_ROW])
    root = dataset_dir(tmp_path, rows)
    with pytest.raises(BadRowError) as err:
        ParquetDataset(config(root, bad_rows="fail"))
    message = str(err.value)
    assert f"{root / 'train' / 'b.parquet'}: row {BAD_ROW} (row group 3): {reason} in column {column!r}" in message


def test_first_reason_wins_and_every_reason_is_counted(tmp_path: Path) -> None:
    rows = make_rows()
    for i, (_, _, corrupt) in enumerate(CORRUPTIONS.values()):
        corrupt(rows[3 * i])
    rows[1].update(user=None, x_float=math.nan)  # null comes before non_finite_dense
    ds = ParquetDataset(config(dataset_dir(tmp_path, rows)))
    counts = ds.bad_row_counts()["train"]
    assert list(counts) == [r for r in BAD_ROW_REASONS if r in counts]
    assert counts == {
        "null": 5, "id_out_of_range": 4, "sequence_length_mismatch": 1, "non_finite_dense": 2, "label_not_binary": 1
    }
    bad = {1} | {3 * i for i in range(len(CORRUPTIONS))}
    assert sorted(row_ids(take(ds.train_batches(), 5))[: ds.train_rows]) == sorted(set(range(ROWS)) - bad)


def test_a_split_without_rows_to_serve_is_an_error(tmp_path: Path) -> None:
    rows = make_rows(5)
    for r in rows:
        r["click"] = None
    root = dataset_dir(tmp_path)
    write(root / "eval.parquet", rows)
    with pytest.raises(ValueError, match="data.eval: no valid rows"):
        ParquetDataset(config(root))
    write(root / "eval.parquet", make_rows(3))
    with pytest.raises(ValueError, match="data.eval: 3 valid rows, fewer than the 5 ranks"):
        ParquetDataset(config(root), 0, 5)
