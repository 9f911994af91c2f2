"""Sharded, atomic, verifiable checkpoints with `torch.distributed.checkpoint` (DCP).

Layout under `<run_dir>/checkpoints/`::

    step_00000100/             a complete checkpoint (only ever created by one atomic rename)
        .metadata, __<rank>_0.distcp   DCP: model (sharded tables + dense), fused sparse optimizer,
                                       dense optimizer
        scheduler.pt                   the LR scheduler (replicated, written by rank 0)
        rng_rank<R>.pt                 each rank's RNG states
        MANIFEST.json                  written last: step, world size, data-stream position,
                                       size + CRC32 of every file
    step_00000200.tmp/         a save in progress (or one that crashed): never loaded, cleaned up

A crash mid-save leaves at most a `.tmp` directory, so the last complete checkpoint is untouched.
On resume every file is checked against the manifest; a partial or corrupt checkpoint is reported
and skipped in favour of the next older one. DCP reshards on load, so N ranks can resume M ranks'
checkpoint (tables re-split by the new plan; dense state is replicated).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

log = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^step_(\d{8})$")
MANIFEST = "MANIFEST.json"
SCHEDULER = "scheduler.pt"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used (missing, partial, corrupt, or from an incompatible run)."""


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def verify(path: Path) -> dict[str, Any]:
    """Return the manifest of a complete, intact checkpoint directory, or raise CheckpointError."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{path}: no {MANIFEST} (the save did not finish)")
    try:
        manifest = json.loads(manifest_path.read_text())
        files = manifest["files"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path}: unreadable {MANIFEST}: {err}") from None
    for name, expected in files.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{path}: {name} is missing")
        if file.stat().st_size != expected["size"]:
            raise CheckpointError(f"{path}: {name} has {file.stat().st_size} bytes, the manifest says {expected['size']}")
        if _crc32(file) != expected["crc32"]:
            raise CheckpointError(f"{path}: {name} fails its CRC32 check (corrupt)")
    return manifest


class Checkpointer:
    """Saves and restores everything a run needs to continue exactly where it stopped.

    Args:
        root: the checkpoint directory (`<run_dir>/checkpoints`), shared by all ranks.
        keep: how many complete checkpoints to keep (oldest deleted first).
    """

    def __init__(self, root: Path, keep: int) -> None:
        self.root = root
        self.keep = keep
        self.rank = dist.get_rank()

    def complete(self) -> list[Path]:
        """Complete-looking checkpoint directories, newest first (not yet verified)."""
        if not self.root.is_dir():
            return []
        found = [p for p in self.root.iterdir() if p.is_dir() and _STEP_DIR.match(p.name)]
        return sorted(found, key=lambda p: p.name, reverse=True)

    @staticmethod
    def _state(model: torch.nn.Module, dense_optimizer: Any) -> dict[str, Any]:
        return {
            "model": model.state_dict(),
            "sparse_optimizer": model.fused_optimizer.state_dict(),
            "dense_optimizer": dense_optimizer.state_dict(),
        }

    def save(self, step: int, model: torch.nn.Module, dense_optimizer: Any, scheduler: Any,
             position: dict[str, int]) -> Path:
        """Collective: every rank calls it at the same step."""
        final = self.root / f"step_{step:08d}"
        tmp = final.with_name(final.name + ".tmp")
        if self.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        dist.barrier()
        dcp.save(self._state(model, dense_optimizer), checkpoint_id=str(tmp))
        torch.save(_rng_state(), tmp / f"rng_rank{self.rank}.pt")
        if self.rank == 0:  # small and replicated: one copy outside DCP
            torch.save(scheduler.state_dict(), tmp / SCHEDULER)
        dist.barrier()  # every rank's files are written
        if self.rank == 0:
            files = {p.name: {"size": p.stat().st_size, "crc32": _crc32(p)} for p in sorted(tmp.iterdir())}
            manifest = {"step": step, "world_size": dist.get_world_size(), "position": position, "files": files}
            partial = tmp / (MANIFEST + ".partial")
            with open(partial, "w") as f:
                json.dump(manifest, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, tmp / MANIFEST)
            _fsync_dir(tmp)
            if final.exists():  # a re-save of the same step (e.g. after a resume): replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync_dir(self.root)
            self._prune()
        dist.barrier()
        return final

    def _prune(self) -> None:
        for stale in self.root.glob("step_*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)
        for old in self.complete()[self.keep:]:
            shutil.rmtree(old, ignore_errors=True)

    def find_latest(self) -> tuple[Path | None, list[str]]:
        """Rank 0 verifies checkpoints newest first; all ranks get the first intact one (or None)
        and the reasons the newer ones were skipped."""
        choice: list[Any] = [None, []]
        if self.rank == 0:
            for path in self.complete():
                try:
                    verify(path)
                    choice[0] = str(path)
                    break
                except CheckpointError as err:
                    choice[1].append(str(err))
        dist.broadcast_object_list(choice, src=0)
        return (Path(choice[0]) if choice[0] else None), choice[1]

    def load(self, path: Path, model: torch.nn.Module, dense_optimizer: Any, scheduler: Any) -> dict[str, Any]:
        """Restore `path` into the live objects; returns the manifest (step, position, ...)."""
        manifest = verify(path) if self.rank == 0 else None
        box = [manifest]
        dist.broadcast_object_list(box, src=0)
        manifest = box[0]
        # Optimizer state is created lazily; materialise it so DCP has tensors to load into.
        dense_optimizer.init_state()
        state = self._state(model, dense_optimizer)
        dcp.load(state, checkpoint_id=str(path))
        model.load_state_dict(state["model"])
        model.fused_optimizer.load_state_dict(state["sparse_optimizer"])
        dense_optimizer.load_state_dict(state["dense_optimizer"])
        scheduler.load_state_dict(torch.load(path / SCHEDULER, weights_only=False))
        # KeyedOptimizer does not save param groups; the scheduler's last LR is the one in force.
        for group, lr in zip(dense_optimizer.param_groups, scheduler.get_last_lr()):
            group["lr"] = lr
        rng = path / f"rng_rank{self.rank}.pt"
        if manifest["world_size"] == dist.get_world_size() and rng.is_file():
            _set_rng_state(torch.load(rng, weights_only=False))
        elif self.rank == 0:
            log.warning("resuming %d-rank checkpoint on %d ranks: RNG states are not restored",
                        manifest["world_size"], dist.get_world_size())
        return manifest
