"""MovieLens-100k preparation on a tiny hand-made ml-100k: every column against a brute-force oracle."""

from __future__ import annotations

import hashlib
import itertools
import math
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from data import movielens
from data.movielens import GENRES, Raw

USERS = {  # original id -> (age, gender, occupation, zip); ids neither sorted nor contiguous
    40: (17, "M", "writer", "T8H1N"),
    10: (25, "F", "artist", "94043"),
    30: (56, "M", "writer", "02139"),
    20: (44, "F", "none", "85711"),
}
ITEMS = {  # original id -> (release date, genres)
    11: ("01-Jan-1995", ["Comedy"]),
    3: (None, ["unknown"]),
    7: ("12-Jun-1939", ["Drama", "War"]),
    5: ("01-Jan-1998", ["Action", "Sci-Fi", "Thriller"]),
    9: ("05-May-1985", []),
}
BASE = 880_000_000
# offsets with repeats, so one user rates several movies in the same second, and gaps from seconds to months
OFFSETS = [0, 30, 30, 700, 4_000, 90_000, 90_000, 400_000, 3_000_000, 10_000_000]
MAX_HISTORY = 3
EVAL_FRACTION = 0.25


def fake_raw(seed: int = 0) -> Raw:
    """Every user rates every movie once (20 ratings), in shuffled order."""
    rng = np.random.default_rng(seed)
    pairs = list(itertools.product(USERS, ITEMS))
    ratings = pa.table(
        {
            "user_id": [u for u, _ in pairs],
            "movie_id": [m for _, m in pairs],
            "rating": rng.integers(1, 6, len(pairs)).tolist(),
            "timestamp": [BASE + int(rng.choice(OFFSETS)) for _ in pairs],
        }
    )
    items = pa.table(
        {
            "movie_id": list(ITEMS),
            "movie_title": [f"movie {m}" for m in ITEMS],
            "release_date": pa.array([date for date, _ in ITEMS.values()], pa.string()),
            **{g: [int(g in genres) for _, genres in ITEMS.values()] for g in GENRES},
        }
    )
    users = pa.table(
        {
            "user_id": list(USERS),
            "age": [a for a, *_ in USERS.values()],
            "gender": [g for _, g, *_ in USERS.values()],
            "occupation": [o for *_, o, _ in USERS.values()],
            "zip_code": [z for *_, z in USERS.values()],
        }
    )
    return Raw(ratings=ratings, items=items, users=users)


def bucket(value: float, edges: tuple[float, ...]) -> int:
    return sum(value >= edge for edge in edges)


def test_convert_matches_a_brute_force_oracle() -> None:
    raw = fake_raw()
    train, evaluation, meta = movielens.convert(raw, MAX_HISTORY, EVAL_FRACTION)
    ratings = raw.ratings.to_pylist()
    users, items = sorted(USERS), sorted(ITEMS)  # contiguous id = rank of the original id

    # split by time: every train rating strictly before every eval rating, rows in time order
    train_times, eval_times = train["timestamp"].to_pylist(), evaluation["timestamp"].to_pylist()
    assert max(train_times) < min(eval_times) == meta["split_timestamp"]
    assert train_times == sorted(train_times) and eval_times == sorted(eval_times)
    assert len(eval_times) == sum(r["timestamp"] >= meta["split_timestamp"] for r in ratings) >= 5
    assert meta["rows"] == {"train": train.num_rows, "eval": evaluation.num_rows}

    train_mean = np.mean([r["rating"] for r in ratings if r["timestamp"] < meta["split_timestamp"]])
    stats = meta["dense_standardisation"]
    examples = train.to_pylist() + evaluation.to_pylist()
    seen = set()
    for ex in examples:
        u, m, t = users[ex["user_id"]], items[ex["item_id"]], ex["timestamp"]
        (rating,) = [r["rating"] for r in ratings if (r["user_id"], r["movie_id"], r["timestamp"]) == (u, m, t)]
        seen.add((u, m))
        assert ex["rating"] == rating and ex["like"] == int(rating >= 4) and ex["love"] == int(rating == 5)

        age, gender, occupation, zip_code = USERS[u]
        assert ex["user_age"] == bucket(age, (18, 25, 35, 45, 50, 56))
        assert ex["user_gender"] == ["F", "M"].index(gender)
        assert ex["user_occupation"] == ["artist", "none", "writer"].index(occupation)
        assert ex["user_zip"] == (int(zip_code[0]) if zip_code[0].isdigit() else 10)
        date, genres = ITEMS[m]
        assert ex["item_genres"] == [GENRES.index(g) for g in genres]
        assert ex["item_year"] == {None: 0, "1939": 1, "1985": 6, "1995": 12, "1998": 15}[date and date[-4:]]

        # the sequence: this user's ratings strictly before t, oldest first (same second: by movie)
        earlier = sorted(
            (r["timestamp"], items.index(r["movie_id"]), r["rating"])
            for r in ratings
            if r["user_id"] == u and r["timestamp"] < t
        )
        kept = earlier[-MAX_HISTORY:]
        assert ex["seq_item"] == [i for _, i, _ in kept]
        assert ex["seq_rating"] == [r - 1 for *_, r in kept]
        assert ex["seq_time_gap"] == [bucket(t - s, movielens.GAP_EDGES) for s, *_ in kept]

        item_earlier = [r["rating"] for r in ratings if r["movie_id"] == m and r["timestamp"] < t]
        expected = {
            "user_log_count": math.log1p(len(earlier)),
            "user_mean_rating": (sum(r for *_, r in earlier) + 5 * train_mean) / (len(earlier) + 5),
            "item_log_count": math.log1p(len(item_earlier)),
            "item_mean_rating": (sum(item_earlier) + 5 * train_mean) / (len(item_earlier) + 5),
        }
        for name, value in expected.items():
            assert ex[name] * stats[name]["std"] + stats[name]["mean"] == pytest.approx(value, abs=1e-5), name
    assert len(examples) == len(seen) == 20
    assert any(len(ex["seq_item"]) == MAX_HISTORY for ex in examples)  # truncation was exercised
    assert any(ex["seq_item"] == [] for ex in examples)
    assert any(len(set(ex["seq_time_gap"])) > 1 for ex in examples)


def fake_wheel(path: Path, raw: Raw) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name, table in (("data", raw.ratings), ("items", raw.items), ("users", raw.users)):
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, compression="brotli")
            wheel.writestr(movielens._TABLES[name], sink.getvalue().to_pybytes())
    return path


def test_prepare_writes_files_that_read_back_through_the_movielens_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = fake_wheel(tmp_path / movielens.WHEEL_FILE, fake_raw())
    with pytest.raises(ValueError, match="SHA-256 .* is not the pinned"):
        movielens.read_wheel(wheel)
    monkeypatch.setattr(movielens, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    out = tmp_path / "movielens"
    (out / "train").mkdir(parents=True)
    (out / "train" / "part-7.parquet").write_bytes(b"stale")  # from an earlier run: removed
    meta = movielens.prepare(out, wheel, MAX_HISTORY, EVAL_FRACTION)  # reads the result back itself
    assert sorted(p.name for p in out.glob("*/*.parquet")) == ["part-0.parquet", "part-0.parquet"]
    assert meta["rows"]["train"] + meta["rows"]["eval"] == 20
    assert meta["bytes"]["train"] == (out / "train" / "part-0.parquet").stat().st_size

    # the config declares exactly the columns `convert` writes; fixed vocabularies agree, data-sized
    # ones (users, movies, occupations) are the real ml-100k sizes, at least the fake's
    section = OmegaConf.load(movielens.CONFIG)
    declared = {**section.features.sparse, **section.features.sequence}
    assert set(declared) == set(meta["vocab"])
    for name, size in meta["vocab"].items():
        assert size <= declared[name], name
        if name not in ("user_id", "user_gender", "user_occupation", "item_id", "seq_item"):
            assert size == declared[name], name
    assert list(section.features.dense) == list(movielens.DENSE)

    monkeypatch.setenv("GEM_DATA", str(tmp_path))  # the default root is $GEM_DATA/movielens
    assert OmegaConf.to_container(section, resolve=True)["root"] == str(out)
    assert movielens.default_out() == out
