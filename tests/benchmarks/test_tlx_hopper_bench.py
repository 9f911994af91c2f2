"""The options of benchmarks.tlx_hopper_bench: A/B overrides, the power settle (the timing itself needs an H200)."""

import pytest

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
