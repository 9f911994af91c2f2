"""benchmarks.writeback_probe: its L2 flushes touch every element (CPU) and its per-call timer
counts the call alone (GPU; the probe itself runs on the H200)."""

import pytest
import torch

from benchmarks.writeback_probe import _events_ms, read_through, write_through


def test_flushes_touch_every_element():
    scratch = torch.arange(10, dtype=torch.float32)
    sink = torch.full((1,), float("nan"))
    read_through(scratch, sink)
    assert sink.item() == 45.0
    write_through(scratch)
    assert torch.equal(scratch, torch.ones(10))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_events_time_each_call_after_its_preparation_alone():
    prepared = []
    # the preparation spins ~10x longer than the call: a timer that counted it would say so
    before = lambda: (prepared.append(1), torch.cuda._sleep(10_000_000))
    call = lambda: torch.cuda._sleep(1_000_000)
    ms = _events_ms(call, before, 5)
    assert len(prepared) == 5
    spin_ms = _events_ms(call, lambda: None, 5)
    assert 0 < ms < 2 * spin_ms
