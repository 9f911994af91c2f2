"""The A/B options of benchmarks.tlx_hopper_bench (the timing itself needs an H200)."""

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
