"""The synthetic stream: determinism, rank / worker sharding, KJT validity, the planted truth."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from data import Batch, SyntheticConfig, SyntheticDataset, build_dataset
from data.synthetic import _SPLITS, SeqConfig, SignalConfig, VocabConfig
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
from gem.metrics import normalized_entropy

CONF = Path(__file__).resolve().parents[2] / "conf" / "data" / "synthetic.yaml"


def config(**overrides) -> SyntheticConfig:
    """A small stream: 12 divides by 1, 2, 3 ranks; 50 eval examples round up to 5 batches of 12."""
    return dataclasses.replace(SyntheticConfig(batch_size=12, eval_examples=50), **overrides)


def take(batches, n: int) -> list[Batch]:
    return list(itertools.islice(batches, n))


def assert_same_rows(parts: list[Batch], whole: Batch) -> None:
    """The batches in `parts`, concatenated in order, hold exactly the rows of `whole`."""
    for kjt in ("sparse", "sequence"):
        keys = getattr(whole, kjt).keys()
        for part in parts:
            assert getattr(part, kjt).keys() == keys
        for key in keys:
            for field in ("lengths", "values"):
                joined = torch.cat([getattr(getattr(part, kjt)[key], field)() for part in parts])
                assert torch.equal(joined, getattr(getattr(whole, kjt)[key], field)()), (kjt, key, field)
    assert torch.equal(torch.cat([p.dense for p in parts]), whole.dense)
    assert torch.equal(torch.cat([p.labels for p in parts]), whole.labels)


def concat(batches: list[Batch]) -> Batch:
    """One Batch of all rows of `batches`."""

    def cat(kjts: list[KeyedJaggedTensor]) -> KeyedJaggedTensor:
        keys = kjts[0].keys()
        return KeyedJaggedTensor(
            keys=keys,
            values=torch.cat([k[key].values() for key in keys for k in kjts]),
            lengths=torch.cat([k[key].lengths() for key in keys for k in kjts]),
        )

    return Batch(
        sparse=cat([b.sparse for b in batches]),
        sequence=cat([b.sequence for b in batches]),
        dense=torch.cat([b.dense for b in batches]),
        labels=torch.cat([b.labels for b in batches]),
    )


def test_yaml_holds_the_dataclass_defaults() -> None:
    assert OmegaConf.to_container(OmegaConf.load(CONF)) == dataclasses.asdict(SyntheticConfig())
    assert build_dataset(OmegaConf.load(CONF)).cfg == SyntheticConfig()


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    first = take(SyntheticDataset(config()).train_batches(), 3)
    again = take(SyntheticDataset(config()).train_batches(), 3)
    other = take(SyntheticDataset(config(seed=1)).train_batches(), 3)
    for a, b in zip(first, again):
        assert_same_rows([a], b)
    assert not torch.equal(first[0].dense, other[0].dense)
    assert not torch.equal(first[0].sequence.values(), other[0].sequence.values())


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_every_train_batch_into_the_one_rank_stream(world_size: int) -> None:
    whole = take(SyntheticDataset(config()).train_batches(), 3)
    shards = [take(SyntheticDataset(config(), r, world_size).train_batches(), 3) for r in range(world_size)]
    for step, batch in enumerate(whole):
        parts = [shard[step] for shard in shards]
        assert all(p.batch_size == 12 // world_size for p in parts)
        assert_same_rows(parts, batch)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_the_fixed_eval_split(world_size: int) -> None:
    one = SyntheticDataset(config())
    whole = list(one.eval_batches())
    assert one.eval_size == 60 and len(whole) == one.eval_steps == 5  # 50 rounded up to 5 x 12
    shards = [list(SyntheticDataset(config(), r, world_size).eval_batches()) for r in range(world_size)]
    assert all(len(shard) == len(whole) for shard in shards)
    for step, batch in enumerate(whole):
        assert_same_rows([shard[step] for shard in shards], batch)
    # the same on every pass, and a different stream from training
    for a, b in zip(one.eval_batches(), whole):
        assert_same_rows([a], b)
    assert not torch.equal(whole[0].dense, next(one.train_batches()).dense)


def test_workers_and_resume_give_the_same_stream() -> None:
    plain = SyntheticDataset(config())
    workers = SyntheticDataset(config(num_workers=2))
    expected = take(plain.train_batches(), 5)
    for a, b in zip(take(workers.train_batches(), 5), expected):
        assert_same_rows([a], b)
    for a, b in zip(take(workers.train_batches(start_step=3), 2), expected[3:]):
        assert_same_rows([a], b)
    # an odd number of eval batches over 2 workers keeps its order and ends
    assert_same_rows(list(workers.eval_batches()), concat(list(plain.eval_batches())))


@pytest.mark.parametrize("fill", [0.2, 0.5, 0.9, 1.0])
def test_batches_are_valid_kjts(fill: float) -> None:
    cfg = config(batch_size=4096, seq=SeqConfig(max_len=40, fill=fill, empty_share=0.2))
    ds = SyntheticDataset(cfg)
    schema = ds.schema
    batch = next(ds.train_batches())
    n = batch.batch_size
    assert n == 4096 and batch.dense.shape == (n, schema.num_dense) and batch.dense.dtype == torch.float32
    assert batch.sparse.keys() == list(schema.sparse)
    assert batch.sequence.keys() == list(schema.sequence)
    assert list(schema.sparse)[-3:] == list(schema.candidate) == ["ad_id", "ad_advertiser", "ad_category"]
    for kjt, vocab in ((batch.sparse, schema.sparse), (batch.sequence, schema.sequence)):
        assert kjt.values().dtype == kjt.lengths().dtype == torch.int64
        assert kjt.stride() == n
        for key, jt in kjt.to_dict().items():
            assert int(jt.lengths().sum()) == jt.values().numel()
            assert 0 <= int(jt.values().min()) and int(jt.values().max()) < vocab[key], key
    sparse = batch.sparse.to_dict()
    for key in schema.sparse:
        if key != "user_interests":
            assert torch.all(sparse[key].lengths() == 1), key
    interests = sparse["user_interests"]
    assert 1 <= int(interests.lengths().min()) and int(interests.lengths().max()) <= cfg.max_interests
    assert all(len(set(ids.tolist())) == len(ids) for ids in interests.to_dense())
    truth = ds.truth
    ad = sparse["ad_id"].values().numpy()
    assert np.array_equal(sparse["ad_advertiser"].values().numpy(), truth.ad_advertiser[ad])
    assert np.array_equal(sparse["ad_category"].values().numpy(), truth.advertiser_category[truth.ad_advertiser[ad]])

    sequence = batch.sequence.to_dict()
    lengths = sequence["seq_item"].lengths()
    for key in schema.sequence:
        assert torch.equal(sequence[key].lengths(), lengths), key
    assert int(lengths.max()) <= cfg.seq.max_len
    empty = (lengths == 0).double().mean().item()
    assert abs(empty - cfg.seq.empty_share) < 0.03
    mean_fill = lengths[lengths > 0].double().mean().item() / cfg.seq.max_len
    assert abs(mean_fill - fill) < 0.03, mean_fill
    for gaps in sequence["seq_time_gap"].to_dense()[:200]:  # oldest event first: gaps never grow
        assert torch.all(gaps[1:] <= gaps[:-1])

    click, conversion = batch.labels.T
    assert set(batch.labels.unique().tolist()) == {0.0, 1.0}
    assert torch.all(conversion <= click)


def test_true_probabilities_follow_the_documented_formulas() -> None:
    """Recompute p by hand for a tiny stream, with plain Python, then its Bayes NE from the formula."""
    cfg = config(
        batch_size=8,
        eval_examples=64,
        num_dense=3,
        max_interests=3,
        vocab=VocabConfig(
            user_id=7, user_region=5, user_device=3, context_slot=4, user_interests=6,
            ad_id=9, ad_advertiser=4, ad_category=3, seq_item=11, seq_action=3, seq_time_gap=4,
        ),
        seq=SeqConfig(max_len=4, fill=0.5, empty_share=0.3),
        signal=SignalConfig(dim=2, click_intercept=-1.0, conversion_intercept=0.0),
    )
    ds = SyntheticDataset(cfg)
    truth = ds.truth
    batches = list(ds.eval_batches())
    labels = torch.cat([b.labels for b in batches])
    probs = ds.true_probabilities(range(ds.eval_size))
    assert probs.dtype == torch.float64 and probs.shape == (64, 2)

    def dot(a, b) -> float:
        return sum(float(x) * float(y) for x, y in zip(a, b))

    seen_empty = False
    for row in range(16):
        batch, i = batches[row // 8], row % 8
        x = {key: jt.to_dense()[i].tolist() for key, jt in batch.sparse.to_dict().items()}
        seq = {key: jt.to_dense()[i].tolist() for key, jt in batch.sequence.to_dict().items()}
        dense = batch.dense[i].tolist()
        v = truth.ad_vectors[x["ad_id"][0]]
        interests = x["user_interests"]
        mean_q = [sum(float(truth.interest_vectors[k][c]) for k in interests) / len(interests) for c in range(2)]
        seen_empty |= not seq["seq_item"]
        p = []
        for task in ("click", "conversion"):
            t = truth.tasks[task]
            z = t.intercept + t.interest_ad * dot(mean_q, v)
            z += sum(float(t.bias[key][x[key][0]]) for key in x if key != "user_interests")
            z += sum(float(t.bias["user_interests"][k]) for k in interests) / len(interests)
            z += dot(t.dense, dense) + t.dense_pair * dense[0] * dense[1]
            if seq["seq_item"]:
                s = [dot(truth.item_vectors[item], v) for item in seq["seq_item"]]
                logit = [
                    truth.sharpness * s_j + float(t.action[a]) + float(truth.gap[g])
                    for s_j, a, g in zip(s, seq["seq_action"], seq["seq_time_gap"])
                ]
                w = [math.exp(value - max(logit)) for value in logit]
                z += t.sequence * sum(w_j * s_j for w_j, s_j in zip(w, s)) / sum(w)
            p.append(1.0 / (1.0 + math.exp(-z)))
        expected = (p[0], p[0] * p[1])  # conversion: the marginal p_click * p(conv | click)
        assert probs[row].tolist() == pytest.approx(expected, rel=1e-5), row
    assert seen_empty

    def ne(p: list[float], y: list[float]) -> float:
        rate = sum(y) / len(y)
        loss = -sum(yi * math.log(pi) + (1 - yi) * math.log(1 - pi) for pi, yi in zip(p, y)) / len(y)
        return loss / -(rate * math.log(rate) + (1 - rate) * math.log(1 - rate))

    bayes, calibration = ds.bayes_ne(), ds.bayes_calibration()
    for col, task in enumerate(("click", "conversion")):
        y = labels[:, col].tolist()
        assert 0 < sum(y) < len(y), task  # both classes, so NE is defined
        assert bayes[task] == pytest.approx(ne(probs[:, col].tolist(), y), rel=1e-9), task
        assert calibration[task] == pytest.approx(sum(probs[:, col].tolist()) / sum(y), rel=1e-9), task


def test_the_sequence_carries_signal_beyond_the_other_features() -> None:
    ds = SyntheticDataset(SyntheticConfig())
    n = 2048
    labels = torch.cat([b.labels for b in itertools.islice(ds.eval_batches(), n // ds.cfg.batch_size)])
    true = ds.true_probabilities(range(n))
    blind = ds.true_probabilities(range(n), sequence_blind=True)
    for col, task in enumerate(("click", "conversion")):
        true_ne = normalized_entropy(true[:, col], labels[:, col])
        blind_ne = normalized_entropy(blind[:, col], labels[:, col])
        assert true_ne < blind_ne - 0.1, (task, true_ne, blind_ne)
        assert blind_ne < 1.0, (task, blind_ne)  # the other features carry signal too
    rates = labels.mean(dim=0)
    assert 0.1 < rates[0] < 0.3 and 0.02 < rates[1] < rates[0]


def test_bad_config_raises() -> None:
    with pytest.raises(ValueError, match="data.batch_size"):
        SyntheticDataset(config(batch_size=8), rank=0, world_size=3)
    for fill in (0.0, 1.5):
        with pytest.raises(ValueError, match="data.seq.fill"):
            config(seq=SeqConfig(fill=fill))
    with pytest.raises(ValueError, match="data.seq.empty_share"):
        config(seq=SeqConfig(empty_share=-0.1))
    with pytest.raises(ValueError, match="not in 'SyntheticConfig'"):
        build_dataset(OmegaConf.create({"name": "synthetic", "batch_sise": 8}))
    with pytest.raises(ValueError, match="seq.max_len"):
        build_dataset(OmegaConf.create({"seq": {"max_len": "long"}}))
    with pytest.raises(ValueError, match="data.name"):
        build_dataset(OmegaConf.create({"name": "criteo"}))
    with pytest.raises(ValueError, match="data.max_interests"):
        build_dataset(OmegaConf.create({"max_interests": 600}))


@pytest.mark.parametrize("world_size", [1, 3])
def test_eval_true_probabilities_follow_each_ranks_eval_rows(world_size: int) -> None:
    """Row i of a rank's eval_true_probabilities is the truth of row i of its eval_batches: the
    labels the generator draws at those probabilities' indices are the batches' labels."""
    everything = SyntheticDataset(config()).true_probabilities(range(60))  # 5 eval batches of 12
    for rank in range(world_size):
        ds = SyntheticDataset(config(), rank, world_size)
        truth = ds.eval_true_probabilities()
        labels = torch.cat([b.labels for b in ds.eval_batches()])
        per_rank = 12 // world_size
        rows = np.concatenate([np.arange(s * 12 + rank * per_rank, s * 12 + (rank + 1) * per_rank) for s in range(5)])
        _, _, drawn = ds._generator.probabilities_and_labels(_SPLITS["eval"], rows)
        assert truth.dtype == torch.float64 and truth.shape == (len(rows), 2)
        assert torch.equal(truth, everything[rows])
        assert torch.equal(labels.double(), torch.from_numpy(drawn).double())
