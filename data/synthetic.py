"""Synthetic GEM-like ranking stream with a planted, known ground truth.

Every example is a pure function of ``(seed, split, global example index)``: each random draw is a
splitmix64 hash of ``(seed, split, index, field, position)`` (a counter-based RNG), so the stream does
not depend on world size, rank, batching or DataLoader workers. The hidden parameters (vectors, bias
tables, ad -> advertiser -> category maps) are drawn once from ``numpy.random.default_rng(seed)``.

Generative process (``U{..}`` uniform; ``V_F`` the vocabulary size of feature F; ``σ`` the sigmoid)::

    user / context  user_id, user_region, user_device, context_slot ~ U{0..V_F-1}
                    user_interests: n ~ U{1..max_interests} distinct ids ~ U{0..V-1}   (multi-hot)
    dense           x_k ~ N(0, 1), k < num_dense                                  (already normalised)
    candidate ad    a ~ U{0..V_ad-1};  ad_advertiser = ADV[a];  ad_category = CAT[ad_advertiser]
    sequence        L = 0 with probability seq.empty_share, else L ~ U{lo..hi} (see below);
                    events j = 0..L-1, oldest first:
                      seq_item_j ~ U{0..V_item-1}
                      seq_action_j = a with probability ∝ 2^-a (higher ids: rarer, deeper engagement)
                      seq_time_gap_j: bucket of the time before the request (0 = most recent); L
                        uniform buckets sorted in decreasing order, so gaps never grow along the sequence

    hidden vectors in R^d (d = signal.dim), entries N(0, 1/sqrt(d)) so dot products have unit variance:
        q_k per interest, c_g per category, and per ad / item half its category's vector:
        v_a = (c_CAT[ADV[a]] + e_a) / sqrt(2),  u_i = (c_ICAT[i] + e'_i) / sqrt(2)
        (ICAT: a hidden item -> category map, so items of the candidate's category match it best)

    For each task t in (click, conversion-given-click), with per-task bias tables B_t,F:
        z_t = b_t                                                   (signal.{click,conversion}_intercept)
            + sum_F B_t,F[x_F]  over F in user_id, user_region, user_device, context_slot,
                                        ad_id, ad_advertiser, ad_category
            + mean_k B_t,interests[k] + κ <mean_k q_k, v_a>        (k over the example's interests)
            + w_t . x + λ x_0 x_1                                    (dense)
            + γ A_t                                                  (sequence x candidate, 0 if L = 0)
        A_t   = sum_j π_tj s_j,   s_j = <u_{item_j}, v_a>
        π_t   = softmax_j(τ s_j + α_t[action_j] + β[gap_j])

        B_t,F ~ N(0, (feature_scale/3)^2) and κ = feature_scale/3: nine feature terms of standard
        deviation <= feature_scale/3 (the interest terms average n draws), so the feature logit has
        standard deviation ≈ feature_scale. w_t ~ N(0, dense_scale^2/(2 D)) and λ = dense_scale/sqrt(2),
        so the dense logit has standard deviation ≈ dense_scale. (N(mean, variance) throughout.)
        γ = sequence_scale, τ = sharpness,
        α_click[a] = action_scale * a / (V_action - 1),  α_conversion = 2 α_click,
        β[g] = -recency * g / (V_gap - 1).

    p_click = σ(z_click);  p(conv | click) = σ(z_conversion)
    click ~ Bernoulli(p_click);  conversion = click * Bernoulli(p(conv | click))

The candidate ad attends over the events: s_j is both the value and part of the attention logit, and
the weights depend on each event's own action and time gap. Sum pooling the three sequence fields
separately loses which item had which action and when, and cannot up-weight the items that match
the candidate, so only a model that attends over the sequence with the candidate can reach the optimum.
The Bayes-optimal prediction is p_click for click and the marginal p_click * p(conv | click) for
conversion; `SyntheticDataset.bayes_ne` reports their normalized entropy on the eval split, and
`SyntheticDataset.true_probabilities(..., sequence_blind=True)` the optimum of a model that ignores the
sequence. With the defaults, on the eval split: Bayes NE 0.67 (click) / 0.50 (conversion), sequence-
blind optimum 0.84 / 0.79, CTR 0.19, conversions 0.059 per impression (0.30 per click); other seeds
move these by a few hundredths.

Sequence lengths: with f = seq.fill and M = seq.max_len, non-empty users draw L ~ U{max(1, (2f-1)M)..M}
for f >= 0.5 and L ~ U{1..max(1, 2fM)} for f < 0.5 (bounds rounded), so ``fill`` is the mean length / M
over NON-EMPTY users; over all users the mean is (1 - empty_share) * fill * M.
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from data.batch import Batch, load_batches
from data.schema import Schema
from gem.metrics import normalized_entropy

TASKS = ("click", "conversion")
USER_FEATURES = ("user_id", "user_region", "user_device", "context_slot")
INTERESTS = "user_interests"
AD_FEATURES = ("ad_id", "ad_advertiser", "ad_category")
SEQUENCE_FEATURES = ("seq_item", "seq_action", "seq_time_gap")
# Features with one id per example and a per-id bias in z_t; with the interest bias and the
# interest x ad affinity they are the nine feature terms.
_BIASED_FEATURES = USER_FEATURES + AD_FEATURES
_NUM_FEATURE_TERMS = len(_BIASED_FEATURES) + 2

_SPLITS = {"train": 1, "eval": 2}
_BLIND_SPLIT = 3  # reference sequences for the sequence-blind oracle; never served as examples
_BLIND_SAMPLES = 128
_CHUNK = 4096  # examples per generator call outside the training stream (bounded memory)


# --------------------------------------------------------------------------------------- config


@dataclass
class VocabConfig:
    """Number of distinct ids of each categorical feature (ids are ``0..size-1``)."""

    user_id: int = 5000
    user_region: int = 200
    user_device: int = 16
    context_slot: int = 32
    user_interests: int = 500
    ad_id: int = 2000
    ad_advertiser: int = 200
    ad_category: int = 32
    seq_item: int = 5000
    seq_action: int = 4
    seq_time_gap: int = 16

    def __post_init__(self) -> None:
        for name, size in vars(self).items():
            if size < 1:
                raise ValueError(f"data.vocab.{name} must be >= 1, got {size}")


@dataclass
class SeqConfig:
    """User behaviour sequence lengths.

    Args:
        max_len: no sequence is longer.
        fill: mean length / max_len over users with a non-empty sequence, in (0, 1].
        empty_share: fraction of users with an empty sequence, in [0, 1].
    """

    max_len: int = 64
    fill: float = 0.5
    empty_share: float = 0.1

    def __post_init__(self) -> None:
        if self.max_len < 1:
            raise ValueError(f"data.seq.max_len must be >= 1, got {self.max_len}")
        if not 0.0 < self.fill <= 1.0:
            raise ValueError(f"data.seq.fill must be in (0, 1], got {self.fill}")
        if not 0.0 <= self.empty_share <= 1.0:
            raise ValueError(f"data.seq.empty_share must be in [0, 1], got {self.empty_share}")


@dataclass
class SignalConfig:
    """Strength of the planted signal; symbols as in the module docstring."""

    dim: int = 16  # d, width of the hidden item / ad / interest vectors
    feature_scale: float = 0.8  # std of the sparse-feature logit
    dense_scale: float = 1.0  # std of the dense logit
    sequence_scale: float = 2.0  # γ
    sharpness: float = 1.0  # τ, how much the candidate's affinity steers the attention
    action_scale: float = 2.0  # α_click of the deepest action (α_conversion is twice that)
    recency: float = 3.0  # attention penalty of the oldest time-gap bucket against the newest
    # b_t. With the defaults γ A_t has mean ≈ +2 and std ≈ 1.5 over non-empty sequences (τ tilts the
    # attention toward items that match the candidate); these give CTR ≈ 0.2, p(conv | click) ≈ 0.3
    click_intercept: float = -4.0
    conversion_intercept: float = -4.5

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ValueError(f"data.signal.dim must be >= 1, got {self.dim}")
        for name in ("feature_scale", "dense_scale"):  # standard deviations
            if getattr(self, name) < 0:
                raise ValueError(f"data.signal.{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class SyntheticConfig:
    """The `data` config section of the synthetic stream (`conf/data/synthetic.yaml`).

    Args:
        name: dataset selector for `data.build_dataset`.
        batch_size: GLOBAL examples per step, over all ranks; divisible by the world size.
        seed: fixes the hidden parameters and every example.
        num_workers: DataLoader worker processes per rank (0: generate in the training process).
        eval_examples: size of the fixed eval split, rounded up to whole global batches so every rank
            sees equal, full batches and the split does not depend on the world size.
        num_dense: width of the dense features (>= 2: x_0 x_1 enters the logit).
        max_interests: most ids of the multi-hot `user_interests` (at most its vocabulary).
    """

    name: str = "synthetic"
    batch_size: int = 256
    seed: int = 0
    num_workers: int = 0
    eval_examples: int = 16384
    num_dense: int = 8
    max_interests: int = 5
    vocab: VocabConfig = field(default_factory=VocabConfig)
    seq: SeqConfig = field(default_factory=SeqConfig)
    signal: SignalConfig = field(default_factory=SignalConfig)

    def __post_init__(self) -> None:
        checks = (
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("seed", self.seed >= 0, ">= 0"),
            ("num_workers", self.num_workers >= 0, ">= 0"),
            ("eval_examples", self.eval_examples >= 1, ">= 1"),
            ("num_dense", self.num_dense >= 2, ">= 2"),
            ("max_interests", 1 <= self.max_interests <= self.vocab.user_interests, "in [1, vocab.user_interests]"),
        )
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"data.{name} must be {expected}, got {getattr(self, name)}")


# ------------------------------------------------------------------------- counter-based RNG

_U64 = np.uint64


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 output function: a bijective, well-mixing hash of uint64 (wraps mod 2^64)."""
    x = x + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


class _Field(enum.IntEnum):
    """Independent random streams of one example; each also has a position (event, slot)."""

    USER = 0  # position = index in USER_FEATURES
    NUM_INTERESTS = 1
    INTERESTS = 2
    DENSE = 3
    AD = 4
    EMPTY = 5
    LENGTH = 6
    ITEM = 7
    ACTION = 8
    GAP = 9
    CLICK = 10
    CONVERSION = 11


class _Draws:
    """Random numbers for a set of examples, each a pure function of (seed, split, index, field, pos)."""

    def __init__(self, seed: int, split: int, indices: np.ndarray) -> None:
        self.size = len(indices)
        stream = _splitmix64(_splitmix64(np.array([seed], dtype=_U64)) ^ _U64(split))
        self._keys = _splitmix64(stream ^ indices.astype(_U64))[:, None]  # [N, 1]

    def bits(self, what: _Field, width: int = 1, pos: int = 0) -> np.ndarray:
        """[N, width] uint64 for positions pos .. pos+width-1 of stream `what`."""
        slots = (np.uint64(what) << _U64(32)) | np.arange(pos, pos + width, dtype=_U64)
        return _splitmix64(self._keys ^ _splitmix64(slots))

    def integers(self, what: _Field, high: int | np.ndarray, width: int = 1, pos: int = 0) -> np.ndarray:
        """[N, width] int64 uniform in [0, high) (modulo bias < high / 2^64)."""
        return (self.bits(what, width, pos) % np.asarray(high, dtype=_U64)).astype(np.int64)

    def uniform(self, what: _Field, width: int = 1) -> np.ndarray:
        """[N, width] float64 uniform in [0, 1) with 53 random bits."""
        return (self.bits(what, width) >> _U64(11)).astype(np.float64) * 2.0**-53

    def normal(self, what: _Field, width: int) -> np.ndarray:
        """[N, width] standard normals by Box-Muller from the two 32-bit halves of each hash."""
        h = self.bits(what, width)
        u1 = ((h >> _U64(32)).astype(np.float64) + 0.5) * 2.0**-32  # in (0, 1): log is finite
        u2 = (h & _U64(0xFFFFFFFF)).astype(np.float64) * 2.0**-32
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def _distinct_ids(draws: _Draws, what: _Field, vocab: int, width: int) -> np.ndarray:
    """[N, width] ids, distinct within each row, uniform without replacement."""
    out = np.empty((draws.size, width), dtype=np.int64)
    for j in range(width):
        # the rank among the vocab - j ids not chosen yet, mapped to the id by stepping over the
        # chosen ones in increasing order
        rank = draws.integers(what, vocab - j, pos=j)[:, 0]
        for chosen in np.sort(out[:, :j], axis=1).T:
            rank += rank >= chosen
        out[:, j] = rank
    return out


# ---------------------------------------------------------------------------- planted truth


@dataclass(frozen=True)
class TaskTruth:
    """Hidden parameters of one task's logit z_t (see the module docstring)."""

    intercept: float  # b_t
    bias: dict[str, np.ndarray]  # B_t,F: feature -> [vocab] (user_interests: averaged over the ids)
    interest_ad: float  # κ
    dense: np.ndarray  # w_t [num_dense]
    dense_pair: float  # λ
    action: np.ndarray  # α_t [V_action]
    sequence: float  # γ


@dataclass(frozen=True)
class PlantedTruth:
    """Everything the labels are drawn from; `tasks["conversion"]` is p(conversion | click)."""

    ad_advertiser: np.ndarray  # ADV [V_ad]
    advertiser_category: np.ndarray  # CAT [V_advertiser]
    item_category: np.ndarray  # ICAT [V_item] (hidden: not a feature)
    item_vectors: np.ndarray  # u [V_item, d]
    ad_vectors: np.ndarray  # v [V_ad, d]
    interest_vectors: np.ndarray  # q [V_interests, d]
    sharpness: float  # τ
    gap: np.ndarray  # β [V_gap]
    action_probs: np.ndarray  # P(action) [V_action]
    tasks: dict[str, TaskTruth]


def _plant(cfg: SyntheticConfig) -> PlantedTruth:
    rng = np.random.default_rng(cfg.seed)
    vocab, sig = cfg.vocab, cfg.signal
    d = sig.dim

    def vectors(n: int) -> np.ndarray:
        return rng.normal(0.0, d**-0.25, size=(n, d)).astype(np.float32)  # float32: vocabularies grow

    advertiser_category = rng.integers(vocab.ad_category, size=vocab.ad_advertiser)
    ad_advertiser = rng.integers(vocab.ad_advertiser, size=vocab.ad_id)
    category_vectors = vectors(vocab.ad_category)
    ad_vectors = (category_vectors[advertiser_category[ad_advertiser]] + vectors(vocab.ad_id)) / math.sqrt(2.0)
    item_category = rng.integers(vocab.ad_category, size=vocab.seq_item)
    item_vectors = (category_vectors[item_category] + vectors(vocab.seq_item)) / math.sqrt(2.0)
    interest_vectors = vectors(vocab.user_interests)

    term_std = sig.feature_scale / math.sqrt(_NUM_FEATURE_TERMS)
    depth = np.arange(vocab.seq_action) / max(vocab.seq_action - 1, 1)
    tasks = {}
    for task, intercept, action_gain in (
        ("click", sig.click_intercept, 1.0),
        ("conversion", sig.conversion_intercept, 2.0),
    ):
        bias = {name: rng.normal(0.0, term_std, size=getattr(vocab, name)) for name in _BIASED_FEATURES + (INTERESTS,)}
        tasks[task] = TaskTruth(
            intercept=intercept,
            bias=bias,
            interest_ad=term_std,
            dense=rng.normal(0.0, sig.dense_scale / math.sqrt(2 * cfg.num_dense), size=cfg.num_dense),
            dense_pair=sig.dense_scale / math.sqrt(2.0),
            action=action_gain * sig.action_scale * depth,
            sequence=sig.sequence_scale,
        )
    action_probs = 0.5 ** np.arange(vocab.seq_action)
    return PlantedTruth(
        ad_advertiser=ad_advertiser,
        advertiser_category=advertiser_category,
        item_category=item_category,
        item_vectors=item_vectors,
        ad_vectors=ad_vectors,
        interest_vectors=interest_vectors,
        sharpness=sig.sharpness,
        gap=-sig.recency * np.arange(vocab.seq_time_gap) / max(vocab.seq_time_gap - 1, 1),
        action_probs=action_probs / action_probs.sum(),
        tasks=tasks,
    )


# ------------------------------------------------------------------------------ generation


@dataclass
class _Examples:
    """Features of N examples as numpy arrays; sequences padded to [N, max_len] with `seq_mask`."""

    sparse: dict[str, np.ndarray]  # USER_FEATURES + AD_FEATURES -> [N]
    interests: np.ndarray  # [N, max_interests], valid where `interest_mask`
    interest_mask: np.ndarray  # [N, max_interests] bool
    dense: np.ndarray  # [N, num_dense] float32
    seq: dict[str, np.ndarray]  # SEQUENCE_FEATURES -> [N, max_len]
    seq_mask: np.ndarray  # [N, max_len] bool, a prefix of each row


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow warning for large |z|


def _attend(
    truth: PlantedTruth, task: str, affinity: np.ndarray, seq: dict[str, np.ndarray], mask: np.ndarray
) -> np.ndarray:
    """A_t = sum_j softmax_j(τ s_j + α_t[action_j] + β[gap_j]) s_j over the valid events; 0 if none.

    `affinity` s_j [..., L]; the `seq` fields and `mask` [..., L] broadcast against it.
    """
    event_logit = truth.tasks[task].action[seq["seq_action"]] + truth.gap[seq["seq_time_gap"]]
    logits = np.where(mask, truth.sharpness * affinity + event_logit, -np.inf)
    peak = logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits - np.where(np.isfinite(peak), peak, 0.0))  # 0 on padding
    return (weights * affinity).sum(axis=-1) / np.maximum(weights.sum(axis=-1), 1e-300)


class _Generator:
    """Draws examples, their true probabilities and labels; picklable for DataLoader workers."""

    def __init__(self, cfg: SyntheticConfig) -> None:
        self.cfg = cfg
        self.truth = _plant(cfg)
        self.schema = Schema(
            sparse={name: getattr(cfg.vocab, name) for name in USER_FEATURES + (INTERESTS,) + AD_FEATURES},
            candidate=AD_FEATURES,
            sequence={name: getattr(cfg.vocab, name) for name in SEQUENCE_FEATURES},
            num_dense=cfg.num_dense,
            tasks=TASKS,
            seq_max_len=cfg.seq.max_len,
        )
        fill, max_len = cfg.seq.fill, cfg.seq.max_len
        if fill >= 0.5:
            self._length_range = (max(1, round((2 * fill - 1) * max_len)), max_len)
        else:
            self._length_range = (1, max(1, round(2 * fill * max_len)))

    def examples(self, split: int, indices: np.ndarray) -> tuple[_Examples, _Draws]:
        """The features of the examples at these global indices, and their random draws (for labels)."""
        cfg, truth = self.cfg, self.truth
        draws = _Draws(cfg.seed, split, indices)
        sparse = {
            name: draws.integers(_Field.USER, getattr(cfg.vocab, name), pos=i)[:, 0]
            for i, name in enumerate(USER_FEATURES)
        }
        ad = draws.integers(_Field.AD, cfg.vocab.ad_id)[:, 0]
        sparse["ad_id"] = ad
        sparse["ad_advertiser"] = truth.ad_advertiser[ad]
        sparse["ad_category"] = truth.advertiser_category[sparse["ad_advertiser"]]

        num_interests = 1 + draws.integers(_Field.NUM_INTERESTS, cfg.max_interests)
        interests = _distinct_ids(draws, _Field.INTERESTS, cfg.vocab.user_interests, cfg.max_interests)

        max_len = cfg.seq.max_len
        lo, hi = self._length_range
        length = lo + draws.integers(_Field.LENGTH, hi - lo + 1)
        length[draws.uniform(_Field.EMPTY) < cfg.seq.empty_share] = 0
        seq_mask = np.arange(max_len) < length
        cdf = np.cumsum(truth.action_probs)
        actions = np.minimum(np.searchsorted(cdf, draws.uniform(_Field.ACTION, max_len), side="right"), len(cdf) - 1)
        # padding sorts last (-1), valid gaps in decreasing order: the oldest event comes first
        gaps = np.where(seq_mask, draws.integers(_Field.GAP, cfg.vocab.seq_time_gap, max_len), -1)
        gaps = -np.sort(-gaps, axis=1)
        seq = {
            "seq_item": draws.integers(_Field.ITEM, cfg.vocab.seq_item, max_len),
            "seq_action": actions,
            "seq_time_gap": np.maximum(gaps, 0),
        }
        examples = _Examples(
            sparse=sparse,
            interests=interests,
            interest_mask=np.arange(cfg.max_interests) < num_interests,
            dense=draws.normal(_Field.DENSE, cfg.num_dense).astype(np.float32),
            seq=seq,
            seq_mask=seq_mask,
        )
        return examples, draws

    def _feature_logits(self, ex: _Examples) -> dict[str, np.ndarray]:
        """z_t without the sequence term, per task, [N] float64."""
        truth = self.truth
        weights = ex.interest_mask / ex.interest_mask.sum(axis=1, keepdims=True)
        mean_interest = np.einsum("nk,nkd->nd", weights, truth.interest_vectors[ex.interests])
        interest_ad = np.einsum("nd,nd->n", mean_interest, truth.ad_vectors[ex.sparse["ad_id"]])
        dense = ex.dense.astype(np.float64)
        logits = {}
        for task, t in truth.tasks.items():
            z = t.intercept + t.interest_ad * interest_ad + dense @ t.dense + t.dense_pair * dense[:, 0] * dense[:, 1]
            z = z + (weights * t.bias[INTERESTS][ex.interests]).sum(axis=1)
            for name in _BIASED_FEATURES:
                z = z + t.bias[name][ex.sparse[name]]
            logits[task] = z
        return logits

    def _conditional(
        self, logits: dict[str, np.ndarray], affinity: np.ndarray, seq: dict[str, np.ndarray], mask: np.ndarray
    ) -> list[np.ndarray]:
        """[p_click, p(conversion | click)] from the feature logits and the sequence (shapes broadcast)."""
        truth = self.truth
        return [
            _sigmoid(logits[task] + truth.tasks[task].sequence * _attend(truth, task, affinity, seq, mask))
            for task in TASKS
        ]

    def probabilities(self, ex: _Examples) -> np.ndarray:
        """[N, 2] float64: p_click and p(conversion | click)."""
        # s_j on the valid events only: [events, d] temporaries instead of [N, max_len, d]
        example = np.nonzero(ex.seq_mask)[0]
        items = self.truth.item_vectors[ex.seq["seq_item"][ex.seq_mask]]
        affinity = np.zeros(ex.seq_mask.shape)
        affinity[ex.seq_mask] = np.einsum("ed,ed->e", items, self.truth.ad_vectors[ex.sparse["ad_id"][example]])
        return np.stack(self._conditional(self._feature_logits(ex), affinity, ex.seq, ex.seq_mask), axis=1)

    def blind_probabilities(self, ex: _Examples) -> np.ndarray:
        """[N, 2] float64: E[p_click] and E[p_click p(conversion | click)] over the sequence given all
        other features, the optimum for a model that ignores the sequence. Sequences are independent
        of the other features, so this is a Monte Carlo average over `_BLIND_SAMPLES` sequences."""
        ref, _ = self.examples(_BLIND_SPLIT, np.arange(_BLIND_SAMPLES))
        ref_items = self.truth.item_vectors[ref.seq["seq_item"]]  # [M, L, d]
        logits = {task: z[:, None] for task, z in self._feature_logits(ex).items()}  # [N, 1] vs M
        ad_vectors = self.truth.ad_vectors[ex.sparse["ad_id"]]
        out = np.empty((len(ad_vectors), len(TASKS)))
        chunk = max(1, 2**22 // ref.seq_mask.size)  # bounds the [chunk, M, L] temporaries
        for lo in range(0, len(ad_vectors), chunk):
            rows = slice(lo, lo + chunk)
            affinity = np.einsum("nd,mld->nml", ad_vectors[rows], ref_items)
            click, conversion = self._conditional(
                {task: z[rows] for task, z in logits.items()}, affinity, ref.seq, ref.seq_mask
            )
            out[rows] = np.stack([click.mean(axis=1), (click * conversion).mean(axis=1)], axis=1)
        return out

    def probabilities_and_labels(self, split: int, indices: np.ndarray) -> tuple[_Examples, np.ndarray, np.ndarray]:
        """Examples, marginal probabilities [N, 2] (p_click, p_click p(conv | click)), labels [N, 2]."""
        ex, draws = self.examples(split, indices)
        p = self.probabilities(ex)
        click = draws.uniform(_Field.CLICK)[:, 0] < p[:, 0]
        conversion = click & (draws.uniform(_Field.CONVERSION)[:, 0] < p[:, 1])
        marginal = np.stack([p[:, 0], p[:, 0] * p[:, 1]], axis=1)
        return ex, marginal, np.stack([click, conversion], axis=1).astype(np.float32)

    def batch(self, split: int, indices: np.ndarray) -> Batch:
        """The examples at these global indices as KJTs (int64 values and lengths) + dense + labels."""
        ex, _, labels = self.probabilities_and_labels(split, indices)
        n = len(indices)
        ones = np.ones(n, dtype=np.int64)
        sparse = KeyedJaggedTensor(
            keys=list(self.schema.sparse),
            values=torch.from_numpy(
                np.concatenate(
                    [ex.sparse[name] for name in USER_FEATURES]
                    + [ex.interests[ex.interest_mask]]
                    + [ex.sparse[name] for name in AD_FEATURES]
                )
            ),
            lengths=torch.from_numpy(
                np.concatenate([ones] * len(USER_FEATURES) + [ex.interest_mask.sum(axis=1)] + [ones] * len(AD_FEATURES))
            ),
        )
        seq_lengths = ex.seq_mask.sum(axis=1)
        sequence = KeyedJaggedTensor(
            keys=list(SEQUENCE_FEATURES),
            values=torch.from_numpy(np.concatenate([ex.seq[name][ex.seq_mask] for name in SEQUENCE_FEATURES])),
            lengths=torch.from_numpy(np.tile(seq_lengths, len(SEQUENCE_FEATURES))),
        )
        dense, labels = torch.from_numpy(ex.dense), torch.from_numpy(labels)
        return Batch(sparse=sparse, sequence=sequence, dense=dense, labels=labels)


# ------------------------------------------------------------------------------- streaming


class _StepStream(IterableDataset):
    """This rank's batches of global steps start, start + 1, ... (< stop, or forever if stop is None).

    Step s covers global examples [s B, (s+1) B); rank r takes the contiguous B / W of them at
    s B + r B / W. DataLoader worker w of n takes steps start + w, start + w + n, ...; the DataLoader
    reads its workers round-robin, so the order is the same for every number of workers.
    """

    def __init__(
        self, generator: _Generator, split: int, start: int, stop: int | None, rank: int, world_size: int
    ) -> None:
        self.generator, self.split, self.start, self.stop = generator, split, start, stop
        self.per_rank = generator.cfg.batch_size // world_size
        self.offset = rank * self.per_rank

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        first = self.start + worker
        steps = itertools.count(first, num_workers) if self.stop is None else range(first, self.stop, num_workers)
        for step in steps:
            lo = step * self.generator.cfg.batch_size + self.offset
            yield self.generator.batch(self.split, np.arange(lo, lo + self.per_rank, dtype=np.int64))


class SyntheticDataset:
    """The synthetic stream seen from one rank (see the module docstring for the generative process).

    Args:
        cfg: the `data` config section.
        rank, world_size: this process's place among the data-parallel ranks; each rank reads a
            disjoint, contiguous shard of every global batch and the union is the 1-rank stream.

    Example::

        ds = SyntheticDataset(SyntheticConfig(batch_size=256), rank=0, world_size=2)
        batch = next(ds.train_batches())  # 128 examples: global rows 0..127 of step 0
        ds.bayes_ne()                     # {"click": ..., "conversion": ...}
    """

    def __init__(self, cfg: SyntheticConfig, rank: int = 0, world_size: int = 1) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        if cfg.batch_size % world_size:
            raise ValueError(
                f"data.batch_size={cfg.batch_size} is the global batch and must be divisible by the "
                f"world size {world_size}"
            )
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self._generator = _Generator(cfg)
        self._bayes: tuple[dict[str, float], dict[str, float]] | None = None  # (NE, calibration)
        self._eval_truth: torch.Tensor | None = None

    @property
    def schema(self) -> Schema:
        return self._generator.schema

    @property
    def truth(self) -> PlantedTruth:
        """The hidden parameters the labels are drawn from."""
        return self._generator.truth

    @property
    def eval_steps(self) -> int:
        """Global batches in the eval split."""
        return math.ceil(self.cfg.eval_examples / self.cfg.batch_size)

    @property
    def eval_size(self) -> int:
        """Examples in the eval split: `eval_examples` rounded up to whole global batches."""
        return self.eval_steps * self.cfg.batch_size

    def train_batches(self, start_step: int = 0) -> Iterator[Batch]:
        """This rank's batches of global steps start_step, start_step + 1, ... forever.

        A run resumed at step s passes start_step=s and continues the stream exactly.
        """
        return self._load(_StepStream(self._generator, _SPLITS["train"], start_step, None, self.rank, self.world_size))

    def eval_batches(self) -> Iterator[Batch]:
        """This rank's share of each of the `eval_steps` global batches of the fixed eval split."""
        return self._load(_StepStream(self._generator, _SPLITS["eval"], 0, self.eval_steps, self.rank, self.world_size))

    def _load(self, stream: _StepStream) -> Iterator[Batch]:
        return load_batches(stream, self.cfg.num_workers)

    def bayes_ne(self) -> dict[str, float]:
        """Normalized entropy of the true probabilities on the whole eval split, per task (same on
        every rank): what the Bayes-optimal model scores, which no model beats in expectation."""
        return dict(self._bayes_scores()[0])

    def eval_true_probabilities(self) -> torch.Tensor:
        """[n, num_tasks] float64 true probabilities of this rank's eval rows, in `eval_batches`'
        order (its share of each global eval batch, batch by batch), for metrics measured against
        the truth instead of the drawn labels. Computed once (every eval of a run asks for it)."""
        if self._eval_truth is None:
            steps = np.arange(self.eval_steps, dtype=np.int64)[:, None] * self.cfg.batch_size
            per_rank = self.cfg.batch_size // self.world_size
            rows = steps + self.rank * per_rank + np.arange(per_rank, dtype=np.int64)
            self._eval_truth = self.true_probabilities(rows.reshape(-1))
        return self._eval_truth

    def bayes_calibration(self) -> dict[str, float]:
        """sum(true p) / sum(labels) on the whole eval split, per task: the calibration the
        Bayes-optimal model scores. It is not 1 because the labels are a finite draw (on 16k
        examples, a few percent off); a model's calibration divided by it is its calibration
        against the true probabilities."""
        return dict(self._bayes_scores()[1])

    def _bayes_scores(self) -> tuple[dict[str, float], dict[str, float]]:
        if self._bayes is None:
            probs, labels = [], []
            for lo in range(0, self.eval_size, _CHUNK):
                indices = np.arange(lo, min(lo + _CHUNK, self.eval_size))
                _, p, y = self._generator.probabilities_and_labels(_SPLITS["eval"], indices)
                probs.append(p)
                labels.append(y)
            p, y = torch.from_numpy(np.concatenate(probs)), torch.from_numpy(np.concatenate(labels))
            ne = {task: normalized_entropy(p[:, i], y[:, i]) for i, task in enumerate(TASKS)}
            calibration = {task: (p[:, i].sum() / y[:, i].sum()).item() for i, task in enumerate(TASKS)}
            self._bayes = ne, calibration
        return self._bayes

    def true_probabilities(
        self, indices: Sequence[int] | np.ndarray | torch.Tensor, split: str = "eval", sequence_blind: bool = False
    ) -> torch.Tensor:
        """[N, num_tasks] float64 Bayes-optimal predictions for the examples at these global indices:
        p_click and the marginal p_click * p(conversion | click).

        With `sequence_blind`, the expectation of those over the sequence given all other features:
        the optimum for a model that ignores the sequence (Monte Carlo over 128 reference sequences).
        """
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {sorted(_SPLITS)}, got {split!r}")
        indices = np.asarray(indices, dtype=np.int64)
        if sequence_blind:
            ex, _ = self._generator.examples(_SPLITS[split], indices)
            return torch.from_numpy(self._generator.blind_probabilities(ex))
        return torch.from_numpy(self._generator.probabilities_and_labels(_SPLITS[split], indices)[1])
