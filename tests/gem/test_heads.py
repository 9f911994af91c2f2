"""gem.models.heads: per-task towers, the ESMM-style chained task, the weighted loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gem.models.heads import TaskHeads, product_logit, task_weight_vector, weighted_bce


def test_product_logit_is_the_logit_of_the_product_at_every_scale() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.randn(1000, generator=g) * 6, torch.tensor([-80.0, -30.0, 0.0, 30.0, 80.0, 200.0])])
    b = torch.cat([torch.randn(1000, generator=g) * 6, torch.tensor([-80.0, 25.0, 0.0, -30.0, 80.0, 200.0])])
    p = torch.sigmoid(product_logit(a, b).double())
    expected = torch.sigmoid(a.double()) * torch.sigmoid(b.double())
    assert torch.allclose(p, expected, rtol=1e-5, atol=1e-7)
    # log p is what the loss reads: it stays accurate where p itself underflows towards 0
    assert torch.allclose(F.logsigmoid(product_logit(a, b).double())[:1000],
                          (F.logsigmoid(a.double()) + F.logsigmoid(b.double()))[:1000], rtol=1e-5, atol=1e-6)


def test_product_logit_gradients_are_finite_and_match_float64() -> None:
    a = torch.tensor([-60.0, -3.0, 0.5, 4.0, 60.0, 150.0], requires_grad=True)
    b = torch.tensor([2.0, -1.0, 0.1, 5.0, 60.0, 150.0], requires_grad=True)
    labels = torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    F.binary_cross_entropy_with_logits(product_logit(a, b), labels, reduction="sum").backward()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    p = torch.sigmoid(a64) * torch.sigmoid(b64)
    (-(labels.double() * p.log() + (1 - labels.double()) * (1 - p).log())).sum().backward()
    assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()
    # at 60 and 150, p rounds to 1 even in float64 (the reference's gradient is nan there); ours is clamped
    assert torch.allclose(a.grad[:4].double(), a64.grad[:4], atol=1e-5)
    assert torch.allclose(b.grad[:4].double(), b64.grad[:4], atol=1e-5)


def test_a_chained_task_outputs_parent_times_conditional() -> None:
    torch.manual_seed(0)
    heads = TaskHeads(8, ("click", "conversion"), [4], chain={"conversion": "click"})
    plain = TaskHeads(8, ("click", "conversion"), [4])
    plain.load_state_dict(heads.state_dict())  # same towers, so plain's logits are the raw tower outputs
    x = torch.randn(32, 8)
    raw, chained = plain(x), heads(x)
    assert torch.equal(chained[:, 0], raw[:, 0])
    assert torch.allclose(torch.sigmoid(chained[:, 1]), torch.sigmoid(raw[:, 0]) * torch.sigmoid(raw[:, 1]),
                          atol=1e-6)
    assert (torch.sigmoid(chained[:, 1]) <= torch.sigmoid(chained[:, 0]) + 1e-6).all()  # p(conv) <= p(click)
    loss = weighted_bce(chained, torch.randint(0, 2, (32, 2)).float(), torch.ones(2))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in heads.parameters())


@pytest.mark.parametrize("chain, message", [
    ({"purchase": "click"}, "unknown tasks \\['purchase'\\]"),
    ({"conversion": "view"}, "unknown tasks \\['view'\\]"),
    ({"click": "click"}, "must be another, unchained task"),
    ({"conversion": "click", "click": "conversion"}, "must be another, unchained task"),
])
def test_bad_chains_are_refused_with_the_rule(chain: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=f"model.task_chain.*{message}"):
        TaskHeads(8, ("click", "conversion"), [4], chain=chain)


def test_task_weights_validate_names_and_signs() -> None:
    assert task_weight_vector(("click", "conversion"), {"conversion": 2.0}).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="unknown tasks \\['buy'\\]"):
        task_weight_vector(("click", "conversion"), {"buy": 1.0})
    with pytest.raises(ValueError, match=">= 0"):
        task_weight_vector(("click", "conversion"), {"click": -1.0})
