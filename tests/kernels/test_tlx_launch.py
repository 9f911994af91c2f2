"""`kernels.tlx_launch`: the launch key follows Triton's specialisation, and launches through it
compute what `kernel[grid](...)` computes (on a GPU: the direct launcher, each launch checked
against the kernel Triton itself picks by tests/kernels/conftest.py; on the CPU: the
interpreter's path)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels import tlx_launch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _signature_only(x_ptr, desc, n, scale, BLOCK: tl.constexpr):
    pass


FN = JITFunction(_signature_only)  # never launched: only its parameters are read


def _key(x, desc, n, scale=0.5, device=0, **kwargs):
    kwargs = {"BLOCK": 64, "num_warps": 4, **kwargs}
    return tlx_launch.launch_key(FN, device, (x, desc, n, scale), kwargs)[0]


def test_launch_key_follows_triton_specialisation():
    x = torch.zeros(256)
    k = torch.zeros(100, 4, 128, dtype=torch.bfloat16)
    desc = TensorDescriptor(k, [100, 512], [512, 1], [64, 128])
    base = _key(x, desc, 32)
    # same specialisation: other aligned tensors, other multiples of 16, any float value
    other = torch.zeros(256, 4, 128, dtype=torch.bfloat16)
    assert _key(torch.zeros(64), TensorDescriptor(other, [256, 512], [512, 1], [64, 128]), 4096, 0.1) == base
    different = [
        _key(x, desc, 1),                       # 1 is compiled in as a constant
        _key(x, desc, 33),                      # not a multiple of 16
        _key(x, desc, 2**31),                   # i64
        _key(x[1:], desc, 32),                  # not 16-byte aligned
        _key(x.double(), desc, 32),             # dtype
        _key(x, TensorDescriptor(k, [100, 512], [512, 1], [64, 64]), 32),       # TMA block
        _key(x, TensorDescriptor(k.half(), [100, 512], [512, 1], [64, 128]), 32),  # TMA dtype
        _key(x, x, 32),                         # a tensor where the descriptor was
        _key(x, desc, 32, BLOCK=128),           # constexpr value
        _key(x, desc, 32, num_warps=8),         # launch option
        _key(x, desc, 32, device=1),            # device
    ]
    assert all(key != base for key in different)
    assert len(set(different)) == len(different)


def test_launch_key_names_a_missing_parameter():
    with pytest.raises(KeyError, match="BLOCK"):
        tlx_launch.launch_key(FN, 0, (torch.zeros(4), None, 4, 1.0), {"num_warps": 4})


@triton.jit
def _scaled_copy(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


def _two_constexprs(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


def test_trailing_constexprs_follow_the_signature():
    """Constexprs given by name come back in the kernel's order, and the same launch key follows
    from passing them so as by keyword; names that are not the kernel's last parameters fail."""
    fn = JITFunction(_two_constexprs)
    assert tlx_launch.trailing_constexprs(fn, {"EVEN": True, "BLOCK": 32}) == (32, True)
    x = torch.zeros(64)
    by_name = tlx_launch.launch_key(fn, 0, (x, 7), {"BLOCK": 32, "EVEN": True, "num_warps": 4})
    positional = tlx_launch.launch_key(fn, 0, (x, 7, 32, True), {"num_warps": 4})
    assert by_name[0][2:] == positional[0][2:] and by_name[1] == positional[1]
    for wrong in ({"BLOCK": 32}, {"BLOCK": 32, "ODD": True}):  # one short; one not the kernel's
        with pytest.raises(RuntimeError, match="_two_constexprs's last parameters"):
            tlx_launch.trailing_constexprs(fn, wrong)


def test_launches_compute_what_the_jit_launch_computes():
    # repeated keys take the direct launcher on a GPU; n = 1 and unaligned inputs change the key
    base = torch.randn(400, device=DEVICE)
    for n, offset in [(17, 0), (16, 0), (1, 0), (17, 0), (300, 0), (16, 1), (1, 0), (300, 0), (16, 0)]:
        x = base[offset:offset + n]
        y = torch.full((n,), float("nan"), device=DEVICE)
        tlx_launch.launch(_scaled_copy, (triton.cdiv(n, 64),), x, y, n, 3.0, BLOCK=64)
        torch.testing.assert_close(y, 3.0 * x, rtol=0, atol=0)
