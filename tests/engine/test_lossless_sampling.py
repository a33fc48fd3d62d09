"""Speculative sampling is lossless: the first tokens are distributed exactly as the target's.

A tiny random pair (vocabulary of 6) with a draft that disagrees with the target; the empirical distribution of
the first two tokens over many seeded runs must match the target's exact distribution (total variation within
sampling noise), and the same test must catch a deliberately broken rule.
"""

from __future__ import annotations

import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core import rules
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation

VOCAB, DRAWS, TEMPERATURE = 6, 4000, 1.0
PROMPT = "lossless"
# Pure sampling noise at 4000 draws measured about 0.02 here; the broken rules land far above the limit.
TV_LIMIT = 0.05


def exact_first_two(pair, prompt_ids) -> torch.Tensor:
    """P(t1, t2) under the target, [V, V], from its logits (temperature 1)."""
    with torch.no_grad():
        ids = torch.tensor([prompt_ids])
        p1 = torch.softmax(pair.target(ids).logits[0, -1] / TEMPERATURE, -1)  # [V]
        seqs = torch.cat([ids.repeat(VOCAB, 1), torch.arange(VOCAB)[:, None]], dim=1)
        p2 = torch.softmax(pair.target(seqs).logits[:, -1] / TEMPERATURE, -1)  # [V, V]
    return p1[:, None] * p2


def empirical_first_two(pair, method: str, draws: int, outcomes: dict | None = None) -> torch.Tensor:
    """Distribution of the first two tokens over ``draws`` seeds. Three new tokens are generated, so the first
    round of ``fixed:2`` drafts two (its budget keeps one token for the target); ``outcomes`` counts the first
    rounds by ``(draft_len, accepted)`` so a test can check that rejections after the first position happened."""
    counts = torch.zeros(VOCAB, VOCAB)
    for seed in range(draws):
        run = Generation(pair, PROMPT, method, 3, SamplingConfig(temperature=TEMPERATURE, seed=seed))
        events = list(run.rounds())
        t1, t2 = run.result().token_ids[:2]
        counts[t1, t2] += 1
        if outcomes is not None:
            key = (events[0].draft_len, events[0].accepted)
            outcomes[key] = outcomes.get(key, 0) + 1
    return counts / draws


@pytest.fixture(scope="module")
def setting():
    pair = make_tiny_pair(vocab=VOCAB, draft="standalone", target_seed=3, draft_seed=11)
    prompt_ids = Generation(pair, PROMPT, "ar", 2).prompt_ids
    exact = exact_first_two(pair, prompt_ids)
    with torch.no_grad():  # the draft must really disagree, or the test proves nothing
        ids = torch.tensor([prompt_ids])
        q1 = torch.softmax(pair.draft(ids).logits[0, -1], -1)
    assert float(rules.total_variation(exact.sum(1), q1)) > 0.3
    return pair, exact


def test_speculative_sampling_matches_target_distribution(setting):
    pair, exact = setting
    outcomes: dict = {}
    emp = empirical_first_two(pair, "fixed:2", DRAWS, outcomes)
    tv = float(rules.total_variation(emp.flatten(), exact.flatten()))
    print(f"TV(speculative, target) = {tv:.4f}; first rounds by (drafted, accepted): {outcomes}")
    assert tv < TV_LIMIT
    # two-token rounds rejected at the first position and at the second (this draft rarely gets both right)
    for key in [(2, 0), (2, 1)]:
        assert outcomes.get(key, 0) >= DRAWS // 50, outcomes


def test_ar_sampling_matches_target_distribution(setting):
    pair, exact = setting
    emp = empirical_first_two(pair, "ar", DRAWS // 2)
    assert float(rules.total_variation(emp.flatten(), exact.flatten())) < TV_LIMIT * 1.5


@pytest.mark.parametrize("broken", ["residual_is_p", "always_accept"])
def test_broken_rule_fails_the_same_test(setting, monkeypatch, broken):
    pair, exact = setting
    if broken == "residual_is_p":  # resample from p instead of norm(max(0, p − q)) after a rejection
        monkeypatch.setattr(rules, "residual", lambda p, q: p)
    else:  # skip the p/q test
        monkeypatch.setattr(rules, "acceptance_probs", lambda p_x, q_x, leniency=1.0: torch.ones_like(p_x))
    emp = empirical_first_two(pair, "fixed:2", DRAWS // 2)
    assert float(rules.total_variation(emp.flatten(), exact.flatten())) > 2 * TV_LIMIT


def test_the_target_spreads_its_mass(setting):
    """A target that almost always says the same thing would make the distribution test trivially easy."""
    _, exact = setting
    assert (exact > 0.01).sum() >= 4


def exact_first_two_warped(pair, prompt_ids, sampling: SamplingConfig) -> torch.Tensor:
    """P(t1, t2) under the target with the sampling config's temperature / top-k / top-p applied."""
    warp = lambda logits: rules.warp_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p)  # noqa: E731
    with torch.no_grad():
        ids = torch.tensor([prompt_ids])
        p1 = warp(pair.target(ids).logits[0, -1:])[0]  # [V]
        seqs = torch.cat([ids.repeat(VOCAB, 1), torch.arange(VOCAB)[:, None]], dim=1)
        p2 = warp(pair.target(seqs).logits[:, -1])  # [V, V]
    return p1[:, None] * p2


@pytest.mark.slow
@pytest.mark.parametrize(
    "sampling", [SamplingConfig(temperature=0.7, top_p=0.9), SamplingConfig(temperature=1.3, top_k=3)]
)
@pytest.mark.parametrize("method", ["fixed:3", "heuristic", "confidence:0.3"])
def test_lossless_with_warping_and_every_policy(setting, sampling, method):
    """Opt-in (`make test-all`): the same check with top-p / top-k warping applied to both models."""
    pair, _ = setting
    exact = exact_first_two_warped(pair, Generation(pair, PROMPT, "ar", 2).prompt_ids, sampling)
    counts = torch.zeros(VOCAB, VOCAB)
    for seed in range(DRAWS):
        run = Generation(
            pair, PROMPT, method, 3, SamplingConfig(sampling.temperature, sampling.top_p, sampling.top_k, seed)
        )
        for _ in run.rounds():
            pass
        t1, t2 = run.result().token_ids[:2]
        counts[t1, t2] += 1
    assert float(rules.total_variation((counts / DRAWS).flatten(), exact.flatten())) < TV_LIMIT
