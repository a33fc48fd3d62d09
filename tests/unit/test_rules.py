"""Pure math: warping, residual, acceptance, greedy and sampled verification on hand-built distributions."""

from __future__ import annotations

import pytest
import torch

from spec_core.core import rules


def test_warp_greedy_is_one_hot():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]])
    assert torch.equal(rules.warp_probs(logits, 0.0), torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))


def test_warp_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    top2 = rules.warp_probs(logits, 1.0, top_k=2)
    assert torch.allclose(top2, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    nucleus = rules.warp_probs(logits, 1.0, top_p=0.8)  # 0.5 + 0.3 reaches 0.8: two tokens kept
    assert torch.allclose(nucleus, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    assert torch.allclose(rules.warp_probs(logits, 1.0, top_p=0.81)[0, 2], torch.tensor(0.15 / 0.95))


def test_residual_and_fallback():
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.6, 0.2])
    assert torch.allclose(rules.residual(p, q), torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(rules.residual(p, p), p)  # nothing left over: fall back to p


def test_acceptance_probs_lossless_and_lenient():
    p_x, q_x = torch.tensor([0.2, 0.6]), torch.tensor([0.4, 0.3])
    assert torch.allclose(rules.acceptance_probs(p_x, q_x), torch.tensor([0.5, 1.0]))
    assert torch.allclose(rules.acceptance_probs(p_x, q_x, leniency=0.5), torch.tensor([1.0, 1.0]))


def test_leading_accepts():
    assert rules.leading_accepts(torch.tensor([True, True, False, True])) == 2
    assert rules.leading_accepts(torch.tensor([False, True])) == 0
    assert rules.leading_accepts(torch.tensor([], dtype=torch.bool)) == 0


def test_verify_greedy_recovered_and_bonus():
    argmax = torch.tensor([5, 7, 9, 4])
    a, n, nxt = rules.verify_greedy(argmax, torch.tensor([5, 7, 1]))
    assert (n, nxt) == (2, 9) and a.tolist() == [1.0, 1.0, 0.0]
    _, n, nxt = rules.verify_greedy(argmax, torch.tensor([5, 7, 9]))
    assert (n, nxt) == (3, 4)  # all accepted: the bonus token


def test_verify_drafts_certain_outcomes():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    q = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    g = torch.Generator().manual_seed(0)
    a, n, nxt = rules.verify_drafts(p, q, torch.tensor([1, 0]), torch.tensor([1.0, 0.0, 0.0]), g)
    assert a.tolist() == [1.0, 0.0] and n == 1 and nxt == 2  # recovered from norm(max(0, p − q))
    a, n, nxt = rules.verify_drafts(p[:1], q[:1], torch.tensor([1]), torch.tensor([0.0, 0.0, 1.0]), g)
    assert n == 1 and nxt == 2  # bonus drawn from the bonus distribution


def test_single_position_output_matches_target_exactly():
    """One drafted position: P(out = x) = q(x)·a(x) + P(reject)·residual(x) must equal p(x) (closed form)."""
    p = torch.tensor([0.1, 0.6, 0.3])
    q = torch.tensor([0.5, 0.25, 0.25])
    a = rules.acceptance_probs(p, q)
    reject = 1 - (q * a).sum()
    out = q * a + reject * rules.residual(p, q)
    assert torch.allclose(out, p)


def test_ensemble_and_total_variation():
    p, q = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    assert torch.allclose(rules.ensemble(p, q, 0.25), torch.tensor([0.25, 0.75]))
    assert float(rules.total_variation(p, q)) == 1.0


@pytest.mark.parametrize("g", [0.0, 0.3, 0.999, 1.0])
@pytest.mark.parametrize("token", [5, 40])  # on the head, and off it (probability 0 before the copy)
def test_copy_mix_log_is_the_log_of_the_mixture_without_taking_logs_of_zeros(g, token):
    row = torch.full((64,), float("-inf"))
    row[:16] = torch.linspace(-3.0, 2.0, 16)  # a trimmed head: the rest of the row is -inf
    mixed = rules.copy_mix(torch.softmax(row, -1), token, g)
    got, want = rules.copy_mix_log(torch.log_softmax(row, -1), mixed, token, g), mixed.log()
    assert torch.equal(torch.isfinite(got), torch.isfinite(want))
    finite = torch.isfinite(want)
    assert torch.allclose(got[finite], want[finite], atol=1e-5)
    assert torch.allclose(got.exp().sum(), torch.tensor(1.0), atol=1e-5)
