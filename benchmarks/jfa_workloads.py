"""JFA benchmark workloads (issue 3) and their analytic cost model; importable and tested on CPU.

A workload is a jagged batch shape: PMA (one dense query of q_len rows broadcast over B key
sequences) or jagged self-attention. Lengths follow the issue's fill semantics: fill = mean
length / max, lengths uniform in [(2f-1)*max, max] for f >= 0.5, else uniform in [1, 2f*max].

Cost model (H200): forward FLOPs = 4*H*D*(visible query-key pairs), forward+backward = 3.5x;
minimal HBM bytes read each input and write each output once; the roofline floor is
max(FLOPs / 788 TFLOP/s, bytes / 4.3 TB/s).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from kernels.common import visible_pairs

PEAK_FLOPS = 788e12  # H200 dense bf16 tensor-core FLOP/s
PEAK_BYTES_PER_S = 4.3e12  # H200 HBM3e bandwidth, bytes/s
BACKWARD_FLOP_FACTOR = 3.5  # fwd+bwd FLOPs / fwd FLOPs (2.5 for the backward's five matmuls)
LSE_BYTES = 4  # float32 logsumexp per (row, head)


@dataclass(frozen=True)
class Workload:
    """One benchmark shape (bf16, D=128 unless stated)."""

    kind: str  # "pma" (broadcast_q) | "self" (jagged self-attention)
    batch: int
    max_len: int  # max key length (self-attention: also the max query length)
    heads: int
    fill: float
    q_len: int = 0  # PMA: rows of the broadcast query
    head_dim: int = 128
    causal: bool = False
    dtype: torch.dtype = torch.bfloat16
    family: str = ""  # name prefix of a non-issue group, e.g. "gem_base_"

    @property
    def name(self) -> str:
        shape = f"pma_q{self.q_len}" if self.kind == "pma" else "self"
        causal = "_causal" if self.causal else ""
        return f"{self.family}{shape}_B{self.batch}_L{self.max_len}_H{self.heads}{causal}_fill{self.fill}"


ISSUE_WORKLOADS: tuple[Workload, ...] = (
    *(Workload("pma", 1024, 1000, 3, fill, q_len=192) for fill in (0.1, 0.5, 0.9)),
    *(Workload("pma", 768, 1024, 4, fill, q_len=128) for fill in (0.1, 0.5, 0.9)),
    *(Workload("self", 768, 1024, 4, fill) for fill in (0.5, 1.0)),
)


# The self-attention and PMA calls of a `+experiment=gpu_base` training step (conf/model/gem_base.yaml:
# d=512, 4 heads of 128, 4 non-causal self-attention layers over up to 1000 events, a 128-query PMA;
# the one-query target attention is left out), selected by patterns starting with "gem_base".
MODEL_WORKLOADS: tuple[Workload, ...] = tuple(
    w for fill in (0.1, 0.5)
    for w in (Workload("self", 1024, 1000, 4, fill, family="gem_base_"),
              Workload("pma", 1024, 1000, 4, fill, q_len=128, family="gem_base_")))


def sample_lengths(batch: int, max_len: int, fill: float, generator: torch.Generator) -> Tensor:
    """int64 [batch] lengths with mean ~ fill * max_len, all in [1, max_len]."""
    if not 0 < fill <= 1:
        raise ValueError(f"fill: must be in (0, 1], got {fill}")
    if fill >= 0.5:
        low, high = max(round((2 * fill - 1) * max_len), 1), max_len
    else:
        low, high = 1, max(round(2 * fill * max_len), 1)
    return torch.randint(low, high + 1, (batch,), generator=generator)


@dataclass(frozen=True)
class Lengths:
    """Host-side sequence lengths of one sampled batch."""

    q: Tensor  # int64 [B] query rows per batch element (PMA: q_len each)
    kv: Tensor  # int64 [B]

    @staticmethod
    def sample(workload: Workload, seed: int = 0) -> Lengths:
        kv = sample_lengths(workload.batch, workload.max_len, workload.fill, torch.Generator().manual_seed(seed))
        q = torch.full_like(kv, workload.q_len) if workload.kind == "pma" else kv
        return Lengths(q=q, kv=kv)


@dataclass(frozen=True)
class Cost:
    """FLOPs and minimal HBM bytes of the forward and of forward+backward."""

    fwd_flops: float
    fwd_bytes: float
    fwd_bwd_flops: float
    fwd_bwd_bytes: float

    def floor_ms(self, passes: str) -> float:
        """Roofline floor in milliseconds for "fwd" or "fwd+bwd"."""
        if passes == "fwd":
            return max(self.fwd_flops / PEAK_FLOPS, self.fwd_bytes / PEAK_BYTES_PER_S) * 1e3
        return max(self.fwd_bwd_flops / PEAK_FLOPS, self.fwd_bwd_bytes / PEAK_BYTES_PER_S) * 1e3


def cost(workload: Workload, lengths: Lengths) -> Cost:
    """Forward reads Q (PMA: the shared q_len rows once), K, V and writes O and LSE; the backward
    reads Q, K, V, O, dO, LSE and writes dQ, dK, dV."""
    element = torch.finfo(workload.dtype).bits // 8
    row = workload.heads * workload.head_dim * element  # bytes of one [H, D] row
    q_rows = workload.q_len if workload.kind == "pma" else int(lengths.q.sum())
    out_rows = int(lengths.q.sum())
    kv_rows = int(lengths.kv.sum())
    q, kv, out = q_rows * row, 2 * kv_rows * row, out_rows * row
    lse = out_rows * workload.heads * LSE_BYTES
    fwd_bytes = q + kv + out + lse
    bwd_bytes = (q + kv + 2 * out + lse) + (q + kv)
    fwd_flops = 4.0 * workload.heads * workload.head_dim * int(visible_pairs(lengths.q, lengths.kv, workload.causal, None).sum())
    return Cost(fwd_flops, fwd_bytes, BACKWARD_FLOP_FACTOR * fwd_flops, fwd_bytes + bwd_bytes)


@dataclass
class JaggedInputs:
    """Device tensors of one batch in the JFA layout, plus the host lengths they came from."""

    query: Tensor  # [total_q, H, D], PMA: [q_len, H, D]
    key: Tensor  # [total_kv, H, D]
    value: Tensor
    query_offset: Tensor | None  # int32 [B+1]; None for PMA
    key_offset: Tensor  # int32 [B+1]
    max_seq_len_q: int
    max_seq_len_kv: int
    broadcast_q: bool
    causal: bool
    lengths: Lengths

    def leaves(self) -> list[Tensor]:
        return [self.query, self.key, self.value]


def make_inputs(workload: Workload, lengths: Lengths, device: torch.device | str, seed: int = 0) -> JaggedInputs:
    generator = torch.Generator().manual_seed(seed)

    def randn(rows: int) -> Tensor:
        x = torch.randn(rows, workload.heads, workload.head_dim, generator=generator)
        return x.to(device=device, dtype=workload.dtype)

    def offsets(lens: Tensor) -> Tensor:
        return torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(device=device, dtype=torch.int32)

    pma = workload.kind == "pma"
    total_kv = int(lengths.kv.sum())
    key_offset = offsets(lengths.kv)
    # self-attention passes one offsets tensor for both sides, as the model's layers do
    same = torch.equal(lengths.q, lengths.kv)  # False for different lengths or batch sizes
    return JaggedInputs(
        query=randn(workload.q_len if pma else int(lengths.q.sum())),
        key=randn(total_kv),
        value=randn(total_kv),
        query_offset=None if pma else (key_offset if same else offsets(lengths.q)),
        key_offset=key_offset,
        max_seq_len_q=workload.q_len if pma else int(lengths.q.max()),
        max_seq_len_kv=int(lengths.kv.max()),
        broadcast_q=pma,
        causal=workload.causal,
        lengths=lengths,
    )
