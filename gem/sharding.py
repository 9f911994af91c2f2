"""Embedding sharding with TorchRec DMP: planner, fused sparse optimizer, world-size-free init."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torchrec
from torch import nn
from torchrec import EmbeddingBagCollection, EmbeddingCollection
from torchrec.distributed import DistributedModelParallel
from torchrec.distributed.embedding import EmbeddingCollectionSharder
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.distributed.types import ShardedModule
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward

from gem.distributed import Dist


@dataclass
class ShardingConfig:
    # "fused": the FBGEMM table-batched kernel with the optimizer applied inside backward. It is
    # also the only kernel whose sharded EmbeddingCollection returns unpooled rows on CPU.
    compute_kernel: str = "fused"
    # The planner picks per table among these (by its cost model). data_parallel is excluded
    # because it has no fused kernel; column_wise because row-wise Adagrad keeps one accumulator
    # per row *per shard*: split by columns, a row's update would depend on the number of ranks
    # (the planner picked column_wise for every gem_base table at 4 ranks when it was allowed).
    sharding_types: list[str] = field(default_factory=lambda: ["table_wise", "row_wise"])


@dataclass
class SparseOptimConfig:
    """Row-wise Adagrad fused into the embedding backward (one accumulator per row)."""

    lr: float = 0.05
    eps: float = 1e-8
    # after step 0: "constant", or "cosine" (down to min_lr_ratio * lr at trainer.max_steps, no
    # warm-up), set on the fused kernels before every step (`gem.optim.set_sparse_lr`)
    schedule: str = "constant"
    min_lr_ratio: float = 0.1


def _embedding_modules(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, (EmbeddingBagCollection, EmbeddingCollection))]


def shard_model(
    model: nn.Module, cfg: ShardingConfig, sparse_optim: SparseOptimConfig, env: Dist, local_batch_size: int
) -> DistributedModelParallel:
    """Plan, shard and wrap `model`: tables (built on meta) are sharded over the ranks with the
    sparse optimizer fused into backward; the dense rest becomes data-parallel (DDP when W > 1).
    """
    for module in _embedding_modules(model):
        apply_optimizer_in_backward(
            torchrec.optim.RowWiseAdagrad, module.parameters(), {"lr": sparse_optim.lr, "eps": sparse_optim.eps}
        )
    planner = sharding_planner(model, cfg, env.world_size, env.device.type, local_batch_size)
    module_sharders = sharders()
    plan = planner.collective_plan(model, module_sharders, dist.GroupMember.WORLD)
    return DistributedModelParallel(model, device=env.device, sharders=module_sharders, plan=plan)


def sharders() -> list:
    """Fresh sharders for our two table collections (DMP keeps them: no sharing between models)."""
    return [EmbeddingBagCollectionSharder(), EmbeddingCollectionSharder()]


def sharding_planner(
    model: nn.Module, cfg: ShardingConfig, world_size: int, device_type: str, local_batch_size: int
) -> EmbeddingShardingPlanner:
    """TorchRec's planner with this config's choices for every table (a cost model: no device needed)."""
    tables = []
    for module in _embedding_modules(model):
        configs = module.embedding_bag_configs() if isinstance(module, EmbeddingBagCollection) else module.embedding_configs()
        tables += [t.name for t in configs]
    constraints = {
        name: ParameterConstraints(sharding_types=list(cfg.sharding_types), compute_kernels=[cfg.compute_kernel])
        for name in tables
    }
    topology = Topology(world_size=world_size, compute_device=device_type)
    return EmbeddingShardingPlanner(topology=topology, batch_size=local_batch_size, constraints=constraints)


def compile_dense_children(model: DistributedModelParallel, compile_threads: int | None = 1) -> None:
    """torch.compile, in place, every child of the wrapped model that holds parameters and is not a
    sharded table collection. The model's own forward stays eager, so the sharded collections'
    input/output distribution (and TorchRec's pipeline tracing) is untouched. compile_threads:
    Inductor's compile workers (1: in this process, no worker subprocesses; None: Inductor's own
    setting)."""
    if compile_threads is not None:
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = compile_threads
    for child in model.module.children():
        if not isinstance(child, ShardedModule) and next(child.parameters(), None) is not None:
            child.compile()


_MASK64 = (1 << 64) - 1


def _i64(x: int) -> int:
    """An unsigned 64-bit constant as the signed int64 torch stores."""
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _shr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's >> is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def hash_uniform(key: int, index: torch.Tensor) -> torch.Tensor:
    """splitmix64(key, index) -> float32 uniform in [0, 1), elementwise, any device."""
    x = index.to(torch.int64) * _i64(0x9E3779B97F4A7C15) + _i64(key * 0xD1B54A32D192ED03)
    x = (x ^ _shr(x, 30)) * _i64(0xBF58476D1CE4E5B9)
    x = (x ^ _shr(x, 27)) * _i64(0x94D049BB133111EB)
    x = x ^ _shr(x, 31)
    return (_shr(x, 11).double() * 2.0**-53).float()


@torch.no_grad()
def init_embeddings(model: DistributedModelParallel, seed: int, rows_per_chunk: int = 1 << 16) -> None:
    """Overwrite every embedding table with U(-1/sqrt(N), 1/sqrt(N)) values that depend only on
    (seed, table, row, column), so that any sharding on any number of ranks holds the same tables
    as a one-rank run (TorchRec initialises each shard from its own RNG stream otherwise).
    """
    for name, tensor in model.state_dict().items():
        if not hasattr(tensor, "local_shards"):
            continue
        num_rows, dim = tensor.size()
        bound = num_rows ** -0.5
        key = _i64(seed * 0x100000001B3 + zlib.crc32(name.encode()))
        for shard in tensor.local_shards():
            row0, col0 = shard.metadata.shard_offsets
            rows, cols = shard.tensor.shape
            col_index = torch.arange(col0, col0 + cols, device=shard.tensor.device)
            for start in range(0, rows, rows_per_chunk):
                stop = min(rows, start + rows_per_chunk)
                row_index = torch.arange(row0 + start, row0 + stop, device=shard.tensor.device)
                u = hash_uniform(key, row_index[:, None] * dim + col_index[None, :])
                shard.tensor[start:stop].copy_((2.0 * u - 1.0) * bound)
