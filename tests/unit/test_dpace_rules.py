"""D-PACE position weights (arXiv 2605.18810) and the fixed DFlash schedules (arXiv 2602.06036): pure math."""

from __future__ import annotations

import math

import pytest
import torch

from spec_core.core import rules


def _closed_form(q: list[float], alpha: float) -> list[float]:
    """w_j = Σ_{k≥j} Π_{i≤k} q̃_i written out with plain Python loops."""
    qt = [(1 - alpha) * x + alpha for x in q]
    return [sum(math.prod(qt[: k + 1]) for k in range(j, len(q))) for j in range(len(q))]


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_dpace_weights_closed_form(alpha: float) -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.rand(4, 3, 7, generator=g, dtype=torch.float64)  # [..., B]
    w = rules.dpace_weights(q, alpha)
    assert w.shape == q.shape
    for row_q, row_w in zip(q.reshape(-1, 7).tolist(), w.reshape(-1, 7).tolist()):
        assert row_w == pytest.approx(_closed_form(row_q, alpha), rel=1e-12)


def test_dpace_weights_hand_values() -> None:
    q = torch.tensor([1.0, 0.0, 1.0])
    # α = 0: P = [1, 0, 0] → w = [1, 0, 0]; α = 0.5: q̃ = [1, .5, 1], P = [1, .5, .5] → w = [2, 1, .5]
    assert rules.dpace_weights(q, 0.0).tolist() == [1.0, 0.0, 0.0]
    assert rules.dpace_weights(q, 0.5).tolist() == [2.0, 1.0, 0.5]
    # α = 1 ignores q: w_j = B − j + 1 (the continuation length), like a linear decay
    assert rules.dpace_weights(torch.rand(5), 1.0).tolist() == [5.0, 4.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.7])
def test_dpace_weights_are_the_surrogate_gradient(alpha: float) -> None:
    """∂S̃/∂log q_j = (1 − α)·q_j/q̃_j · w_j, with S̃ = Σ_k Π_{i≤k} q̃_i (D-PACE's derivation)."""
    g = torch.Generator().manual_seed(1)
    log_q = (torch.rand(5, 8, generator=g, dtype=torch.float64) * 0.98 + 0.01).log().requires_grad_(True)
    q = log_q.exp()
    q_tilde = (1 - alpha) * q + alpha
    surrogate = rules.expected_accepted_length(q_tilde).sum()
    (grad,) = torch.autograd.grad(surrogate, log_q)
    expected = (1 - alpha) * q / q_tilde * rules.dpace_weights(q, alpha)
    torch.testing.assert_close(grad, expected.detach(), rtol=1e-10, atol=1e-12)


def test_components_multiply_to_full() -> None:
    g = torch.Generator().manual_seed(2)
    q = torch.rand(6, 7, generator=g, dtype=torch.float64)
    for alpha in (0.3, 0.5):
        cum = rules.dpace_cumulative_weights(q, alpha)
        cont = rules.dpace_continuation_weights(q, alpha)
        torch.testing.assert_close(cum * cont, rules.dpace_weights(q, alpha))
        torch.testing.assert_close(cum, torch.cumprod((1 - alpha) * q + alpha, -1))
        assert torch.all(cont[..., -1] == 1.0)  # the last position continues to nothing


def test_continuation_is_exact_when_the_prefix_underflows() -> None:
    q = torch.tensor([1e-30, 1e-30, 0.5, 0.5])
    f = rules.dpace_continuation_weights(q, alpha=0.0)
    assert f.tolist() == pytest.approx([1 + 1e-30 + 0.5e-30 + 0.25e-30, 1.75, 1.5, 1.0])


def test_mask_excludes_positions_from_products_and_sums() -> None:
    """Positions past the sequence end: q̃ = 1 in prefix products, no term in suffix sums (authors' code)."""
    q = torch.tensor([[0.5, 0.4, 0.9, 0.9]])
    mask = torch.tensor([[True, True, False, False]])
    alpha = 0.5
    w = rules.dpace_weights(q, alpha, mask)
    w_short = rules.dpace_weights(q[:, :2], alpha)
    torch.testing.assert_close(w[:, :2], w_short)
    f = rules.dpace_continuation_weights(q, alpha, mask)
    torch.testing.assert_close(f[:, :2], rules.dpace_continuation_weights(q[:, :2], alpha))
    for schedule in ("uniform", "decay", "dpace", "dpace-cumulative", "dpace-continuation"):
        pw = rules.position_weights(schedule, q, alpha, 4.0, mask)
        assert pw[:, 2:].abs().sum() == 0


def test_decay_schedule() -> None:
    w = rules.decay_weights(torch.zeros(2, 7), gamma_w=4.0)
    assert w.shape == (2, 7)
    torch.testing.assert_close(w[0], torch.exp(-torch.arange(7.0) / 4.0))
    assert w[0, 0] == 1.0  # the first drafted position (k = 1) gets weight 1
    assert rules.uniform_weights(torch.rand(3, 5)).eq(1).all()


def test_dpace_weights_are_monotone_and_positive() -> None:
    q = torch.rand(100, 7, generator=torch.Generator().manual_seed(3))
    w = rules.dpace_weights(q, 0.5)
    assert torch.all(w > 0)
    assert torch.all(w[..., :-1] >= w[..., 1:])  # suffix sums of positive terms never grow along the block


def test_unknown_schedule() -> None:
    with pytest.raises(ValueError):
        rules.position_weights("nope", torch.rand(3))
