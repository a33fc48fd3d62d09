"""The policy gradient of DIVERSED's trainer, checked by exact enumeration (docs/DIVERSED.md, "The policy gradient").

A toy speculative process with a tiny vocabulary is enumerated exactly: each round drafts ``gamma`` tokens from
q, accepts x with a = min(1, ν(x)/q(x)) (ν = w·p + (1 − w)·q), recovers from norm(max(0, ν − q)) at the first
rejection, or draws a bonus token from p when all drafts pass. The generation runs on past ``length`` tokens and
the reward reads the first ``length``: decisions after those cannot change R, and their score has mean zero
given the past, so each enumerated rollout stops there (as the trainer drops the positions after the emitted
text). The true ∇E[R] comes from autograd through the exact expectation Σ P(rollout)·R; the estimator's
expectation is Σ P(rollout)·R·∇ score(rollout), with the score from the trainer's own functions
(:func:`score_logprobs`, :func:`loss_terms`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from spec_core.heads.ensemble import EnsembleHead
from spec_core.train.diversed import loss_terms, score_logprobs

pytestmark = pytest.mark.usefixtures("one_thread")

Dist = Callable[[tuple[int, ...]], torch.Tensor]  # context → [V]


def enumerate_rollouts(
    p_of: Dist, q_of: Dist, w_of: Callable[[int, tuple[int, ...]], torch.Tensor], length: int, gamma: int
) -> list[tuple[tuple[int, ...], torch.Tensor, list[dict]]]:
    """Every rollout as (its first ``length`` tokens, its probability (differentiable in w), the positions the
    trainer records: ``t``, ``ctx`` and the recorder's fields)."""
    out = []

    def new_round(seq: list[int], prob: torch.Tensor, recs: list[dict]) -> None:
        draft(seq, 0, prob, recs)

    def draft(seq: list[int], i: int, prob: torch.Tensor, recs: list[dict]) -> None:
        if len(seq) >= length:
            out.append((tuple(seq[:length]), prob, recs))
            return
        ctx = tuple(seq)
        p, q = p_of(ctx), q_of(ctx)
        if i == gamma:  # every draft passed: the bonus token, from p (no w)
            for b in range(p.shape[0]):
                new_round(seq + [b], prob * p[b], recs)
            return
        w = w_of(len(seq), ctx)
        nu = w * p + (1 - w) * q
        tv = 0.5 * (p - q).abs().sum()
        for x in range(q.shape[0]):
            a = torch.clamp(nu[x] / q[x], max=1.0)
            base = {"t": len(seq), "ctx": ctx, "p_x": p[x], "q_x": q[x], "tv": tv}
            draft(seq + [x], i + 1, prob * q[x] * a, recs + [{**base, "accepted": True, "p_y": p[x], "q_y": q[x]}])
            if p[x] < q[x]:  # ν(x) < q(x) for every w > 0: x may be rejected
                res = (nu - q).clamp_min(0.0)
                res = res / res.sum()
                for y in range(q.shape[0]):
                    if p[y] > q[y]:  # the residual's support
                        rec = {**base, "accepted": False, "p_y": p[y], "q_y": q[y]}
                        new_round(seq + [y], prob * q[x] * (1 - a) * res[y], recs + [rec])

    new_round([], torch.ones((), dtype=torch.float64), [])
    return out


def batch(recs: list[dict]) -> dict[str, torch.Tensor]:
    """The recorder's tensors of one rollout."""
    out = {k: torch.stack([r[k] for r in recs]) for k in ("p_x", "q_x", "p_y", "q_y", "tv")}
    out["accepted"] = torch.tensor([r["accepted"] for r in recs])
    return out


def exact_and_estimated(rollouts, reward, params, score) -> tuple[torch.Tensor, torch.Tensor]:
    """(∇E[R] by autograd through Σ P·R, E[R·∇ score] by enumeration), both w.r.t. ``params``."""
    exact = sum(prob * reward(tokens) for tokens, prob, _ in rollouts)
    surrogate = sum(float(prob.detach()) * reward(tokens) * score(recs) for tokens, prob, recs in rollouts if recs)
    (g_exact,) = torch.autograd.grad(exact, params, retain_graph=True)
    (g_est,) = torch.autograd.grad(surrogate, params)
    return g_exact, g_est


# -- the issue's toy: one-token rounds ------------------------------------------------------------------------


def issue_toy():
    """p = [.9, .1], q = [.2, .8] everywhere, γ = 1, w_t = .5 at output position t, R = 1[second token = 0]."""
    p, q = torch.tensor([0.9, 0.1], dtype=torch.float64), torch.tensor([0.2, 0.8], dtype=torch.float64)
    w = torch.full((2,), 0.5, dtype=torch.float64, requires_grad=True)
    rollouts = enumerate_rollouts(lambda c: p, lambda c: q, lambda t, c: w[t], length=2, gamma=1)
    return w, rollouts, lambda tokens: float(tokens[1] == 0)


def w_level_score(w, estimator):
    return lambda recs: score_logprobs(w[torch.tensor([r["t"] for r in recs])], batch(recs), estimator).sum()


def test_exact_gradient_issue_toy_decision_score_is_unbiased():
    """dE[R]/dw_1 = −0.7·0.9 + 0.7·ν_2(0) = −0.245: w_1 sets the rejection rate 0.7·w_1, and a rejection turns
    the second token from a bonus drawn from p (0 with 0.9) into a draw from ν_2 (0 with 0.55)."""
    w, rollouts, reward = issue_toy()
    assert sum(float(prob.detach()) for _, prob, _ in rollouts) == pytest.approx(1.0, abs=1e-12)
    g_exact, g_dec = exact_and_estimated(rollouts, reward, w, w_level_score(w, "decision"))
    assert float(g_exact[0]) == pytest.approx(-0.245, abs=1e-12)
    assert torch.allclose(g_dec, g_exact, atol=1e-6, rtol=0)


def test_exact_gradient_issue_toy_token_score_is_biased():
    """Σ log ν_t(y_t) sees y_1 = 0 alike whether x_1 = 0 was accepted (a bonus follows) or x_1 = 1 was
    rejected (round 2 follows): its expectation is −0.1559, not −0.245."""
    w, rollouts, reward = issue_toy()
    g_exact, g_tok = exact_and_estimated(rollouts, reward, w, w_level_score(w, "token"))
    assert float(g_tok[0]) == pytest.approx(0.2 * 0.9 * 0.7 / 0.55 + 0.35 * 0.7 - 0.9 * 0.7, abs=1e-12)  # −0.155909…
    assert abs(float(g_tok[0] - g_exact[0])) > 0.08


# -- a richer toy through the trainer's own loss_terms and a real head ------------------------------------------

V, LENGTH, GAMMA = 3, 3, 2


def head_toy(seed: int = 1):
    """p and q depend on the previous token, w_t = head(one-hot position t, one-hot previous token) with random
    weights (so w differs by position and context), γ = 2, a random reward table over the first 3 tokens."""
    g = torch.Generator().manual_seed(seed)
    tables = {
        name: torch.softmax(2 * torch.randn(V + 1, V, generator=g, dtype=torch.float64), -1) for name in ("p", "q")
    }
    r_table = torch.rand((V,) * LENGTH, generator=g, dtype=torch.float64)
    head = EnsembleHead(LENGTH, V + 1).double()
    with torch.no_grad():
        head.linear.weight.copy_(torch.randn(head.linear.weight.shape, generator=g, dtype=torch.float64))

    def hidden(t: int, ctx: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        d, h = torch.zeros(LENGTH, dtype=torch.float64), torch.zeros(V + 1, dtype=torch.float64)
        d[t], h[ctx[-1] if ctx else V] = 1.0, 1.0
        return d, h

    def w_of(t, ctx):
        d, h = hidden(t, ctx)
        return head(d[None], h[None])[0]

    def dist(name):
        return lambda ctx: tables[name][ctx[-1] if ctx else V]

    rollouts = enumerate_rollouts(dist("p"), dist("q"), w_of, LENGTH, GAMMA)

    def trainer_score(estimator):
        def score(recs):
            rec = batch(recs)
            rec["draft_hidden"] = torch.stack([hidden(r["t"], r["ctx"])[0] for r in recs])
            rec["target_hidden"] = torch.stack([hidden(r["t"], r["ctx"])[1] for r in recs])
            logp, _, _ = loss_terms(head, rec, estimator)  # the function the trainer's loss calls
            return logp.sum()

        return score

    return head, rollouts, lambda tokens: float(r_table[tokens]), trainer_score


@pytest.mark.parametrize("seed", range(4))
def test_exact_gradient_through_the_trainers_loss_terms(seed):
    """Two drafts a round, context-dependent p and q, w_t from a real head: the decision score's expectation
    equals the exact gradient for every weight of the head."""
    head, rollouts, reward, trainer_score = head_toy(seed)
    assert sum(float(prob.detach()) for _, prob, _ in rollouts) == pytest.approx(1.0, abs=1e-12)
    assert any(not r["accepted"] for _, _, recs in rollouts for r in recs)  # rejections are enumerated
    assert any(len(recs) == GAMMA and all(r["accepted"] for r in recs) for _, _, recs in rollouts)  # a bonus 3rd token
    g_exact, g_dec = exact_and_estimated(rollouts, reward, head.linear.weight, trainer_score("decision"))
    assert g_exact.abs().max() > 1e-3  # a gradient worth checking
    assert torch.allclose(g_dec, g_exact, atol=1e-6, rtol=0)


def test_exact_gradient_fails_for_the_token_score():
    """The same toy with the earlier score Σ log ν_t(y_t): its expectation is off by about half the gradient
    (relative error 0.53 in norm for this seed; 0.007–0.53 over seeds 0–3)."""
    head, rollouts, reward, trainer_score = head_toy()
    g_exact, g_tok = exact_and_estimated(rollouts, reward, head.linear.weight, trainer_score("token"))
    assert (g_tok - g_exact).norm() > 0.4 * g_exact.norm()


P_TOY, Q_TOY = torch.tensor([0.6, 0.4], dtype=torch.float64), torch.tensor([0.1, 0.9], dtype=torch.float64)


def argmax_rule_rewards(w: torch.Tensor) -> torch.Tensor:
    """``[N]`` rewards of one drafted position under the temperature-0 ``argmax`` rule for N values of w: p = [.6, .4]
    (the target's choice 0), q = [.1, .9] (the greedy draft 1); the draft is kept (reward 1) iff argmax ν = 1,
    which is w < 0.8, else the target's 0 is emitted (reward 0.25)."""
    from spec_core.core import rules

    nu = rules.ensemble(P_TOY.expand(w.shape[0], 2), Q_TOY.expand(w.shape[0], 2), w)  # [N, 2]
    return torch.where(nu.argmax(-1) == 1, 1.0, 0.25).double()


def test_toy_argmax_rule_is_the_engines():
    """The vectorised toy agrees with :func:`rules.verify_argmax_ensemble` on both sides of its step."""
    from spec_core.core import rules

    for w, kept in ((0.79, 1), (0.81, 0)):
        nu = rules.ensemble(P_TOY[None], Q_TOY[None], torch.tensor([w], dtype=torch.float64))
        assert rules.verify_argmax_ensemble(nu, torch.tensor([1]), 0)[1] == kept
        assert float(argmax_rule_rewards(torch.tensor([w], dtype=torch.float64))[0]) == (1.0 if kept else 0.25)


@pytest.mark.parametrize("mu,sigma", [(0.5, 1.0), (2.0, 0.7), (1.386, 0.3)])
def test_exact_gradient_gaussian_exploration_of_the_argmax_rule(mu, sigma):
    """At temperature 0 the argmax rule is a step in w, so the trainer explores z ~ N(μ, σ²), w = σ(z). The
    expectation of R(z)·∂/∂μ :func:`gaussian_score`, integrated over z by fine quadrature (no sampling), equals
    the closed form ∂/∂μ E[R] = −0.75·φ((logit 0.8 − μ)/σ)/σ."""
    from spec_core.train.diversed import gaussian_score

    mean = torch.tensor(mu, dtype=torch.float64, requires_grad=True)
    z = torch.linspace(mu - 10 * sigma, mu + 10 * sigma, 400_001, dtype=torch.float64)
    density = torch.exp(-((z - mu) ** 2) / (2 * sigma**2)) / (sigma * (2 * torch.pi) ** 0.5)
    rewards = argmax_rule_rewards(torch.sigmoid(z))
    estimate = (gaussian_score(mean, z, sigma) * rewards * density).sum() * (z[1] - z[0])
    (g_est,) = torch.autograd.grad(estimate, mean)
    u = (float(torch.logit(torch.tensor(0.8, dtype=torch.float64))) - mu) / sigma
    g_exact = -0.75 * torch.exp(torch.tensor(-(u**2) / 2, dtype=torch.float64)) / ((2 * torch.pi) ** 0.5 * sigma)
    assert float(g_est) == pytest.approx(float(g_exact), rel=1e-3, abs=1e-6)
