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
