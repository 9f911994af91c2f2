"""The options of benchmarks.tlx_hopper_bench: A/B overrides, the power settle (the timing itself needs an H200)."""

import statistics

import pytest
import torch

from benchmarks.tlx_hopper_bench import parse_overrides
from kernels.tlx_hopper import BwdConfig, FwdConfig


def test_overrides_parse_python_literals():
    assert parse_overrides("num_buf_kv=5, tma_store_o=False", FwdConfig) == {"num_buf_kv": 5, "tma_store_o": False}
    assert parse_overrides("dq_block_n=128,dq_buf_kv=2", BwdConfig, "--ab-bwd") == {"dq_block_n": 128, "dq_buf_kv": 2}
    assert parse_overrides("", FwdConfig) == {}


@pytest.mark.parametrize("spec", ["num_buf_kv", "dq_buf_kv=4", "bogus=1"])
def test_overrides_reject_unknown_fields_naming_the_option(spec):
    with pytest.raises(SystemExit, match=r"--ab: expected FIELD=VALUE with FIELD one of .*num_buf_kv"):
        parse_overrides(spec, FwdConfig)


def test_backward_overrides_checked_against_bwd_config():
    with pytest.raises(SystemExit, match=r"--ab-bwd: .*dq_buf_kv.*got 'num_buf_kv=5'"):
        parse_overrides("num_buf_kv=5", BwdConfig, "--ab-bwd")


def test_override_configs_changes_the_launchers_defaults(monkeypatch):
    from benchmarks.tlx_hopper_bench import override_configs
    from kernels import tlx_hopper

    # monkeypatch restores the module's functions after the test
    monkeypatch.setattr(tlx_hopper, "fwd_config", tlx_hopper.fwd_config)
    monkeypatch.setattr(tlx_hopper, "bwd_config", tlx_hopper.bwd_config)
    default_fwd = tlx_hopper.fwd_config(128, True, 192)
    override_configs("num_buf_kv=2", "fused_dq=False,dkdv_buf_q=3")
    fwd = tlx_hopper.fwd_config(128, True, 192)
    bwd = tlx_hopper.bwd_config(128, False, 0, 4, 132)
    assert fwd.num_buf_kv == 2 and fwd.num_groups == default_fwd.num_groups
    assert not bwd.fused_dq and bwd.dkdv_buf_q == 3
    # the launcher's own choice still applies to the fields not named (q192 broadcast: 3 dq groups)
    assert tlx_hopper.bwd_config(128, True, 192, 3, 132).dq_groups == 3
    with pytest.raises(SystemExit, match="--bwd-config"):
        override_configs("", "no_such_field=1")


def test_settle_runs_the_call_back_to_back_with_fresh_grads(monkeypatch):
    import time

    import torch

    from benchmarks import tlx_hopper_bench

    syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    leaf = torch.zeros(2, requires_grad=True)
    calls = []

    def step():
        assert leaf.grad is None  # reset before every call, as do_bench's grad_to_none
        leaf.sum().backward()
        calls.append(time.perf_counter())

    start = time.perf_counter()
    tlx_hopper_bench.settle(step, [leaf], ms=30)
    assert calls[-1] - start >= 0.03 - 1e-3 and len(calls) > 1
    assert len(syncs) == len(calls) // 4 + 1  # every 4th call and once at the end
    n_before = len(calls)
    tlx_hopper_bench.settle(step, [leaf], ms=0)  # settling off: no call
    assert len(calls) == n_before


def test_bench_records_each_windows_host_time_per_call(monkeypatch):
    import types

    from benchmarks import tlx_hopper_bench

    # a clock that advances 10 us per read: call i of fn takes (i + 1) * 10 us of host time
    ticks = iter(range(10 ** 6))
    calls = []

    def fn():
        calls.append(1)
        for _ in range(len(calls) - 1):
            next(ticks)

    def fake_do_bench(f, warmup, rep, grad_to_none, return_mode):
        for _ in range(20):
            f()
        return 0.5

    monkeypatch.setattr(tlx_hopper_bench, "time", types.SimpleNamespace(perf_counter=lambda: 1e-5 * next(ticks)))
    monkeypatch.setattr(tlx_hopper_bench, "settle", lambda fn, grads: None)
    monkeypatch.setattr(tlx_hopper_bench.triton.testing, "do_bench", fake_do_bench)
    monkeypatch.setattr(tlx_hopper_bench.torch.cuda, "memory_stats", lambda: {})
    tlx_hopper_bench.TIMED_HOST_US.clear()
    tlx_hopper_bench.TIMED_MS.clear()
    assert tlx_hopper_bench.bench(fn) == 0.5
    assert len(calls) == 20
    # host times 10, 20, ..., 200 us: 10th percentile the third smallest, median between 100 and 110
    assert tlx_hopper_bench.TIMED_HOST_US == [[30.0, 105.0]]
    assert tlx_hopper_bench.TIMED_MS == [0.5]
    assert tlx_hopper_bench.host_percentiles_us([2e-6]) == [2.0, 2.0]


def test_ab_rounds_alternate_order_and_report_medians(monkeypatch):
    from benchmarks import tlx_hopper_bench

    order, times = [], {"A": iter([10.0, 12.0]), "B": iter([9.0, 11.0, 8.0])}

    def fake_bench(fn, grads=None):
        order.append(fn())
        return next(times[order[-1]])

    monkeypatch.setattr(tlx_hopper_bench, "bench", fake_bench)
    got = tlx_hopper_bench.ab_rounds(11.0, lambda: "A", lambda: "B", rounds=3)
    assert order == ["B", "B", "A", "A", "B"]  # A(first, given) B | B A | A B
    assert got["ab"] == 9.0  # median of 9, 11, 8
    assert got["base"] == 11.0  # median of 11, 10, 12
    assert got["ratio"] == 9.0 / 11.0  # median of 9/11, 11/10, 8/12
    order.clear()
    times.update(B=iter([5.0]))
    assert tlx_hopper_bench.ab_rounds(4.0, lambda: "A", lambda: "B", rounds=1) == \
        {"ab": 5.0, "base": 4.0, "ratio": 1.25}
    assert order == ["B"]


def test_timed_ab_takes_the_first_timing_and_records_only_its_own(monkeypatch, tmp_path):
    """A tool's A/B row (`timed_ab`): fn_a timed first, then the rounds; the row's timing records
    start at the call (an earlier row's are dropped). `write_rows` writes the rows as JSONL."""
    from benchmarks import tlx_hopper_bench

    order = []

    def fake_bench(fn, grads=None):
        order.append(fn())
        tlx_hopper_bench.TIMED_MS.append(2.0 if order[-1] == "A" else 1.0)
        return tlx_hopper_bench.TIMED_MS[-1]

    monkeypatch.setattr(tlx_hopper_bench, "bench", fake_bench)
    monkeypatch.setattr(tlx_hopper_bench, "flush_us", lambda: 75.0)
    for name in ("TIMED_MALLOCS", "TIMED_HOST_US"):
        monkeypatch.setattr(tlx_hopper_bench, name, [])
    monkeypatch.setattr(tlx_hopper_bench, "TIMED_MS", [9.0])  # an earlier row's
    ab, timed = tlx_hopper_bench.timed_ab(lambda: "A", lambda: "B", rounds=2)
    assert order == ["A", "B", "B", "A"]
    assert ab == {"ab": 1.0, "base": 2.0, "ratio": 0.5}
    assert timed["timed_ms"] == [2.0, 1.0, 1.0, 2.0]
    path = tmp_path / "rows.jsonl"
    tlx_hopper_bench.write_rows(str(path), [{"a": 1}, {"b": ab["ratio"]}])
    assert path.read_text() == '{"a": 1}\n{"b": 0.5}\n'


def test_baselines_once_each_or_in_abba_rounds_with_grads_reset_for_the_baseline_only(monkeypatch):
    from benchmarks import tlx_hopper_bench

    calls, times = [], {"tlx": iter([2.0, 2.2, 1.8, 2.1]), "base": iter([3.0, 3.6, 3.0, 3.0])}

    def fake_bench(fn, grads=None):
        calls.append((fn(), grads))
        return next(times[calls[-1][0]])

    monkeypatch.setattr(tlx_hopper_bench, "bench", fake_bench)
    monkeypatch.setattr(tlx_hopper_bench, "BASELINE_ROUNDS", 1)
    leaves = ["q", "k", "v"]
    assert tlx_hopper_bench.against_baseline(lambda: "tlx", lambda: "base", leaves) == (2.0, 3.0, None)
    assert calls == [("base", leaves), ("tlx", None)]  # runs 1-18's order, baseline first
    calls.clear()
    monkeypatch.setattr(tlx_hopper_bench, "BASELINE_ROUNDS", 3)
    got = tlx_hopper_bench.against_baseline(lambda: "tlx", lambda: "base", leaves)
    assert [c[0] for c in calls] == ["tlx", "base", "base", "tlx", "tlx", "base"]
    assert all(g is (leaves if name == "base" else None) for name, g in calls)
    # tlx 2.2, 1.8, 2.1 against base 3.6, 3.0, 3.0 (the first tlx timing is the first round's A)
    assert got == (2.1, 3.0, pytest.approx(statistics.median([3.6 / 2.2, 3.0 / 1.8, 3.0 / 2.1])))
    row = {}
    tlx_hopper_bench.put_pair(row, "tlx_fwd_ms", "varlen_fwd_ms", got)
    assert row == {"tlx_fwd_ms": 2.1, "varlen_fwd_ms": 3.0, "varlen_fwd_ms_per_tlx": got[2]}
    tlx_hopper_bench.put_pair(row, "tlx_fwdbwd_ms", "varlen_fwdbwd_ms", (1.0, 2.0, None))
    assert "varlen_fwdbwd_ms_per_tlx" not in row


@pytest.mark.parametrize("option", ["--ab-rounds", "--baseline-rounds", "--ab-schedule-fields",
                                    "--ab-schedule-warps"])
def test_rounds_below_one_rejected_naming_the_option(monkeypatch, option):
    from benchmarks import tlx_hopper_bench

    monkeypatch.setattr("sys.argv", ["tlx_hopper_bench", option, "0"])
    monkeypatch.setattr(tlx_hopper_bench, "SETTLE_MS", tlx_hopper_bench.SETTLE_MS)  # restored after
    monkeypatch.setattr(tlx_hopper_bench, "AB_ROUNDS", tlx_hopper_bench.AB_ROUNDS)
    monkeypatch.setattr(tlx_hopper_bench, "BASELINE_ROUNDS", tlx_hopper_bench.BASELINE_ROUNDS)
    monkeypatch.setattr(tlx_hopper_bench, "AB_SCHEDULE", {})
    with pytest.raises(SystemExit, match=rf"{option}: must be >= 1, got 0"):
        tlx_hopper_bench.main()


def test_only_selects_the_shapes_matching_any_substring():
    from benchmarks.tlx_hopper_bench import selected_shapes, shapes

    names = [sh["name"] for sh in selected_shapes("self,dense")]
    assert names == ["self B768 fill0.5", "self B768 fill1.0", "dense B4 H32 N4096"]
    assert [sh["name"] for sh in selected_shapes("q128 fill0.9")] == ["PMA q128 fill0.9"]
    assert len(selected_shapes("")) == len(shapes())


@pytest.mark.parametrize("overrides,want", [
    ({}, [(None, None), (None, None)]),
    (dict(fields=1), [(1, None), (1, None)]),
    (dict(fields=6), [(6, None), (5, None)]),
    (dict(num_warps=2), [(None, 2), (None, 2)]),
    (dict(fields=6, num_warps=1), [(6, 1), (5, 1)]),
])
def test_schedule_ab_changes_every_build_and_restores_the_builder(monkeypatch, overrides, want):
    """The A/B's sides build through `with_schedule`: the candidate's builds get its warps and at
    most its classes per pass (1,024 entries hold five fields), the default's nothing, and the
    module's builder is back after each call, also when the call raises."""
    from benchmarks.tlx_hopper_bench import with_schedule
    from kernels import tlx_schedule

    seen = []
    monkeypatch.setattr(tlx_schedule, "build_schedule", lambda *args, **kwargs: seen.append(
        (kwargs.get("fields"), kwargs.get("num_warps"))))
    recorder = tlx_schedule.build_schedule

    def call():  # a launcher: a 200-entry build (7 fields hold it), then a 1,024-entry one
        tlx_schedule.build_schedule(None, None, 100, 64, 2, None, False, True, 64, 64)
        tlx_schedule.build_schedule(None, None, 1024, 64, 1, None, False, True, 64, 64)
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        with_schedule(call, overrides)()
    assert seen == want
    assert tlx_schedule.build_schedule is recorder


def test_put_ab_records_candidate_default_and_ratio_under_one_key(monkeypatch):
    from benchmarks import tlx_hopper_bench

    seen = []
    monkeypatch.setattr(tlx_hopper_bench, "bench", lambda fn: seen.append(("bench", fn)) or 2.0)
    monkeypatch.setattr(tlx_hopper_bench, "ab_rounds", lambda first, a, b: seen.append((first, a, b))
                        or {"ab": 1.5, "base": 2.0, "ratio": 0.75})
    row = {}
    tlx_hopper_bench.put_ab(row, "tlx_fwd_absched", "base", "alt")
    assert seen == [("bench", "base"), (2.0, "base", "alt")]
    assert row == {"tlx_fwd_absched_ms": 1.5, "tlx_fwd_absched_base_ms": 2.0,
                   "tlx_fwd_absched_ratio": 0.75}


@pytest.mark.parametrize("kind", ["bcast", "self"])
def test_shape_params_follow_the_shape_and_the_head_dim(kind):
    from benchmarks.tlx_hopper_bench import shape_params

    params = shape_params({"q": 192, "max_kv": 1000, "kind": kind}, {"q": torch.empty(3, 2, 64)})
    assert (params.max_seq_len_q, params.max_seq_len_kv, params.sm_scale, params.broadcast_q) \
        == (192, 1000, 0.125, kind == "bcast")


def test_schedule_cached_ab_builds_once_on_the_cached_side(monkeypatch):
    """--ab-schedule-cached's sides: the default side is the plain call, building its schedule on
    every call, the candidate builds only on its first (the cache a model's later layers hit)."""
    from benchmarks.tlx_hopper_bench import built_and_cached
    from kernels import tlx_schedule

    builds = []
    monkeypatch.setattr(tlx_schedule, "build_schedule",
                        lambda *args, **kwargs: builds.append(args) or ("entries", "count"))
    k_off = torch.tensor([0, 3, 5], dtype=torch.int32)

    def forward():
        return tlx_schedule.cached_schedule(None, k_off, 2, 64, 1, None, False, True, 64, 32)
    built, cached = built_and_cached(forward)
    for _ in range(3):
        assert cached() == ("entries", "count")
    assert len(builds) == 1
    for _ in range(3):  # the plain call: outside the promise, built every call, never cached
        assert built() == ("entries", "count")
    assert len(builds) == 4
    cached()  # still finds its first call's schedule (the same offsets): no build
    assert len(builds) == 4



def test_host_margin_is_the_timing_less_the_hosts_median_call():
    """A timing below the host's median call (margin under zero) timed the host."""
    from benchmarks.tlx_hopper_bench import host_margin_us

    # run 52's two regimes of one kernel: 82.6 us after 70.3 us of host, 108.6 after 122.3
    assert host_margin_us([0.0826, 0.1086], [[63.2, 70.3], [111.4, 122.3]]) == [12.3, -13.7]
    assert host_margin_us([], []) == []


def _reference_varlen(q, k, v, cu_q, k_off, max_q, max_k, scale):
    """varlen_attn's contract on the CPU: the JFA reference backend over jagged queries."""
    from kernels.jfa import jagged_flash_attention

    return jagged_flash_attention(q, k, v, cu_q, k_off, max_q, max_k, sm_scale=scale,
                                  backend="reference")


def test_issue_baseline_expands_the_query_inside_the_call_and_sums_its_gradient():
    """The issue's PMA baseline: each call copies the [q_len, H, D] query per batch element (a
    fresh copy every call, so the copy is timed) and backward sums dQ over the batch; values and
    gradients equal the pre-expanded form's."""
    from benchmarks.tlx_hopper_bench import issue_varlen

    g = torch.Generator().manual_seed(0)
    B, q_len, H, D = 3, 5, 2, 16
    lens = torch.tensor([4, 1, 7])
    k_off = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).int()
    cu_q = (torch.arange(B + 1) * q_len).int()
    q = torch.randn(q_len, H, D, generator=g, requires_grad=True)
    k, v = (torch.randn(int(lens.sum()), H, D, generator=g) for _ in range(2))
    seen = []

    def recording(qv, *rest, scale):
        seen.append(qv)
        return _reference_varlen(qv, *rest, scale)

    call = issue_varlen(recording, q, k, v, B, cu_q, k_off, q_len, 7, 0.3)
    out = call()
    do = torch.randn(out.shape, generator=g)
    out.backward(do)
    call()
    assert seen[0].shape == (B * q_len, H, D) and seen[0].data_ptr() != seen[1].data_ptr()
    q_rep = q.detach().repeat(B, 1, 1).requires_grad_()
    ref = _reference_varlen(q_rep, k, v, cu_q, k_off, q_len, 7, 0.3)
    ref.backward(do)
    assert torch.allclose(out, ref)
    assert torch.allclose(q.grad, q_rep.grad.view(B, q_len, H, D).sum(0))
