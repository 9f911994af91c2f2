"""Run guards: non-finite loss/gradient detection without stalling the GPU, and preemption.

`NonFiniteWatch` copies each step's "bad" flag to pinned host memory asynchronously and reads it
once the copy has landed, so `trainer.nonfinite=stop` costs no device->host sync in the step (the
stop happens at most a few steps late; the last checkpoint predates the bad step). The `skip`
policy must decide before backward and so reads the flag at once (one sync per step).

`PreemptionFlag` turns SIGTERM into a flag the loop checks between steps.
"""

from __future__ import annotations

import signal
from collections import deque

import torch


class NonFiniteError(RuntimeError):
    """Training produced a non-finite loss or gradient and the policy is to stop."""


class NonFiniteWatch:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pending: deque[tuple[int, torch.Tensor, torch.cuda.Event | None]] = deque()

    def record(self, step: int, bad: torch.Tensor) -> None:
        """Queue `bad` (a 0-dim bool device tensor) for `step`."""
        if self.device.type != "cuda":
            self._pending.append((step, bad.clone(), None))
            return
        host = torch.empty((), dtype=torch.bool, pin_memory=True)
        host.copy_(bad, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._pending.append((step, host, event))

    def first_bad_step(self) -> int:
        """The earliest recorded step known to be bad, or 0; only looks at flags that have landed."""
        while self._pending:
            step, flag, event = self._pending[0]
            if event is not None and not event.query():
                break
            self._pending.popleft()
            if bool(flag):
                return step
        return 0


class PreemptionFlag:
    """Set by SIGTERM (a scheduler's preemption notice); the previous handler is restored on close."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.requested = True

    def close(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
