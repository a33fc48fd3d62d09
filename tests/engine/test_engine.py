"""The decoding loop on tiny random-weight pairs: greedy identity, cache rollback, events, bad input."""

from __future__ import annotations

import pytest
import torch
from conftest import make_tiny_pair

from spec_core.analysis.peers import run_peer
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation, generate, stream
from spec_core.model.cached_lm import CachedLM

PROMPT = "speculative decoding"
LOSSLESS_METHODS = ["fixed:1", "fixed:3", "fixed:8", "heuristic", "confidence:0.3", "fixed:2+lossless"]


@pytest.mark.parametrize("draft", ["standalone", "copy", "feature"])
def test_greedy_lossless_methods_match_ar(draft):
    pair = make_tiny_pair(draft=draft)
    ar = generate(pair, PROMPT, "ar", max_new_tokens=40)
    assert len(ar.token_ids) == 40 and ar.stats.tau == 1.0
    for method in LOSSLESS_METHODS:
        res = generate(pair, PROMPT, method, max_new_tokens=40)
        assert res.token_ids == ar.token_ids, method
    copy = generate(make_tiny_pair(draft="copy"), PROMPT, "fixed:4", max_new_tokens=40)
    assert copy.stats.acceptance_rate == 1.0  # the target drafting for itself is always right


def test_ar_matches_transformers_generate():
    pair = make_tiny_pair()
    ours = generate(pair, PROMPT, "ar", max_new_tokens=30)
    theirs = run_peer(pair, "hf-ar", list(ours.prompt_ids), 30)
    assert theirs.token_ids == ours.token_ids
    assert run_peer(pair, "hf-assisted:3", list(ours.prompt_ids), 30).token_ids == ours.token_ids


def test_rejections_and_acceptances_both_happen():
    res = generate(make_tiny_pair(draft="feature"), PROMPT, "fixed:3", max_new_tokens=60)
    kinds = {e.next_kind for e in res.events}
    assert res.stats.drafted_tokens > 0 and {"recovered", "bonus"} <= kinds
    assert len(set(res.token_ids)) > 3  # a varied output, not one repeated token


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_display_off_runs_the_same_rounds_without_viewer_numbers(temperature):
    """The benchmark's ``display=False`` changes nothing a method does (tokens, drafts, acceptance), and skips
    only the numbers a viewer reads: the greedy rule's p(x), q of the target's choice, p of the next token."""
    pair = make_tiny_pair(draft="feature")
    sampling = SamplingConfig(temperature=temperature, seed=4)
    runs = {d: Generation(pair, PROMPT, "fixed:3", 30, sampling, display=d) for d in (True, False)}
    events = {d: list(run.rounds()) for d, run in runs.items()}
    assert runs[True].new_tokens == runs[False].new_tokens
    for shown, bare in zip(events[True], events[False]):
        assert (shown.draft_tokens, shown.accepted, shown.next_token) == (
            bare.draft_tokens,
            bare.accepted,
            bare.next_token,
        )
        assert bare.accept_probs == pytest.approx(shown.accept_probs) and bare.draft_probs == shown.draft_probs
        assert bare.gold_draft_probs == () and bare.next_prob is None and shown.next_prob is not None
        # sampling verification needs p anyway, so it stays; the greedy rule never formed it
        assert bare.target_probs == (pytest.approx(shown.target_probs) if temperature else ())
        assert len(shown.target_probs) == len(shown.gold_draft_probs) == shown.draft_len


def _cache_tensors(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("draft", ["standalone", "feature"])
def test_cache_rollback_equals_fresh_prefill(draft):
    pair = make_tiny_pair(draft=draft)
    run = Generation(pair, PROMPT, "fixed:4", max_new_tokens=25, sampling=SamplingConfig(temperature=1.0, seed=3))
    events = list(run.rounds())
    assert any(e.accepted < e.draft_len for e in events)  # some round was rolled back
    ids = list(run.prompt_ids) + list(run.result().token_ids)
    fresh = CachedLM(pair.target)
    fresh.reset()
    fresh.forward(torch.tensor(ids[:-1]))
    assert run.target_lm.length == len(ids) - 1
    for (k1, v1), (k2, v2) in zip(_cache_tensors(run.target_lm.cache), _cache_tensors(fresh.cache)):
        assert k1.shape == k2.shape
        assert torch.allclose(k1, k2, atol=1e-5) and torch.allclose(v1, v2, atol=1e-5)


def test_events_tell_the_whole_story():
    pair = make_tiny_pair(draft="feature")
    res = generate(pair, PROMPT, "fixed:3", max_new_tokens=33, temperature=0.8, seed=1)
    emitted = [t for e in res.events for t in e.emitted]
    assert tuple(emitted) == res.token_ids and len(emitted) == 33
    for e in res.events:
        assert len(e.draft_tokens) == len(e.draft_probs) == len(e.target_probs) == len(e.accept_probs)
        assert len(e.gold_draft_probs) == e.draft_len and 0 <= e.accepted <= e.draft_len
        expected = "target" if e.draft_len == 0 else ("bonus" if e.accepted == e.draft_len else "recovered")
        assert e.next_kind == expected  # a round with no draft (budget spent) is a plain target step
        assert all(0.0 <= a <= 1.0 for a in e.accept_probs)
    assert res.events[-1].finished and not any(e.finished for e in res.events[:-1])
    s = res.stats
    assert s.target_forwards == len(res.events) and s.tau == pytest.approx(33 / len(res.events))
    assert s.accepted_tokens == sum(e.accepted for e in res.events)


def test_events_say_the_verification_width_and_the_draft_forwards():
    """What a round cost in forwards, for the cost model: ar is one position and no draft forward; a chain of γ
    drafted token by token is γ + 1 positions and γ draft forwards (round 0 too, counted as its width)."""
    pair = make_tiny_pair(draft="feature")
    for e in generate(pair, PROMPT, "ar", max_new_tokens=6).events:
        assert (e.verify_width, e.draft_forwards, e.tree) == (1, 0, None)
    events = generate(pair, PROMPT, "fixed:3", max_new_tokens=20).events
    assert {e.draft_len for e in events} >= {3}
    for e in events:
        assert (e.verify_width, e.draft_forwards) == (e.draft_len + 1, e.draft_len)


def test_same_seed_same_sample_and_stream_equals_generate():
    pair = make_tiny_pair()
    a = generate(pair, PROMPT, "fixed:3", max_new_tokens=20, temperature=1.0, seed=7)
    b = generate(pair, PROMPT, "fixed:3", max_new_tokens=20, temperature=1.0, seed=7)
    assert a.token_ids == b.token_ids
    streamed = [t for e in stream(pair, PROMPT, "fixed:3", 20, temperature=1.0, seed=7) for t in e.emitted]
    assert tuple(streamed) == a.token_ids


def test_eos_stops_cleanly():
    pair = make_tiny_pair()
    ar = generate(pair, PROMPT, "ar", max_new_tokens=30)
    eos = ar.token_ids[5]
    pair.target.generation_config.eos_token_id = eos
    stop = ar.token_ids.index(eos) + 1
    for method in ["ar", "fixed:4"]:
        res = generate(pair, PROMPT, method, max_new_tokens=30)
        assert res.token_ids == ar.token_ids[:stop] and res.events[-1].finished


def test_should_stop_ends_generation():
    pair = make_tiny_pair()
    run = Generation(pair, PROMPT, "fixed:2", max_new_tokens=50, should_stop=lambda: True)
    assert len(list(run.rounds())) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prompt": ""},
        {"prompt": "   "},
        {"method": "nonsense"},
        {"method": "fixed:-1"},
        {"max_new_tokens": 0},
        {"max_new_tokens": 10**7},
        {"temperature": -0.5},
        {"top_p": 0.0},
        {"method": "hf-ar"},
        {"method": "block:dpace+fixed:3"},
    ],
)
def test_bad_input_is_a_clear_error(kwargs):
    args = {"prompt": PROMPT, "method": "fixed:2", "max_new_tokens": 5} | kwargs
    with pytest.raises(SpecScopeError):
        generate(make_tiny_pair(), **args)


def test_context_overflow_is_a_clear_error():
    with pytest.raises(SpecScopeError, match="context"):
        generate(make_tiny_pair(), "x" * 500, "ar", max_new_tokens=100)


def test_greedy_display_numbers_come_from_one_pass():
    """At temperature 0 the event's numbers are read off the round's one pass over each distribution: q(gold) by the
    ratio to the draft's own q(x), p(x) and the next token's p from the target's log-normaliser."""
    pair = make_tiny_pair(draft="feature")
    events = generate(pair, PROMPT, "fixed:3", max_new_tokens=24).events
    drafted = [e for e in events if e.draft_len]
    assert drafted and any(e.accepted < e.draft_len for e in drafted)
    for e in drafted:
        for i in range(e.accepted):  # kept: the draft's token is the target's own, so q(gold) is q(x)
            assert e.gold_draft_probs[i] == pytest.approx(e.draft_probs[i], rel=1e-4)
        if e.accepted < e.draft_len:  # the first rejection: the draft's argmax x beats the target's choice under q
            assert 0.0 <= e.gold_draft_probs[e.accepted] <= e.draft_probs[e.accepted] + 1e-6
        assert all(0.0 < p <= 1.0 for p in e.target_probs) and 0.0 < e.next_prob <= 1.0
