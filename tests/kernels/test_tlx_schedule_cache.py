"""`kernels.tlx_schedule.cached_schedule`: one schedule build per (offsets, configuration), never a
stale one. Runs on the CPU: the builder is swapped for its torch twin, counted."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import torch

from kernels import tlx_schedule
from kernels.common import versioned_offsets
from kernels.tlx_schedule import _schedule_torch, cached_schedule


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple]]:
    """Counted builds, inside the front door's eager-call promise (offsets change with a version bump)."""
    calls: list[tuple] = []

    def counted(q_off, k_off, *config, launch_dependents=False):
        calls.append(config)
        return _schedule_torch(q_off, k_off, *config)

    monkeypatch.setattr(tlx_schedule, "build_schedule", counted)
    tlx_schedule.clear_schedule_cache()
    with versioned_offsets():
        yield calls


def _offsets(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _schedule(q_off, k_off, num_mb=3, block_m=64, kv_stationary=False):
    B = k_off.numel() - 1
    return cached_schedule(q_off, k_off, B, 0, num_mb, None, True, False, block_m, 64, kv_stationary)


def test_layers_sharing_offsets_build_each_configuration_once(builds: list[tuple]) -> None:
    offsets = _offsets([130, 0, 7, 64])
    first = _schedule(offsets, offsets)
    for _ in range(3):  # the next layers, and the backward of each
        again = _schedule(offsets, offsets)
        assert again[0] is first[0] and again[1] is first[1]
    _schedule(offsets, offsets, kv_stationary=True)  # the dK/dV schedule: another configuration
    _schedule(offsets, offsets, num_mb=2, block_m=128)  # the dQ schedule
    assert len(builds) == 3
    fresh = _schedule_torch(offsets, offsets, 4, 0, 3, None, True, False, 64, 64, False)
    assert torch.equal(first[0], fresh[0]) and torch.equal(first[1], fresh[1])


def test_an_in_place_write_to_the_offsets_rebuilds(builds: list[tuple]) -> None:
    offsets = _offsets([5, 5, 5, 5])
    before = _schedule(offsets, offsets)[0].clone()
    offsets.copy_(_offsets([150, 0, 30, 0]))  # a reused buffer refilled with the next batch
    after = _schedule(offsets, offsets)
    assert len(builds) == 2 and not torch.equal(before, after[0])
    fresh = _schedule_torch(offsets, offsets, 4, 0, 3, None, True, False, 64, 64, False)
    assert torch.equal(after[0], fresh[0]) and torch.equal(after[1], fresh[1])


def test_another_query_offsets_tensor_is_another_schedule(builds: list[tuple]) -> None:
    key_offsets = _offsets([100, 3, 60])
    one_query_each = torch.arange(4, dtype=torch.int32)
    many_queries = _offsets([100, 3, 60])
    a = _schedule(one_query_each, key_offsets)
    b = _schedule(many_queries, key_offsets)
    assert len(builds) == 2 and not torch.equal(a[0], b[0])
    # a new tensor with the id of a dead one must not inherit its schedule
    del one_query_each
    gc.collect()
    for _ in range(5):
        _schedule(torch.arange(4, dtype=torch.int32) * 0, key_offsets)  # all-empty queries
    assert len(builds) == 7
    # and the dead query offsets' entries do not pile up while the key offsets live
    assert len(tlx_schedule._SCHEDULES[key_offsets]) == 2


def test_nothing_is_cached_outside_the_front_doors_eager_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled graphs call the backends through the custom op, outside the promise: Inductor
    refills reused buffers from kernels without a version bump, so a cached schedule could be stale."""
    calls: list[tuple] = []
    monkeypatch.setattr(tlx_schedule, "build_schedule",
                        lambda q, k, *config, **_: (calls.append(config), _schedule_torch(q, k, *config))[1])
    tlx_schedule.clear_schedule_cache()
    offsets = _offsets([7, 2])
    _schedule(offsets, offsets)
    _schedule(offsets, offsets)
    assert len(calls) == 2 and len(tlx_schedule._SCHEDULES) == 0


def test_launch_dependents_reaches_a_build_but_not_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PDL forward asks its build to let it start early (`FwdConfig.pdl`); the schedule itself is
    the same, so a cached one serves calls with and without the flag."""
    flags: list[bool] = []

    def counted(q_off, k_off, *config, launch_dependents=False):
        flags.append(launch_dependents)
        return _schedule_torch(q_off, k_off, *config)

    monkeypatch.setattr(tlx_schedule, "build_schedule", counted)
    tlx_schedule.clear_schedule_cache()
    offsets = _offsets([5, 0, 9])
    B = offsets.numel() - 1
    with versioned_offsets():
        first = cached_schedule(None, offsets, B, 128, 1, None, False, True, 128, 64,
                                launch_dependents=True)
        again = cached_schedule(None, offsets, B, 128, 1, None, False, True, 128, 64)
    assert flags == [True] and again is first
    cached_schedule(None, offsets, B, 128, 1, None, False, True, 128, 64, launch_dependents=True)
    assert flags == [True, True]  # outside the front door: built every call, the flag passed on


def test_entries_die_with_their_offsets(builds: list[tuple]) -> None:
    offsets = _offsets([3, 4])
    _schedule(offsets, offsets)
    assert len(tlx_schedule._SCHEDULES) == 1
    del offsets
    gc.collect()
    assert len(tlx_schedule._SCHEDULES) == 0


def test_inference_tensors_are_never_cached(builds: list[tuple]) -> None:
    with torch.inference_mode():
        offsets = _offsets([9, 1])
        _schedule(offsets, offsets)
        _schedule(offsets, offsets)
    assert len(builds) == 2 and len(tlx_schedule._SCHEDULES) == 0
