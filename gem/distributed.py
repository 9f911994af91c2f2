"""Process group set-up and teardown for `python train.py` (1 process) and torchrun (N processes)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Dist:
    """Where this process sits: rank among world_size ranks, and the device it computes on."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    # A gloo group for host-side agreement (stop flags) that never waits on the GPU.
    control_group: dist.ProcessGroup | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str = "auto", timeout_s: float = 600.0) -> Dist:
    """Join (or create) the default process group: NCCL on CUDA, gloo on CPU.

    Under torchrun the rendezvous comes from the environment (RANK, WORLD_SIZE, MASTER_ADDR, ...).
    A plain `python train.py` gets a one-rank group on an in-memory store, so that TorchRec's
    DistributedModelParallel and the collectives in the trainer run the same code either way.
    """
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"trainer.device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("trainer.device=cuda but no CUDA device is visible")

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device == "cuda" and local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"local rank {local_rank} needs its own GPU, but only {torch.cuda.device_count()} CUDA device(s) "
            f"are visible: start at most that many processes per node (torchrun --nproc_per_node), or "
            f"set trainer.device=cpu"
        )
    if device == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        backend = "nccl"
    else:
        dev = torch.device("cpu")
        backend = "gloo"

    timeout = timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        if "RANK" in os.environ:
            kwargs = {"device_id": dev} if device == "cuda" else {}
            dist.init_process_group(backend, timeout=timeout, **kwargs)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    control = dist.new_group(backend="gloo") if dist.get_world_size() > 1 else None
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank, dev, control)


def agree_max(env: Dist, values: list[int]) -> list[int]:
    """Element-wise max of small host-side integers over all ranks (no GPU involvement)."""
    if env.control_group is None:
        return values
    t = torch.tensor(values, dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=env.control_group)
    return t.tolist()


def shutdown(exit_code: int = 0) -> None:
    """Destroy the process group and leave at once.

    torchrun + gloo workers abort in interpreter teardown ~5-10% of the time; skipping teardown
    with os._exit after flushing is the reliable way out. Only used by the entry point.
    """
    if dist.is_initialized():
        dist.destroy_process_group()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(exit_code)


def gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's `tensor` ([n_rank, ...], n_rank may differ) in rank order."""
    if dist.get_world_size() == 1:
        return tensor
    count = torch.tensor([tensor.shape[0]], device=tensor.device)
    counts = [torch.zeros_like(count) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, count)
    sizes = [int(c.item()) for c in counts]
    padded = tensor.new_zeros((max(sizes), *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return torch.cat([part[:n] for part, n in zip(parts, sizes)])


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """All-reduce average of a scalar tensor (a host sync: call at logging points only)."""
    if dist.get_world_size() > 1:
        value = value.clone()
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return value
