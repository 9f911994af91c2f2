"""What a run leaves behind: metrics.jsonl, TensorBoard scalars and a progress bar (rank 0 only)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tqdm import tqdm


def _flatten(prefix: str, value: Any) -> dict[str, float]:
    if isinstance(value, dict):
        out: dict[str, float] = {}
        for k, v in value.items():
            out.update(_flatten(f"{prefix}/{k}", v))
        return out
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {prefix: float(value)}
    return {}


def _jsonable(value: Any) -> Any:
    # JSON has no NaN/inf; write null so every line parses with strict readers.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


class RunLog:
    """Writes one JSON object per line to `run_dir/metrics.jsonl` and mirrors the numbers to
    TensorBoard under `run_dir/tb`. On ranks other than 0 every method is a no-op.
    """

    def __init__(self, run_dir: Path, enabled: bool, max_steps: int, examples_per_step: int,
                 tensorboard: bool = True, progress: bool = True) -> None:
        self.enabled = enabled
        self._jsonl = None
        self._tb = None
        self._bar = None
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(run_dir / "metrics.jsonl", "a", buffering=1)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"))
        if progress:
            self._bar = tqdm(total=max_steps * examples_per_step, unit="ex", unit_scale=True, dynamic_ncols=True,
                             desc="train")

    def advance(self, examples: int, **postfix: float) -> None:
        if self._bar is not None:
            self._bar.update(examples)
            if postfix:
                self._bar.set_postfix({k: f"{v:.4g}" for k, v in postfix.items()}, refresh=False)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self._jsonl.write(json.dumps(_jsonable(record)) + "\n")
        if self._tb is not None and "step" in record:
            split = record.get("split", "train")
            for tag, value in _flatten(split, {k: v for k, v in record.items() if k not in ("step", "split")}).items():
                if math.isfinite(value):
                    self._tb.add_scalar(tag, value, record["step"])
        if self._bar is not None and record.get("split") == "eval":
            ne = " ".join(f"{t}={v:.4f}" for t, v in record["ne"].items())
            self._bar.write(f"step {record['step']}: eval NE {ne}")

    def close(self) -> None:
        for handle in (self._bar, self._tb, self._jsonl):
            if handle is not None:
                handle.close()
        self._bar = self._tb = self._jsonl = None
