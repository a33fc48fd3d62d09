"""Prompt lookup and the hybrid draft: the index, the estimates, the cost policy, and losslessness end to end."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_tiny_pair
from test_lossless_sampling import DRAWS, TV_LIMIT, empirical_first_two, exact_first_two

from spec_core.core import rules
from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.lookup import HybridParams, KeepEstimates, LookupParams
from spec_core.drafters.ngram import NgramIndex
from spec_core.engine.loop import Generation, generate
from spec_core.engine.methods import parse_method
from spec_core.policies.base import DraftSoFar
from spec_core.policies.cost import CostLength, tree_expected

# -- the index ------------------------------------------------------------------------------------------------


def test_the_longest_match_wins_and_its_continuation_is_what_followed():
    index = NgramIndex(1, 3)
    index.extend([5, 6, 7, 8, 1, 6, 7, 9, 5, 6, 7])  # ends with 5 6 7, which was followed by 8
    n, start, recurred = index.match()
    assert n == 3 and index.ids[start] == 8 and not recurred


def test_the_continuation_most_occurrences_agree_on_is_chosen():
    index = NgramIndex(1, 1)
    index.extend([3, 4, 3, 4, 3, 9, 3])  # 3 → 4, 4, 9: two votes for 4
    n, start, recurred = index.match()
    assert n == 1 and index.ids[start] == 4 and recurred


def test_no_match_is_none_and_the_text_end_is_never_its_own_match():
    index = NgramIndex(2, 3)
    index.extend([1, 2, 3, 4])
    assert index.match() is None
    index.extend([2, 3])  # 2 3 occurred before, followed by 4
    assert index.ids[index.match()[1]] == 4


@pytest.mark.timing  # reads microseconds off the wall clock: a busy machine fails it, not the index
def test_the_index_grows_incrementally_and_matches_fast_on_a_long_context():
    """A 4,000-token context: building the index once, then a round's match and a commit, cost well under a
    millisecond each (a scan of the context would grow with it)."""
    g = torch.Generator().manual_seed(0)
    context = torch.randint(0, 2000, (4000,), generator=g).tolist()
    index = NgramIndex(1, 3)
    t0 = time.perf_counter()
    index.extend(context)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t in range(200):
        index.match()
        index.extend([t])
    per_round = (time.perf_counter() - t0) / 200
    print(f"4,000-token index built in {build * 1000:.1f} ms; match + commit {per_round * 1e6:.0f} µs a round")
    assert per_round < 1e-3
    assert build < 0.5


def test_estimates_learn_from_the_rounds():
    est = KeepEstimates()
    prior = est.estimate(2, 1, False)
    for _ in range(20):
        est.update(2, drafted=4, accepted=4, recurred=False)
    assert est.estimate(2, 1, False) > 0.9 > prior
    for _ in range(40):
        est.update(3, drafted=4, accepted=0, recurred=True)
    assert est.estimate(3, 1, True) < 0.2


@pytest.mark.parametrize(
    "bad", ["lookup:k=0", "lookup:min=3,max=2", "lookup:max=9", "lookup:n=2", "lookup:k", "hybrid:k=x"]
)
def test_bad_settings_say_what_is_allowed(bad):
    with pytest.raises(SpecScopeError, match="min|max|k"):
        parse_method(bad)


def test_a_learned_part_that_reads_draft_states_is_refused_with_a_lookup():
    for name in ("lookup+pacer", "hybrid+diversed"):
        with pytest.raises(SpecScopeError, match="hidden states"):
            parse_method(name)
    assert parse_method("lookup").policy.family == "cost"
    assert parse_method("lookup+fixed:3").policy.text == "fixed:3"
    assert parse_method("hybrid").drafter.params == HybridParams(LookupParams(), branch=False)


def test_the_hybrid_branches_only_with_the_tree_verifier_and_its_own_lengths():
    """A branched round is a tree whose lengths the hybrid chooses: a named length policy or a verifier of chains
    gives one source a round, as ``hybrid`` and ``branch=0`` do."""
    assert parse_method("hybrid:branch=1").drafter.params.branch
    assert parse_method("hybrid:k=4,branch=1").drafter.params == HybridParams(LookupParams(k=4), branch=True)
    for name in ("hybrid", "hybrid:branch=0", "hybrid:branch=1+fixed:2", "hybrid:branch=1+lenient:0.5"):
        assert not parse_method(name).drafter.params.branch, name
    for bad in ("hybrid:branch=2", "hybrid:branch", "hybrid:branch=yes"):
        with pytest.raises(SpecScopeError, match="branch is 0"):
            parse_method(bad)


# -- the cost policy ---------------------------------------------------------------------------------------------


def _drafted_length(profile: CostProfile, estimate: float, source: str = "lookup") -> int:
    policy = CostLength(profile, 16)
    tokens: list[int] = []
    while policy.next_chunk(
        DraftSoFar(tokens, [1.0] * len(tokens), [], 64, [source] * len(tokens), [estimate] * len(tokens))
    ):
        tokens.append(0)
    return len(tokens)


CPU_LIKE = CostProfile(widths=(1, 2, 4, 8, 16), target_ms=(50, 54, 60, 86, 129), draft_ms=3.0)


def test_the_cost_policy_prices_a_branched_round_as_a_tree():
    """A branched round (the copy's two tokens, the network's one beside the first) is drafted whole: the policy
    asks for nothing more and expects 1 + a_1 + a_1·a_2 + b, b the network token's chance to be the kept one."""
    policy = CostLength(CPU_LIKE, 16)
    so_far = DraftSoFar([5, 6, 7], [1.0, 1.0, 0.6], [], 64, ["lookup", "lookup", "model"], [0.5, 0.8, 0.3], [-1, 0, -1])
    assert policy.next_chunk(so_far) == 0 and policy.stop_reason == "branched"
    assert policy.trace()["expected_tokens"] == pytest.approx(1 + 0.5 + 0.5 * 0.8 + 0.3)
    assert tree_expected(np.array([0.5, 0.8, 0.3, 0.9]), [-1, 0, -1, 2]) == pytest.approx(0.5 + 0.4 + 0.3 + 0.27)


def test_the_cost_policy_drafts_longer_where_passes_are_cheap_and_evidence_strong():
    gpu = accelerator_profile(0.05, step_ms=50, unit="ms")
    assert _drafted_length(gpu, 0.9) == 16  # a pass over 17 tokens costs one step: draft all
    cpu_strong, cpu_weak = _drafted_length(CPU_LIKE, 0.95), _drafted_length(CPU_LIKE, 0.3)
    assert 3 <= cpu_strong < 16 and cpu_weak <= 2 < cpu_strong
    assert _drafted_length(CPU_LIKE, 0.6) >= _drafted_length(CPU_LIKE, 0.6, "model")  # a network's token costs


def test_the_cost_policy_beats_every_fixed_length_on_its_own_model():
    """At i.i.d. acceptance a, its length is the best fixed window's (or within one token of the same speed)."""
    for a in (0.3, 0.6, 0.8, 0.95):
        k = _drafted_length(CPU_LIKE, a)
        speed = lambda n, a=a: float(sum(a**i for i in range(n + 1)) / CPU_LIKE.round_ms(n + 1, 0))  # noqa: E731
        best = max(range(1, 17), key=speed)
        assert speed(k) >= 0.98 * speed(best), (a, k, best)


# -- end to end ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["lookup", "hybrid", "lookup+fixed:4", "hybrid+confidence:0.4"])
def test_lookup_drafts_are_lossless_greedy_on_a_tiny_pair(method, one_thread):
    pair = make_tiny_pair(vocab=8, draft="feature" if method.startswith("hybrid") else "standalone")
    prompt = "abcabcabdabcab"
    ar = generate(pair, prompt, "ar", 40)
    run = generate(pair, prompt, method, 40)
    assert run.token_ids == ar.token_ids
    sources = {s for e in run.events for s in e.draft_sources}
    assert "lookup" in sources
    assert run.stats.copied_tokens == sum(e.draft_sources[: e.accepted].count("lookup") for e in run.events)


def _fixed_costs(pair, monkeypatch, share: float | None = 0.0):
    """Price ``pair``'s rounds with one fixed table (the shipped Xeon int8 one), not with whatever table this machine
    has: which source wins a round is the cost model's choice, so the tests hand the runs fixed costs as data.
    ``share``: the network's work per position over the target's, which prices its start (0: free; None: the tiny
    pair's own, 0.61, a draft half the size of its target)."""
    from spec_core.analysis.heads import read_table
    from spec_core.core.assets import ASSETS_DIR
    from spec_core.drafters import lookup
    from spec_core.engine import loop as engine

    profile = read_table(ASSETS_DIR / "results" / "costs" / "xeon-amx-1thread.json", "int8")
    monkeypatch.setattr(engine, "run_costs", lambda p: (profile, None))  # undone after the test
    if share is not None:
        monkeypatch.setattr(lookup, "position_work", lambda m: 1000 if m is pair.target else round(1000 * share))


def test_hybrid_uses_both_sources(one_thread, monkeypatch):
    pair = make_tiny_pair(vocab=16, draft="feature")
    _fixed_costs(pair, monkeypatch)
    run = generate(pair, "abcdefgabcdefg", "hybrid", 60)
    sources = {s for e in run.events for s in e.draft_sources}
    assert sources == {"lookup", "model"}, sources


def _always_branch(monkeypatch, seen: list | None = None):
    """Every round with a copy branches (its copy up to 3 tokens), the others go to the network: the branched
    round's verification and bookkeeping tested whatever the choice; ``seen`` gets each branched round's
    (copy's first token, network's token, the kept text)."""
    from spec_core.drafters import lookup

    class Branching(lookup.HybridDrafter):
        def _choose(self) -> str:
            estimates = self.lookup.run_estimates()
            if not estimates:
                return "model"
            self.branch_len = min(len(estimates), 3, max((self.remaining or 4) - 1, 1))
            return "both"

        def _commit_branched(self, kept, verified) -> None:
            if seen is not None:
                seen.append((self.drafted[0], self.net_token, list(kept)))
            super()._commit_branched(kept, verified)

    monkeypatch.setattr(lookup, "HybridDrafter", Branching)


def test_a_branched_round_keeps_whichever_source_the_target_bears_out(one_thread, monkeypatch):
    """The copy's run and the network's token side by side, one pass: greedy, the text is ``ar``'s, and the round
    keeps the copy's run where the target agrees with it, the network's token where it agrees with that."""
    from visuals.lookup import sources_caption

    pair = make_tiny_pair(vocab=16, draft="feature")
    _fixed_costs(pair, monkeypatch)
    seen: list = []
    _always_branch(monkeypatch, seen)
    prompt = "abcdefgabcdefgabdcefg"
    ar = generate(pair, prompt, "ar", 60)
    run = generate(pair, prompt, "hybrid:branch=1", 60)
    assert run.token_ids == ar.token_ids
    copy_kept = [kept for first, net, kept in seen if len(kept) > 1 and kept[0] == first]
    net_kept = [kept for first, net, kept in seen if len(kept) > 1 and kept[0] == net != first]
    assert copy_kept and net_kept, seen
    branched = [e for e in run.events if e.tree is not None]
    assert branched and all(e.draft_forwards == 1 for e in branched)  # one network token beside the copy
    trees = [(first, kept) for first, net, kept in seen if first != net]  # where they agree: the copy's chain
    assert len(trees) == len(branched)
    by_copy = sum(1 for first, kept in trees if len(kept) > 1 and kept[0] == first)
    text = sources_caption({"hybrid:branch=1": run.events})  # the Live view's sentence says the same
    assert (
        f"{len(branched)} rounds put the copy and the model's own next token side by side in one pass, and the "
        f"target kept the model's token in {len(net_kept)} of them, the copy's in {by_copy}"
    ) in text


@pytest.fixture(scope="module")
def sampling_setting():
    from test_lossless_sampling import PROMPT, VOCAB

    pair = make_tiny_pair(vocab=VOCAB, draft="standalone", target_seed=3, draft_seed=11)
    prompt_ids = Generation(pair, PROMPT, "ar", 2).prompt_ids
    return pair, exact_first_two(pair, prompt_ids)


@pytest.mark.parametrize("method", ["lookup+fixed:2", "hybrid+fixed:2", "hybrid:branch=1"])
def test_lookup_sampling_keeps_the_target_distribution(sampling_setting, one_thread, method, monkeypatch):
    """The prompt repeats tokens, so the first round copies a draft; the text's distribution is the target's
    (the hybrid's network, a standalone draft here, takes the rounds the copy does not; ``hybrid:branch=1`` branches
    every round that has a copy: the copy's run and the network's greedy token side by side, verified as a tree)."""
    pair, exact = sampling_setting
    if method == "hybrid:branch=1":
        _always_branch(monkeypatch)
    outcomes: dict = {}
    emp = empirical_first_two(pair, method, DRAWS // 2, outcomes)
    tv = float(rules.total_variation(emp.flatten(), exact.flatten()))
    print(f"TV(lookup, target) = {tv:.4f}; first rounds by (drafted, accepted): {outcomes}")
    assert tv < TV_LIMIT * 1.5
    assert sum(v for (drafted, _), v in outcomes.items() if drafted) > DRAWS // 4  # it did draft
    assert sum(v for (drafted, kept), v in outcomes.items() if drafted and kept < drafted) > DRAWS // 20


@pytest.mark.embedded
@pytest.mark.parametrize("method", ["lookup", "hybrid"])
def test_lookup_and_hybrid_equal_ar_on_the_embedded_pair_in_float32(embedded_f32, method):
    prompt = (
        "Summarize: The river rose two metres overnight, and the town closed the old bridge. "
        "The mayor said the old bridge would stay closed until engineers had checked it."
    )
    ar = generate(embedded_f32, prompt, "ar", 48)
    run = generate(embedded_f32, prompt, method, 48)
    assert run.token_ids == ar.token_ids
    assert run.stats.copied_tokens > 0
    assert SamplingConfig().greedy


@pytest.mark.embedded
def test_the_hybrid_network_starts_late_with_the_states_of_the_whole_text(embedded_f32, monkeypatch):
    """The network's first draft in every round it drafts equals a fresh draft network's over the same verified
    text: its late start and its following of copied rounds leave its features those of the text. (The rule that
    keeps the network from starting near the text's end is set aside: this 48-token text is short enough for it to
    keep the network out altogether on some machines' costs, and the states are what is checked here.)"""
    from spec_core.drafters import lookup
    from spec_core.drafters.feature import FeatureDrafter
    from spec_core.model.cached_lm import CachedLM

    monkeypatch.setattr(lookup.HybridDrafter, "before_round", lambda self, remaining: None)
    _flat_costs(monkeypatch)  # when the network starts is the costs' call: fixed data, not timed
    pair = embedded_f32
    prompt = "Repeat after me, then add one sentence of your own: the old bridge stays closed until engineers check it."
    run = generate(pair, prompt, "hybrid", 48)

    def fresh_first(ids: list[int]) -> tuple[int, float]:
        drafter = FeatureDrafter(pair.draft)
        lm = CachedLM(pair.target, layers=drafter.target_layers, hidden=True)
        lm.reset()
        with torch.inference_mode():
            drafter.reset(ids, lm.forward(torch.tensor(ids[:-1])))
            chunk = drafter.propose(1, SamplingConfig(), None)
        return chunk.tokens[0], chunk.token_probs[0]

    text, checked = list(run.prompt_ids), 0
    for e in run.events:
        if e.draft_sources[:1] == ("model",):
            token, prob = fresh_first(text)
            assert e.draft_tokens[0] == token and e.draft_probs[0] == pytest.approx(prob, abs=1e-4), e.index
            checked += 1
        text += list(e.emitted)
    first_model = next(e.index for e in run.events if e.draft_sources[:1] == ("model",))
    assert checked >= 1 and any(e.draft_sources[:1] == ("lookup",) for e in run.events[:first_model])


# -- the network's deferred catch-up ------------------------------------------------------------------------------


def _flat_costs(monkeypatch) -> None:
    """Price the runs with a table where a wide pass costs about one step, so that the network starts early (the
    AVX-512 table as first shipped, kept beside these tests): the states are what they check, so the costs are fixed
    data, not this machine's."""
    from spec_core.core import cost_tables

    monkeypatch.setenv(cost_tables.COSTS_ENV, str(Path(__file__).with_name("flat_costs_avx512.json")))


def _hybrid_runs(pair, prompt: str, new_tokens: int, monkeypatch) -> tuple:
    """The same hybrid generation twice: as shipped (the network takes in each stretch of rounds it did not draft
    when it next drafts) and with the network taking in every round as it ends. Also: how many rounds each of the
    shipped run's catch-ups took in, and each run's network state (its text, its cached pairs, its features) every
    time it drafted."""
    from spec_core.drafters import lookup

    stretches: list[int] = []
    states: dict[str, list] = {"deferred": [], "eager": []}

    def watched(drafter, name: str):
        model, propose = drafter.model, drafter.model.propose

        def propose_and_record(*args):
            states[name].append((list(model.ids), model.cached, model.feats[: model.n_feats].clone()))
            return propose(*args)

        model.propose = propose_and_record

    class Deferred(lookup.HybridDrafter):
        def __init__(self, *args):
            super().__init__(*args)
            watched(self, "deferred")

        def _catch_up(self) -> None:
            stretches.append(len(self.rows) if self.started else 0)  # 0: the start, a reset
            super()._catch_up()

    class EveryRound(lookup.HybridDrafter):
        def __init__(self, *args):
            super().__init__(*args)
            watched(self, "eager")

        def commit(self, accepted, next_token, verified, path=None):
            super().commit(accepted, next_token, verified, path)
            if self.started and self.behind:
                self._catch_up()  # each round taken in as it ends, as the hybrid's network once followed them

    monkeypatch.setattr(lookup, "HybridDrafter", Deferred)
    deferred = generate(pair, prompt, "hybrid", new_tokens)
    monkeypatch.setattr(lookup, "HybridDrafter", EveryRound)
    eager = generate(pair, prompt, "hybrid", new_tokens)
    return deferred, eager, stretches, states


def _same_network(deferred, eager, states) -> int:
    """Every round of the two runs drafts the same tokens from the same source with the same q, and the network
    holds the same text, cache and features (to float32 rounding) whenever it drafts; returns how many rounds it
    drafted."""
    assert len(deferred.events) == len(eager.events)
    for d, e in zip(deferred.events, eager.events):
        assert d.draft_sources == e.draft_sources and d.draft_tokens == e.draft_tokens, d.index
        assert d.draft_probs == pytest.approx(e.draft_probs, abs=1e-5), d.index
    assert deferred.token_ids == eager.token_ids
    assert len(states["deferred"]) == len(states["eager"]) >= 2
    for (ids_d, cached_d, feats_d), (ids_e, cached_e, feats_e) in zip(states["deferred"], states["eager"]):
        assert ids_d == ids_e and cached_d == cached_e
        torch.testing.assert_close(feats_d, feats_e, rtol=1e-5, atol=1e-5)
    return sum(1 for e in deferred.events if e.draft_sources[:1] == ("model",))


def test_the_network_catching_up_on_a_stretch_drafts_as_if_it_had_followed_every_round(one_thread, monkeypatch):
    """A stretch of rounds the network did not draft, taken in at once when it next drafts, leaves its cache and
    features as taking in each round as it ends: the same drafts, the same q (tiny feature pair, the Xeon's costs,
    which use both sources here)."""
    pair = make_tiny_pair(vocab=16, draft="feature")
    _fixed_costs(pair, monkeypatch)
    deferred, eager, stretches, states = _hybrid_runs(pair, "abcdefgabcdefg", 60, monkeypatch)
    assert _same_network(deferred, eager, states) >= 2
    assert stretches[0] == 0 and max(stretches) >= 2, stretches  # a start, then a stretch of several rounds


@pytest.mark.embedded
def test_the_embedded_network_catching_up_drafts_as_if_it_had_followed_every_round(embedded_f32, monkeypatch):
    """The same on the real pair in float32, where a stretch's states go through the feature fusion in one pass."""
    prompt = (
        "Copy this list, then say which item is the odd one out and why: apples, pears, plums, bricks, cherries. "
        "Copy it once more in reverse order: cherries, bricks, plums, pears, apples."
    )
    _flat_costs(monkeypatch)
    deferred, eager, stretches, states = _hybrid_runs(embedded_f32, prompt, 64, monkeypatch)
    assert _same_network(deferred, eager, states) >= 2
    assert stretches[0] == 0 and max(stretches) >= 2, stretches


def test_the_network_starts_once_the_rounds_it_would_have_won_have_forgone_its_start(one_thread, monkeypatch):
    """A ski rental: the dearer the network's pass over the text so far, the later it starts, and it starts only once
    the milliseconds its prior says it would have saved in the rounds it waited reach that pass's price. Free, it
    starts at the first round the copy does not win; at the tiny pair's own share (its draft is half its target) the
    start never pays within 60 tokens."""
    from spec_core.drafters import lookup

    starts: list[tuple[float, float]] = []

    class Recorded(lookup.HybridDrafter):
        def _catch_up(self) -> None:
            if not self.started:
                starts.append((self.forgone, self.start_ms()))
            super()._catch_up()

    monkeypatch.setattr(lookup, "HybridDrafter", Recorded)
    first_model = {}
    for share in (0.0, 0.2, 0.4, None):
        pair = make_tiny_pair(vocab=16, draft="feature")
        _fixed_costs(pair, monkeypatch, share)
        starts.clear()
        run = generate(pair, "abcdefgabcdefg", "hybrid", 60)
        rounds = [e.index for e in run.events if e.draft_sources[:1] == ("model",)]
        first_model[share] = rounds[0] if rounds else len(run.events)
        assert len(starts) == (1 if rounds else 0)
        assert all(forgone >= price for forgone, price in starts), starts
        if share == 0.0:
            assert first_model[share] == next(e.index for e in run.events if e.draft_sources[:1] != ("lookup",))
    assert first_model[0.0] < first_model[0.2] < first_model[0.4] < first_model[None] == len(run.events)


def test_the_network_does_not_start_when_the_tokens_left_cannot_repay_its_start(one_thread, monkeypatch):
    """Near the text's end the ski rental's rule is not enough: the engine tells the hybrid how many tokens are left
    (``before_round``), and the network starts only if its rounds over them, each saving what its prior says, repay
    the start. A run whose start came at round r starts the same way with room to spare, and never when the text
    ends a few tokens after r."""
    from spec_core.drafters import lookup

    starts: list[tuple[float, float, int | None]] = []

    class Recorded(lookup.HybridDrafter):
        def _catch_up(self) -> None:
            if not self.started:
                starts.append((self.forgone, self.start_ms(), self.remaining))
            super()._catch_up()

    monkeypatch.setattr(lookup, "HybridDrafter", Recorded)
    pair = make_tiny_pair(vocab=16, draft="feature")
    _fixed_costs(pair, monkeypatch, 0.2)
    generate(pair, "abcdefgabcdefg", "hybrid", 60)
    assert len(starts) == 1 and starts[0][2] is not None, starts  # the engine told it what was left
    written = 60 - starts[0][2]  # the tokens written before the start (told as what the generation may still add)
    starts.clear()
    short = generate(pair, "abcdefgabcdefg", "hybrid", written + 2)  # the same text, cut 2 tokens after the start
    assert starts == [] and all("model" not in e.draft_sources for e in short.events)
    hybrid = lookup.HybridDrafter.__new__(lookup.HybridDrafter)
    hybrid.remaining = None
    assert hybrid._repays(0.0, 1.4, 10.0)  # not told: the ski rental alone decides
    hybrid.remaining = 14
    assert hybrid._repays(1.0, 1.4, 10.0) and not hybrid._repays(1.0, 1.4, 10.1)  # 10 rounds of 1 ms each


# -- chat-template and special tokens are never copied (issue 45, item 9) ----------------------------------------

IM_START, IM_END, SYSTEM, USER, ASSISTANT, NL = 1, 2, 40, 41, 42, 10
CHATML = [IM_START, SYSTEM, NL, 20, 21, 22, IM_END, NL, IM_START, USER, NL, 30, 31, 20, 21, IM_END, NL]
GENERATION_PROMPT = [IM_START, ASSISTANT, NL]


def test_a_copy_never_proposes_a_special_token_nor_what_follows_a_template_marker():
    """A ChatML prompt: the last newline matched the one after ``<|im_end|>`` too, whose continuation is the next
    turn's ``<|im_start|>``; that occurrence is passed over, and a copy stops before ``<|im_end|>``."""
    from spec_core.drafters.lookup import LookupDrafter

    drafter = LookupDrafter(LookupParams(k=8), 64, torch.device("cpu"), frozenset({IM_START, IM_END}))
    drafter.reset([*CHATML, *GENERATION_PROMPT], None)
    drafted = drafter.propose(8, SamplingConfig(), None).tokens
    assert drafted == [30, 31, 20, 21]  # the user's text after its newline, cut before <|im_end|>
    index = NgramIndex(1, 3, frozenset({IM_START, IM_END}))
    index.extend([*CHATML, IM_START])  # a text ending in a template marker: what followed one is template
    assert index.match() is None
    plain = NgramIndex(1, 3)  # without the tokenizer's special set: <|im_start|> assistant \n, the draft
    plain.extend([*CHATML, *GENERATION_PROMPT])
    assert plain.copy(plain.match()[1], 8) == GENERATION_PROMPT


def test_lookup_on_a_pair_with_special_tokens_never_drafts_one(one_thread):
    """End to end on the tiny pair, its tokenizer declaring two special tokens that fill the prompt: no round drafts
    either, and the text is still ar's."""
    pair = make_tiny_pair(vocab=8)

    class WithSpecials(type(pair.tokenizer)):
        all_special_ids = [ord("c") % 8, ord("d") % 8]

    pair.tokenizer = WithSpecials(8)
    prompt = "abcabcabdabcab"
    ar = generate(pair, prompt, "ar", 40)
    for method in ("lookup", "lookup+fixed:4"):
        run = generate(pair, prompt, method, 40)
        drafted = {t for e in run.events for t in e.draft_tokens}
        assert drafted and not drafted & set(WithSpecials.all_special_ids), method
        assert run.token_ids == ar.token_ids


@pytest.mark.embedded
def test_the_hybrid_never_drafts_the_chat_template_on_the_embedded_pair(embedded_f32):
    """The default task's hybrid used to draft ``<|im_start|>``, ``assistant``, a newline in its first round."""
    from visuals.menus import EXAMPLES

    banned = set(embedded_f32.tokenizer.all_special_ids)
    assert {embedded_f32.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")} <= banned
    run = generate(embedded_f32, EXAMPLES[0][0], "hybrid", 24)
    drafted = [t for e in run.events for t in e.draft_tokens]
    assert drafted and not set(drafted) & banned
    pieces = embedded_f32.pieces(run.events[0].draft_tokens) if run.events[0].draft_tokens else []
    assert "assistant" not in "".join(pieces)
