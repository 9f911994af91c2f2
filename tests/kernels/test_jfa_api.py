"""The JFA front door as a PyTorch citizen: backend selection, custom ops, torch.compile."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from torch import nn

from kernels import jagged_flash_attention
from kernels import jfa as front_door
from kernels.common import JFAParams
from kernels.triton_common import INTERPRETER
from tests.kernels.jfa_oracle import DEVICE, ON_GPU, offsets_of


def _small_call_args(dtype: torch.dtype = torch.float32) -> tuple:
    query = torch.randn(8, 4, 16, device=DEVICE, dtype=dtype)
    key = torch.randn(8, 2, 16, device=DEVICE, dtype=dtype)
    return query, key, torch.randn_like(key), offsets_of((3, 0, 5)), offsets_of((3, 0, 5)), 5, 5


def _served_by(backend: str, query: torch.Tensor, key: torch.Tensor, params: JFAParams) -> bool:
    return front_door._unsupported_reason(backend, query, key, key, params) is None


# -----------------------------------------------------------------------------------------------
# Backend selection
# -----------------------------------------------------------------------------------------------


def test_auto_picks_the_fastest_backend_that_serves_the_call() -> None:
    query, key, value, *_ = _small_call_args()
    params = JFAParams(5, 5, 0.25)
    chosen = front_door._select_backend("auto", query, key, value, params)
    if front_door._is_sm90(query.device) and _served_by("tlx", query, key, params):
        assert chosen == "tlx"
    elif ON_GPU:
        assert chosen == "triton"
    else:
        assert chosen == "reference"  # never the (slow) interpreter, even when it is enabled


@pytest.mark.skipif(ON_GPU or not INTERPRETER, reason="the interpreter is a CPU case")
def test_auto_never_picks_the_interpreter_but_triton_can_be_asked_for() -> None:
    query, key, value, *_ = _small_call_args()
    params = JFAParams(5, 5, 0.25)
    assert front_door._select_backend("auto", query, key, value, params) == "reference"
    assert front_door._select_backend("triton", query, key, value, params) == "triton"


def test_auto_logs_each_fallback_reason_once(caplog: pytest.LogCaptureFixture) -> None:
    front_door._log_fallback_once.cache_clear()
    query, key, value, *_ = _small_call_args()
    params = JFAParams(5, 5, 0.25)
    with caplog.at_level(logging.INFO, logger=front_door.logger.name):
        for _ in range(3):
            front_door._select_backend("auto", query, key, value, params)
    skipped_tlx = [r for r in caplog.records if "skipping backend 'tlx'" in r.getMessage()]
    if front_door._select_backend("auto", query, key, value, params) == "tlx":
        assert not skipped_tlx
    else:
        assert len(skipped_tlx) == 1


def test_auto_routes_deterministic_broadcast_away_from_tlx_when_dq_would_need_atomics() -> None:
    """tlx's deterministic broadcast dQ reduces one fp32 partial per (head, q-block) CTA: with more
    pairs than SMs it would need atomics, so auto falls back; the rule reads q_len from the query."""
    if not (ON_GPU and front_door._is_sm90(torch.device(DEVICE))) or isinstance(front_door._import_backend("tlx"), str):
        pytest.skip("needs an sm_90 GPU with fbtriton (TLX)")
    from kernels.tlx_hopper import _num_sms

    key = torch.randn(10, 4, 64, device=DEVICE, dtype=torch.bfloat16)
    too_many = torch.randn(128 * (_num_sms(torch.cuda.current_device()) // 4 + 1), 4, 64, device=DEVICE, dtype=torch.bfloat16)
    params = JFAParams(too_many.shape[0], 10, 0.125, broadcast_q=True, deterministic=True)
    assert "heads * q-blocks <= #SMs" in front_door._unsupported_reason("tlx", too_many, key, key, params)
    assert front_door._select_backend("auto", too_many, key, key, params) == "triton"
    few = too_many[:192]
    assert front_door._select_backend("auto", few, key, key, dataclasses.replace(params, max_seq_len_q=5000)) == "tlx"


def test_missing_backend_module_is_reported_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(front_door.BACKEND_MODULES, "tlx", "kernels.no_such_backend")
    front_door._import_backend.cache_clear()
    try:
        with pytest.raises(ValueError, match="^backend: 'tlx' cannot serve this call: not importable: No module"):
            jagged_flash_attention(*_small_call_args(), backend="tlx")
    finally:
        front_door._import_backend.cache_clear()


# -----------------------------------------------------------------------------------------------
# Custom ops
# -----------------------------------------------------------------------------------------------

OPCHECK_BACKENDS = ["reference", "triton"]


@pytest.mark.parametrize("backend", OPCHECK_BACKENDS)
@pytest.mark.parametrize("broadcast_q", [False, True], ids=["jagged", "broadcast"])
def test_custom_ops_pass_opcheck(backend: str, broadcast_q: bool) -> None:
    query, key, value, query_offset, key_offset, max_q, max_kv = _small_call_args()
    if broadcast_q:
        query, query_offset, max_q = query[:3], None, 3
    if not _served_by(backend, query, key, JFAParams(max_q, max_kv, 0.25, broadcast_q=broadcast_q)):
        pytest.skip(f"{backend} does not serve {query.device} {query.dtype}")
    options = (max_q, max_kv, 0.25, True, 2, broadcast_q, True, backend)
    query.requires_grad_()
    key.requires_grad_()
    value.requires_grad_()
    forward_args = (query, key, value, query_offset, key_offset, *options)
    torch.library.opcheck(torch.ops.jfa.jagged_flash_attention_fwd.default, forward_args)
    out, lse = torch.ops.jfa.jagged_flash_attention_fwd(*forward_args)
    grad_out = torch.randn_like(out)
    backward_args = (grad_out, query.detach(), key.detach(), value.detach(), out.detach(), lse, query_offset,
                     key_offset, *options)  # fmt: skip
    torch.library.opcheck(torch.ops.jfa.jagged_flash_attention_bwd.default, backward_args)


# -----------------------------------------------------------------------------------------------
# torch.compile(fullgraph=True) around a module that calls the front door three ways
# -----------------------------------------------------------------------------------------------


class _TinySequenceModel(nn.Module):
    """Jagged causal GQA self-attention, PMA (broadcast query) and target-aware cross-attention."""

    def __init__(self, dim: int = 32, heads: int = 2, head_dim: int = 16, summary_tokens: int = 3) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.qkv = nn.Linear(dim, (heads + 2) * head_dim)  # GQA: 2 query heads share 1 key/value head
        self.pma_query = nn.Parameter(torch.randn(summary_tokens, heads, head_dim))
        self.target = nn.Linear(dim, heads * head_dim)

    def forward(self, events: torch.Tensor, offsets: torch.Tensor, max_len: int, candidates: torch.Tensor,
                backend: str) -> torch.Tensor:  # fmt: skip
        q, k, v = self.qkv(events).split([self.heads * self.head_dim, self.head_dim, self.head_dim], dim=-1)
        q = q.unflatten(-1, (self.heads, self.head_dim))
        k, v = k.unsqueeze(1), v.unsqueeze(1)
        seq = jagged_flash_attention(q, k, v, offsets, offsets, max_len, max_len, causal=True, backend=backend)
        seq_k = seq.mean(dim=1, keepdim=True)
        pooled = jagged_flash_attention(self.pma_query, seq_k, seq_k, None, offsets, self.pma_query.shape[0],
                                        max_len, broadcast_q=True, backend=backend)  # fmt: skip
        one_query_each = torch.arange(candidates.shape[0] + 1, device=candidates.device)
        target_q = self.target(candidates).unflatten(-1, (self.heads, self.head_dim))
        target = jagged_flash_attention(target_q, seq_k, seq_k, one_query_each, offsets, 1, max_len, backend=backend)
        return pooled.square().mean() + target.square().mean()


def test_torch_compile_fullgraph_matches_eager() -> None:
    torch.manual_seed(0)
    backend = "auto" if ON_GPU else "reference"
    model = _TinySequenceModel().to(DEVICE)
    lengths = (4, 0, 7, 1)
    events = torch.randn(sum(lengths), 32, device=DEVICE)
    candidates = torch.randn(len(lengths), 32, device=DEVICE)
    offsets = offsets_of(lengths)

    def loss_and_grads(module: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
        loss = module(events, offsets, max(lengths), candidates, backend)
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    eager_loss, eager_grads = loss_and_grads(model)
    compiled_loss, compiled_grads = loss_and_grads(torch.compile(model, fullgraph=True))
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-4, atol=1e-6)
    for compiled, eager in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)


# -----------------------------------------------------------------------------------------------
# Eager calls skip torch.library's dispatch (host time); compiled graphs hold the custom op
# -----------------------------------------------------------------------------------------------


def test_eager_calls_skip_the_custom_op_and_compute_what_it_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    query, key, value, query_offset, key_offset, max_q, max_kv = _small_call_args()
    leaves = [x.requires_grad_() for x in (query, key, value)]
    options = (max_q, max_kv, 0.25, True, 2, False, True, "reference")
    op_out, _ = torch.ops.jfa.jagged_flash_attention_fwd(query, key, value, query_offset, key_offset, *options)
    grad_out = torch.randn_like(op_out)
    op_grads = torch.autograd.grad(op_out, leaves, grad_out)

    def no_custom_op(*args: object) -> None:
        raise AssertionError("an eager call went through the custom op")

    monkeypatch.setattr(front_door, "_forward_op", no_custom_op)
    monkeypatch.setattr(front_door, "_backward_op", no_custom_op)
    out = jagged_flash_attention(query, key, value, query_offset, key_offset, max_q, max_kv, sm_scale=0.25,
                                 causal=True, window_size=2, deterministic=True, backend="reference")
    torch.testing.assert_close(out, op_out, rtol=0, atol=0)
    for grad, op_grad in zip(torch.autograd.grad(out, leaves, grad_out), op_grads):
        torch.testing.assert_close(grad, op_grad, rtol=0, atol=0)


def test_compiled_graphs_call_the_custom_op() -> None:
    query, key, value, query_offset, key_offset, max_q, max_kv = _small_call_args()
    targets: list[str] = []

    def record_graph(graph_module: torch.fx.GraphModule, example_inputs: list) -> object:
        targets.extend(str(node.target) for node in graph_module.graph.nodes)
        return graph_module.forward

    def call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return jagged_flash_attention(q, k, v, query_offset, key_offset, max_q, max_kv, backend="reference")

    compiled = torch.compile(call, backend=record_graph, fullgraph=True)(query, key, value)
    assert "jfa.jagged_flash_attention_fwd.default" in targets
    torch.testing.assert_close(compiled, call(query, key, value))


def test_compiled_calls_take_a_max_length_that_changes_every_batch() -> None:
    """Batches carry their own longest sequence, so under torch.compile the max lengths become
    symbolic ints after the first change; backend selection must not need their values."""
    torch.manual_seed(0)
    backend = "auto" if ON_GPU else "reference"
    query = torch.randn(12, 2, 16, device=DEVICE)
    key = torch.randn(12, 1, 16, device=DEVICE)

    def attend(q: torch.Tensor, k: torch.Tensor, offsets: torch.Tensor, max_len: int) -> torch.Tensor:
        return jagged_flash_attention(q, k, k, offsets, offsets, max_len, max_len, causal=True, backend=backend)

    compiled = torch.compile(attend, fullgraph=True)
    for lengths in ((5, 0, 7), (3, 9, 0), (11, 1, 0), (2, 2, 8)):  # max 7, 9, 11, 8: dynamic from the 2nd
        rows = sum(lengths)
        args = (query[:rows], key[:rows], offsets_of(lengths), max(lengths))
        torch.testing.assert_close(compiled(*args), attend(*args), rtol=1e-4, atol=1e-5)


def test_backends_may_reuse_offset_derived_data_in_eager_calls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eager path promises versioned offsets to the backend (forward and backward, which runs on
    autograd's thread); the custom op, which compiled graphs call, does not."""
    from kernels import reference
    from kernels.common import offsets_versioned

    seen: list[tuple[str, bool]] = []
    forward, backward = reference.forward, reference.backward
    monkeypatch.setattr(reference, "forward", lambda *a: (seen.append(("fwd", offsets_versioned())), forward(*a))[1])
    monkeypatch.setattr(reference, "backward", lambda *a: (seen.append(("bwd", offsets_versioned())), backward(*a))[1])
    query, key, value, query_offset, key_offset, max_q, max_kv = _small_call_args()
    leaves = [x.requires_grad_() for x in (query, key, value)]
    out = jagged_flash_attention(query, key, value, query_offset, key_offset, max_q, max_kv, backend="reference")
    torch.autograd.grad(out.sum(), leaves)
    assert seen == [("fwd", True), ("bwd", True)] and not offsets_versioned()
    seen.clear()
    options = (max_q, max_kv, 0.25, False, None, False, False, "reference")
    out, _ = torch.ops.jfa.jagged_flash_attention_fwd(query, key, value, query_offset, key_offset, *options)
    torch.autograd.grad(out.sum(), leaves)
    assert seen == [("fwd", False), ("bwd", False)]


def test_double_backward_raises_instead_of_a_wrong_answer() -> None:
    query, key, value, query_offset, key_offset, max_q, max_kv = _small_call_args()
    leaves = [x.requires_grad_() for x in (query, key, value)]
    out = jagged_flash_attention(query, key, value, query_offset, key_offset, max_q, max_kv, backend="reference")
    grads = torch.autograd.grad(out.square().sum(), leaves, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grads[0].square().sum().backward()
