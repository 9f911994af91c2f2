"""Every JFA backend against the independent fp64 oracle: forward (out, LSE) and all gradients.

Backends run where they can: ``reference`` everywhere, ``triton`` on CUDA or under the
interpreter (CPU, float32), ``tlx`` on an sm_90 GPU with fbtriton (cases it does not claim to
support are skipped, with its reason). fp16/bf16 cases run on GPU only.
"""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from kernels import jagged_flash_attention
from kernels.common import JFAParams
from kernels.jfa import _import_backend
from tests.kernels.jfa_oracle import (
    MAX_LEN,
    ON_GPU,
    TOLERANCES,
    Case,
    Inputs,
    assert_lse_close,
    fp64_oracle,
    make_inputs,
    random_lengths,
    relative_error,
)

BACKENDS = ["reference", "triton", "tlx"]
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU (fp16/bf16, compiled Triton configs)")


def _run(case: Case, inputs: Inputs, backend: str, deterministic: bool = False) -> tuple[torch.Tensor, ...]:
    """Forward with LSE, then torch.autograd.grad of <out, grad_out> w.r.t. query, key, value."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (inputs.query, inputs.key, inputs.value))
    out, lse = jagged_flash_attention(
        q, k, v, inputs.query_offset, inputs.key_offset, inputs.max_seq_len_q, inputs.max_seq_len_kv,
        sm_scale=case.sm_scale, causal=case.causal, window_size=case.window_size, broadcast_q=case.broadcast_q,
        backend=backend, deterministic=deterministic, return_lse=True,
    )  # fmt: skip
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), inputs.grad_out)
    return out, lse, dq, dk, dv


def _skip_unless_served(backend: str, case: Case, inputs: Inputs) -> None:
    """tlx serves what it claims; reference everything; triton every case on GPU and every float32
    case under the interpreter (a broken interpreter set-up fails here rather than skipping)."""
    module = _import_backend(backend)
    reason = module if isinstance(module, str) else None
    if reason is None:
        params = JFAParams(inputs.max_seq_len_q, inputs.max_seq_len_kv, 1.0, case.causal, case.window_size,
                           case.broadcast_q)  # fmt: skip
        reason = module.supports(inputs.query, inputs.key, inputs.value, params)
    if reason is not None:
        interpreted = os.environ.get("TRITON_INTERPRET") == "1" and case.dtype == torch.float32
        if backend == "reference" or (backend == "triton" and (ON_GPU or interpreted)):
            pytest.fail(f"{backend} must serve this case: {reason}")
        pytest.skip(f"{backend}: {reason}")


def check_against_oracle(case: Case, backend: str, inputs: Inputs | None = None) -> None:
    inputs = inputs or make_inputs(case)
    _skip_unless_served(backend, case, inputs)
    out, lse, dq, dk, dv = _run(case, inputs, backend)
    expected = fp64_oracle(case, inputs)
    fwd_tol, bwd_tol = TOLERANCES[case.dtype]
    assert out.shape == expected.out.shape and out.dtype == case.dtype
    assert not out.isnan().any()
    assert relative_error(out, expected.out) <= fwd_tol
    assert_lse_close(lse, expected.lse, fwd_tol)
    for name, actual, wanted in (("dq", dq, expected.dq), ("dk", dk, expected.dk), ("dv", dv, expected.dv)):
        assert actual.shape == wanted.shape and actual.dtype == case.dtype, name
        error = relative_error(actual, wanted)
        assert error <= bwd_tol, f"{name}: relative error {error:.2e} > {bwd_tol:.0e}"


# -----------------------------------------------------------------------------------------------
# The full option grid: mode x causal x window x GQA (return_lse everywhere)
# -----------------------------------------------------------------------------------------------

WINDOW = MAX_LEN // 8  # spans several blocks of 16 (CPU) and a fraction of one of 64 (GPU)
BROADCAST_Q_LEN = 150 if ON_GPU else 19  # not a multiple of any block size
GRID = list(itertools.product(("self", "cross", "broadcast"), (False, True), (None, WINDOW), ((2, 2), (4, 2))))


def _grid_case(index: int, mode: str, causal: bool, window: int | None, heads: tuple[int, int]) -> Case:
    generator = torch.Generator().manual_seed(index)
    return Case(
        kv_lengths=random_lengths(4, MAX_LEN, generator),
        q_lengths=random_lengths(4, MAX_LEN, generator)[::-1],  # empty q where kv is full and vice versa
        mode=mode,
        q_len=BROADCAST_Q_LEN,
        heads=heads,
        causal=causal,
        window_size=window,
        seed=index,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "index,mode,causal,window,heads",
    [(i, *options) for i, options in enumerate(GRID)],
    ids=[f"{m}-{'causal' if c else 'full'}-{'window' if w else 'nowindow'}-gqa{h[0] // h[1]}" for m, c, w, h in GRID],
)
def test_option_grid(backend: str, index: int, mode: str, causal: bool, window: int | None, heads: tuple) -> None:
    check_against_oracle(_grid_case(index, mode, causal, window, heads), backend)


# -----------------------------------------------------------------------------------------------
# Edge cases
# -----------------------------------------------------------------------------------------------

EDGE_CASES = {
    "batch_of_one": Case(kv_lengths=(MAX_LEN - 3,), causal=True),
    "broadcast_batch_of_one": Case(kv_lengths=(MAX_LEN,), mode="broadcast", q_len=BROADCAST_Q_LEN),
    # B in the hundreds: the broadcast dQ reduction spans many programs and chunks
    "broadcast_batch_200": Case(
        kv_lengths=random_lengths(200, 8, torch.Generator().manual_seed(7)), mode="broadcast", q_len=4,
        heads=(1, 1), head_dim=16, causal=True,
    ),  # fmt: skip
    "empty_kv_sequences": Case(kv_lengths=(0, 0, 0), q_lengths=(3, 0, 17), mode="cross"),
    "empty_q_sequences": Case(kv_lengths=(4, 17, 1), q_lengths=(0, 0, 0), mode="cross"),
    "all_empty_batch": Case(kv_lengths=(0, 0, 0)),
    "no_batch_elements": Case(kv_lengths=()),
    "broadcast_empty_kv": Case(kv_lengths=(0, 0), mode="broadcast", q_len=3),
    "broadcast_no_batch_elements": Case(kv_lengths=(), mode="broadcast", q_len=3),
    "length_one": Case(kv_lengths=(1, 1, 1), causal=True),
    "window_zero": Case(kv_lengths=(5, 17, 33), window_size=0),
    # query rows past the key sequence see no key under a causal window: out 0, LSE -inf
    "rows_without_keys": Case(kv_lengths=(3, 0, 9), q_lengths=(33, 5, 20), mode="cross", causal=True, window_size=2),
    "broadcast_rows_without_keys": Case(kv_lengths=(2, 17), mode="broadcast", q_len=33, causal=True, window_size=4),
    "head_dim_48": Case(kv_lengths=(9, 33, 20), head_dim=48, causal=True),
    "head_dim_16": Case(kv_lengths=(9, 33, 20), head_dim=16, mode="broadcast", q_len=17),
    "gqa_4_to_1": Case(kv_lengths=(9, 33, 20), heads=(4, 1), window_size=5),
    "custom_sm_scale": Case(kv_lengths=(9, 33, 20), q_lengths=(12, 1, 40), mode="cross", sm_scale=0.3),
    "long_sequences": Case(kv_lengths=(4 * MAX_LEN + 5, 2 * MAX_LEN + 1), causal=True),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_case(backend: str, name: str) -> None:
    check_against_oracle(EDGE_CASES[name], backend)


# -----------------------------------------------------------------------------------------------
# Low precision (GPU)
# -----------------------------------------------------------------------------------------------

LOW_PRECISION_CASES = {
    "self_causal_gqa": dict(kv_lengths=random_lengths(6, MAX_LEN, torch.Generator().manual_seed(1)), heads=(4, 2),
                            causal=True, head_dim=128),  # fmt: skip
    "pma": dict(kv_lengths=random_lengths(64, MAX_LEN, torch.Generator().manual_seed(2)), mode="broadcast",
                q_len=128, heads=(3, 3), head_dim=128),  # fmt: skip
    "cross_window": dict(kv_lengths=(MAX_LEN, 0, 77), q_lengths=(1, 50, MAX_LEN), mode="cross", window_size=40,
                         head_dim=64),  # fmt: skip
    "target_aware": dict(kv_lengths=random_lengths(32, MAX_LEN, torch.Generator().manual_seed(3)),
                         q_lengths=(1,) * 32, mode="cross", head_dim=64),  # fmt: skip
}


@gpu_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(LOW_PRECISION_CASES))
def test_low_precision(backend: str, name: str, dtype: torch.dtype) -> None:
    check_against_oracle(Case(**LOW_PRECISION_CASES[name], dtype=dtype), backend)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["pma", "self_causal_gqa"])
def test_runs_on_the_tensors_gpu_not_the_current_one(backend: str, name: str) -> None:
    """Tensors on cuda:1 while cuda:0 is current (a user who never called set_device): every
    kernel must launch on the tensors' GPU and produce the oracle's values there."""
    case = Case(**LOW_PRECISION_CASES[name], dtype=torch.bfloat16)
    on_first = make_inputs(case)
    inputs = Inputs(**{name: x.to("cuda:1") if isinstance(x, torch.Tensor) else x for name, x in vars(on_first).items()})
    with torch.cuda.device(0):
        check_against_oracle(case, backend, inputs)


@gpu_only
@pytest.mark.parametrize(
    "dtype,name", [(torch.bfloat16, "self_causal_gqa"), (torch.bfloat16, "pma"), (torch.float32, "cross_window")]
)
def test_every_autotune_config(dtype: torch.dtype, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other tests run each Triton kernel's default config; here every config of the search."""
    from kernels import triton_bwd, triton_fwd

    fp32 = dtype == torch.float32
    searches = {
        triton_fwd._jfa_fwd_kernel: triton_fwd._FWD_FP32_CONFIGS if fp32 else triton_fwd._FWD_CONFIGS,
        triton_bwd._jfa_bwd_dkdv_kernel: triton_bwd._DKDV_FP32_CONFIGS if fp32 else triton_bwd._DKDV_CONFIGS,
        triton_bwd._jfa_bwd_dq_kernel: triton_bwd._DQ_FP32_CONFIGS if fp32 else triton_bwd._DQ_CONFIGS,
    }
    for i in range(max(len(configs) for configs in searches.values())):
        for kernel, configs in searches.items():
            monkeypatch.setattr(kernel, "configs", [configs[i % len(configs)]])  # one config: no search
        check_against_oracle(Case(**LOW_PRECISION_CASES[name], dtype=dtype), "triton")


# -----------------------------------------------------------------------------------------------
# Determinism, return_lse, strided inputs
# -----------------------------------------------------------------------------------------------

DETERMINISM_CASES = {
    "self_causal_gqa": Case(kv_lengths=(MAX_LEN, 7, 0, 23), heads=(4, 2), causal=True),
    "broadcast_many": Case(
        kv_lengths=random_lengths(1000 if ON_GPU else 64, MAX_LEN // 4, torch.Generator().manual_seed(5)),
        mode="broadcast", q_len=BROADCAST_Q_LEN, heads=(2, 1), head_dim=16, window_size=3,
    ),  # fmt: skip
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(DETERMINISM_CASES))
def test_deterministic_is_bitwise_reproducible(backend: str, name: str) -> None:
    case = DETERMINISM_CASES[name]
    dtype_case = Case(**{**case.__dict__, "dtype": torch.bfloat16}) if ON_GPU else case
    inputs = make_inputs(dtype_case)
    _skip_unless_served(backend, dtype_case, inputs)
    first = _run(dtype_case, inputs, backend, deterministic=True)
    second = _run(dtype_case, inputs, backend, deterministic=True)
    for name_, a, b in zip(("out", "lse", "dq", "dk", "dv"), first, second):
        assert torch.equal(a, b), f"{name_} differs between two identical calls"


@pytest.mark.parametrize("backend", BACKENDS)
def test_return_lse_false_returns_the_output_only(backend: str) -> None:
    case = Case(kv_lengths=(5, 9), causal=True)
    inputs = make_inputs(case)
    _skip_unless_served(backend, case, inputs)
    args = (inputs.query, inputs.key, inputs.value, inputs.query_offset, inputs.key_offset, 9, 9)
    out = jagged_flash_attention(*args, causal=True, backend=backend)
    out_with_lse, _ = jagged_flash_attention(*args, causal=True, backend=backend, return_lse=True)
    assert isinstance(out, torch.Tensor) and torch.equal(out, out_with_lse)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_rows_and_heads(backend: str) -> None:
    """q, k, v as views into one fused projection [T, 3, H, D] give the same result as copies."""
    case = Case(kv_lengths=(5, 18, 0, 11), causal=True)
    inputs = make_inputs(case)
    _skip_unless_served(backend, case, inputs)
    qkv = torch.stack([inputs.query, inputs.key, inputs.value], dim=1)  # [T, 3, H, D]
    q, k, v = qkv.unbind(dim=1)
    assert not q.is_contiguous()
    args = (inputs.query_offset, inputs.key_offset, inputs.max_seq_len_q, inputs.max_seq_len_kv)
    strided = jagged_flash_attention(q, k, v, *args, causal=True, backend=backend)
    contiguous = jagged_flash_attention(q.contiguous(), k.contiguous(), v.contiguous(), *args, causal=True,
                                        backend=backend)  # fmt: skip
    torch.testing.assert_close(strided, contiguous, rtol=0, atol=0)


def test_default_scale_is_inverse_sqrt_head_dim() -> None:
    case = Case(kv_lengths=(4, 6), head_dim=64)
    inputs = make_inputs(case)
    args = (inputs.query, inputs.key, inputs.value, inputs.query_offset, inputs.key_offset, 6, 6)
    default = jagged_flash_attention(*args, backend="reference")
    explicit = jagged_flash_attention(*args, sm_scale=0.125, backend="reference")
    assert torch.equal(default, explicit)
