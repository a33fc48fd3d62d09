"""Relaxed verifiers (docs/ALGORITHMS.md §2): ``lenient:L``, ``static:W`` and ``diversed`` (arXiv 2604.07622).

Hand-built distributions for the rule, a statistical test that ``static:W`` emits ν = W·p + (1 − W)·q and
accepts 1 − W·TV(p, q) of the time in expectation, exact equalities at the ends (``static:1`` is ``lossless``,
``static:0`` keeps every draft), and composition with every policy and with the block drafter.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.engine.loop import Generation, generate
from spec_core.engine.methods import parse_method
from spec_core.heads.ensemble import EnsembleHead
from spec_core.verifiers import make_verifier, parse_verifier
from spec_core.verifiers.lenient import LenientParams
from spec_core.verifiers.static import StaticParams

V = 6


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread beats contending for the cores


def hand_distributions():
    """p, q over 6 tokens that disagree a lot (TV(p, q) = 0.55)."""
    p = torch.tensor([0.50, 0.20, 0.10, 0.10, 0.05, 0.05])
    q = torch.tensor([0.05, 0.10, 0.60, 0.15, 0.05, 0.05])
    return p, q


def one_round(p: torch.Tensor, q: torch.Tensor, x: int, bonus: torch.Tensor | None = None) -> RoundInputs:
    """A γ = 1 round whose target logits give p (then ``bonus``) and whose draft sampled x from q."""
    bonus = p if bonus is None else bonus
    return RoundInputs(
        draft_tokens=torch.tensor([x]),
        draft_logit_rows=q.log()[None],
        sampled_probs=q[None],
        draft_hidden=torch.zeros(1, 4),
        target_logits=torch.stack([p.log(), bonus.log()]),
    )


# -- parsing -------------------------------------------------------------------------------------------------


def test_parse_values_and_options():
    assert parse_verifier("static:0.7").params == StaticParams(0.7, "argmax")
    assert parse_verifier("static:0,t0=onehot").params == StaticParams(0.0, "onehot")
    assert parse_verifier("lenient:0.5").params == LenientParams(0.5, "argmax")
    assert parse_verifier("diversed").params.head == ""  # the shipped head for the run's temperature
    assert parse_verifier("diversed:head=mine,t0=onehot").params.t0 == "onehot"
    spec = parse_method("fixed:4+static:0.7")
    assert spec.policy.text == "fixed:4" and spec.verifier.params.weight == 0.7
    spec = parse_method("block:dpace+diversed")  # parsing loads nothing: no head needed here
    assert spec.drafter.text == "block:dpace" and spec.verifier.family == "diversed"
    assert spec.verifier.params.drafter == "block:dpace"  # the build checks the head was trained on its states
    assert parse_method("fixed:4+diversed").verifier.params.drafter == "default"


@pytest.mark.parametrize(
    "text, words",
    [
        ("static", "needs its weight"),
        ("static:1.5", "[0, 1]"),
        ("static:-0.1", "[0, 1]"),
        ("static:abc", "number"),
        ("static:0.5,t0=maybe", "t0 must be"),
        ("static:0.5,w=1", "bad option"),
        ("static:0.5,t0=onehot,t0=argmax", "bad option"),
        ("lenient", "needs its leniency"),
        ("lenient:0", "(0, 1]"),
        ("lenient:1.2", "(0, 1]"),
        ("diversed:head=", "bad option"),
        ("diversed:0.5", "bad option"),
        ("diversed:t0=x", "t0 must be"),
    ],
)
def test_parse_errors(text, words):
    with pytest.raises(SpecScopeError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_verifier(text)


def test_diversed_without_a_pair_or_head_is_a_clear_error():
    with pytest.raises(SpecScopeError, match="needs the loaded model pair"):
        make_verifier("diversed", None)
    pair = make_tiny_pair()
    with pytest.raises(SpecScopeError, match="no ensemble head named 'nothing'"):
        make_verifier("diversed:head=nothing", pair)


# -- the rule on hand-built distributions -----------------------------------------------------------------------


def test_expected_acceptance_is_one_minus_w_tv():
    p, q = hand_distributions()
    tv = float(rules.total_variation(p, q))
    assert tv == pytest.approx(0.55)
    for w in (0.0, 0.3, 0.7, 1.0):
        nu = rules.ensemble(p, q, w)
        assert float(rules.expected_acceptance(nu, q)) == pytest.approx(1 - w * tv, abs=1e-6)
        assert float(rules.total_variation(nu, p)) == pytest.approx((1 - w) * tv, abs=1e-6)  # the bias
    # lenient: Σ min(q, p/ℓ)
    assert float(rules.expected_acceptance(p, q, 0.5)) == pytest.approx(float(torch.minimum(q, p / 0.5).sum()))


@pytest.mark.parametrize("w", [0.3, 0.7])
def test_static_emits_nu_and_accepts_one_minus_w_tv(w):
    """Draw x ~ q, verify against ν: the emitted token is distributed as ν; acceptance averages 1 − W·TV."""
    p, q = hand_distributions()
    nu = rules.ensemble(p, q, w)
    verifier = make_verifier(f"static:{w}")
    gen = torch.Generator().manual_seed(0)
    draws = 6000
    xs = torch.multinomial(q, draws, replacement=True, generator=gen)
    counts, accepted = torch.zeros(V), 0
    sampling = SamplingConfig(temperature=1.0)
    for x in xs.tolist():
        verdict = verifier.verify(one_round(p, q, x), sampling, gen)
        counts[x if verdict.accepted else verdict.next_token] += 1
        accepted += verdict.accepted
    emitted = counts / draws
    tv_nu = float(rules.total_variation(emitted, nu))
    tv_p = float(rules.total_variation(emitted, p))
    assert tv_nu < 0.03, tv_nu  # sampling noise at 6000 draws is about 0.011
    assert tv_p > 0.1  # and it is not the target's distribution (the test can tell them apart)
    assert accepted / draws == pytest.approx(1 - w * 0.55, abs=0.025)  # binomial sd ≈ 0.006


def test_static_acceptance_probs_are_min_one_nu_over_q():
    p, q = hand_distributions()
    verdict = make_verifier("static:0.4").verify(one_round(p, q, 2), SamplingConfig(temperature=1.0), torch.Generator())
    nu = 0.4 * p + 0.6 * q
    assert float(verdict.accept_probs[0]) == pytest.approx(min(1.0, float(nu[2] / q[2])), abs=1e-6)
    tr = verdict.trace
    assert tr["w"] == pytest.approx([0.4]) and tr["nu_x"] == pytest.approx([float(nu[2])], abs=1e-6)
    assert tr["p_x"] == pytest.approx([0.1], abs=1e-6) and tr["q_x"] == pytest.approx([0.6], abs=1e-6)
    assert tr["expected_accept"] == pytest.approx([1 - 0.4 * 0.55], abs=1e-5)


def test_lenient_acceptance_probs():
    p, q = hand_distributions()
    for leniency in (0.3, 0.5, 1.0):
        verdict = make_verifier(f"lenient:{leniency}").verify(
            one_round(p, q, 3), SamplingConfig(temperature=1.0), torch.Generator()
        )
        assert float(verdict.accept_probs[0]) == pytest.approx(min(1.0, 0.10 / (leniency * 0.15)), abs=1e-6)


def test_onehot_temperature_zero_keeps_a_mismatch_with_probability_one_minus_w():
    p, q = hand_distributions()  # argmax p = 0, the greedy draft is argmax q = 2
    verifier = make_verifier("static:0.3,t0=onehot")
    gen = torch.Generator().manual_seed(1)
    kept = [verifier.verify(one_round(p, q, 2), SamplingConfig(), gen) for _ in range(4000)]
    rate = sum(v.accepted for v in kept) / len(kept)
    assert rate == pytest.approx(0.7, abs=0.03)
    assert {v.next_token for v in kept if not v.accepted} == {0}  # the target's argmax replaces it
    assert all(v.accept_probs.tolist() == pytest.approx([0.7]) for v in kept[:3])
    # a draft equal to the target's argmax is always kept
    assert all(verifier.verify(one_round(p, q, 0), SamplingConfig(), gen).accepted for _ in range(50))


def test_argmax_temperature_zero_is_greedy_decoding_of_nu():
    p, q = hand_distributions()  # argmax ν = 0 when W·0.45 > (1 − W)·0.5 − ... : W = 0.3 → ν = [.185,.13,.45,..] → 2
    for w, keep, nxt in [(0.3, True, None), (0.7, False, 0), (1.0, False, 0), (0.0, True, None)]:
        verdict = make_verifier(f"static:{w}").verify(one_round(p, q, 2), SamplingConfig(), None)
        assert bool(verdict.accepted) is keep, w
        if nxt is not None:
            assert verdict.next_token == nxt
    bonus = torch.tensor([0.1, 0.1, 0.1, 0.6, 0.05, 0.05])
    assert make_verifier("static:0.3").verify(one_round(p, q, 2, bonus), SamplingConfig(), None).next_token == 3


def test_lenient_temperature_zero():
    p, q = hand_distributions()
    # x = 3: p = 0.10, q = 0.15 → kept when 0.10 ≥ ℓ·0.15, i.e. ℓ ≤ 2/3
    assert make_verifier("lenient:0.5").verify(one_round(p, q, 3), SamplingConfig(), None).accepted == 1
    assert make_verifier("lenient:0.7").verify(one_round(p, q, 3), SamplingConfig(), None).accepted == 0
    assert make_verifier("lenient:0.5,t0=onehot").verify(one_round(p, q, 3), SamplingConfig(), None).accepted == 0


# -- the engine on a tiny pair --------------------------------------------------------------------------------


SAMPLINGS = [
    dict(temperature=0.0),
    dict(temperature=1.0),
    dict(temperature=0.7, top_p=0.9),
    dict(temperature=1.2, top_k=4),
]


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_static_one_equals_lossless_exactly(sampling):
    pair = make_tiny_pair()
    for seed in range(3):
        for policy in ("fixed:3", "heuristic"):
            a = generate(pair, f"prompt {seed}", f"{policy}+lossless", 24, seed=seed, chat=False, **sampling)
            b = generate(pair, f"prompt {seed}", f"{policy}+static:1", 24, seed=seed, chat=False, **sampling)
            assert a.token_ids == b.token_ids
            assert [e.accepted for e in a.events] == [e.accepted for e in b.events]
            flat = lambda r: [x for e in r.events for x in e.accept_probs]  # noqa: E731
            assert flat(a) == pytest.approx(flat(b))
            assert (
                generate(pair, f"prompt {seed}", f"{policy}+lenient:1", 24, seed=seed, chat=False, **sampling).token_ids
                == a.token_ids
            )


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("verifier", ["static:0", "static:0,t0=onehot"])
def test_static_zero_keeps_every_draft(sampling, verifier):
    pair = make_tiny_pair()
    out = generate(pair, "keep everything", f"fixed:4+{verifier}", 30, seed=3, chat=False, **sampling)
    drafted = [e for e in out.events if e.draft_len]
    assert drafted and all(e.accepted == e.draft_len and e.next_kind == "bonus" for e in drafted)
    assert out.stats.acceptance_rate == 1.0


def first_token_distributions(pair, prompt: str):
    """(p_1, q_1): the target's and the draft's distributions of the first new token (temperature 1)."""
    ids = torch.tensor([Generation(pair, prompt, "ar", 1, chat=False).prompt_ids])
    with torch.no_grad():
        return torch.softmax(pair.target(ids).logits[0, -1], -1), torch.softmax(pair.draft(ids).logits[0, -1], -1)


def test_engine_static_first_token_matches_nu():
    """Through the whole engine: the first token of ``fixed:2+static:0.5`` at temperature 1 follows ν_1."""
    pair = make_tiny_pair(vocab=V, target_seed=3, draft_seed=11)
    prompt = "nu"
    p, q = first_token_distributions(pair, prompt)
    assert float(rules.total_variation(p, q)) > 0.3  # a draft that disagrees, or the test proves nothing
    nu = rules.ensemble(p, q, 0.5)
    counts = torch.zeros(V)
    draws = 1500  # sampling noise at 1500 draws over 6 tokens is about 0.02 in TV
    for seed in range(draws):
        run = Generation(pair, prompt, "fixed:2+static:0.5", 2, SamplingConfig(temperature=1.0, seed=seed), chat=False)
        for _ in run.rounds():
            pass
        counts[run.result().token_ids[0]] += 1
    emitted = counts / draws
    assert float(rules.total_variation(emitted, nu)) < 0.045
    assert float(rules.total_variation(emitted, p)) > 0.12  # ν is far from p here: the test tells them apart


@pytest.mark.parametrize(
    "method",
    [
        "fixed:4+static:0.7",
        "heuristic+static:0.3",
        "confidence:0.4+lenient:0.5",
        "fixed:2+diversed",
        "heuristic+diversed,t0=onehot",
    ],
)
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_composes_with_policies_and_traces_every_drafted_token(method, temperature):
    pair = make_tiny_pair()
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (
        EnsembleHead(32, 32),
        {},
    )  # zero-initialised: w = 0.5 everywhere
    method = method.replace("diversed,t0", "diversed:t0")
    out = generate(pair, "compose", method, 24, temperature=temperature, seed=5, chat=False)
    drafted = [e for e in out.events if e.draft_len]
    assert drafted
    for e in drafted:
        tr = e.verifier_trace
        for key in ("p_x", "q_x", "accept_prob", "expected_accept"):
            assert len(tr[key]) == e.draft_len
        assert tr["accept_prob"] == pytest.approx(list(e.accept_probs))
        if "w" in tr:
            assert all(0.0 <= w <= 1.0 for w in tr["w"]) and len(tr["nu_x"]) == e.draft_len


@pytest.mark.parametrize("sampling", SAMPLINGS[:2])
def test_diversed_with_a_constant_head_equals_static(sampling):
    """A zero-initialised head gives w = 0.5 everywhere: ``diversed`` must then be ``static:0.5`` token for token
    (which checks that the target's hidden states reach the head and that w is applied per drafted token)."""
    pair = make_tiny_pair()
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (EnsembleHead(32, 32), {})
    for seed in range(3):
        a = generate(pair, "same", "fixed:4+diversed", 24, seed=seed, chat=False, **sampling)
        b = generate(pair, "same", "fixed:4+static:0.5", 24, seed=seed, chat=False, **sampling)
        assert a.token_ids == b.token_ids
        assert all(w == pytest.approx(0.5) for e in a.events for w in e.verifier_trace.get("w", []))


def test_diversed_weights_follow_the_head():
    """A head whose weight depends on the hidden state gives per-token w that differ, matching the head."""
    pair = make_tiny_pair()
    head = EnsembleHead(32, 32)
    with torch.no_grad():
        head.linear.weight.normal_(0, 0.5)
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (head, {})
    out = generate(pair, "varied", "fixed:4+diversed", 24, temperature=1.0, seed=2, chat=False)
    ws = [w for e in out.events for w in e.verifier_trace.get("w", [])]
    assert len(set(round(w, 4) for w in ws)) > 3 and all(0 <= w <= 1 for w in ws)


def test_block_drafter_composes_with_relaxed_verifiers():
    from test_block_drafter import tiny_pair as block_pair

    pair = block_pair()
    for method in ("block:dpace+static:0.7", "block:decay+lenient:0.5"):
        for temperature in (0.0, 0.8):
            out = generate(pair, "blocks", method, 20, temperature=temperature, seed=1, chat=False)
            drafted = [e for e in out.events if e.draft_len]
            assert drafted and all(len(e.verifier_trace["accept_prob"]) == e.draft_len for e in drafted)
    greedy0 = generate(pair, "blocks", "block:dpace+static:0", 20, chat=False)
    assert all(e.accepted == e.draft_len for e in greedy0.events if e.draft_len)


def test_diversed_refuses_a_drafter_its_head_was_not_trained_on(tmp_path):
    """The ensemble head reads the drafter's hidden states: a head trained on the default draft (the shipped one,
    or any card without ``drafter``) is refused on a block drafter, and a head trained on ``block:dpace`` (by
    the trainer, ``--policy block:dpace``) runs there and is refused on the default draft and on block:decay."""
    from test_block_drafter import tiny_pair as block_pair

    from spec_core.engine.rewards import EvalItem
    from spec_core.heads.ensemble import HEADS_DIR, head_drafter
    from spec_core.train.diversed import TrainConfig, train

    assert head_drafter(json.loads((HEADS_DIR / "diversed.json").read_text())) == "default"  # the shipped head
    pair = block_pair()
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (EnsembleHead(32, 32), {})
    with pytest.raises(
        SpecScopeError,
        match="diversed on block:dpace: ensemble head 'diversed' was trained on the default draft's hidden states",
    ):
        generate(pair, "blocks", "block:dpace+diversed", 8, temperature=0.8, chat=False)
    items = [EvalItem(f"b{i}", "extraction", "train", f"block prompt {i}", "ab", 8) for i in range(2)]
    cfg = TrainConfig(policy="block:dpace", epochs=1, batch_size=2, work_dir=str(tmp_path), progress=False)
    head, card = train(pair, cfg, items, [])
    assert card["drafter"] == "block:dpace" and head_drafter(card) == "block:dpace"
    pair.extras["diversed-head:mine"] = (head, card)
    out = generate(pair, "blocks", "block:dpace+diversed:head=mine", 12, temperature=0.8, seed=1, chat=False)
    assert [w for e in out.events for w in e.verifier_trace.get("w", [])]
    default_pair = make_tiny_pair()  # one with a default draft
    default_pair.extras["diversed-head:mine"] = (head, card)
    for p, method, words in (
        (pair, "block:decay+diversed:head=mine", "diversed on block:decay"),
        (default_pair, "fixed:4+diversed:head=mine", "diversed on the default draft"),
    ):
        with pytest.raises(SpecScopeError, match=f"{words}: ensemble head 'mine' was trained on block:dpace's"):
            generate(p, "blocks", method, 8, chat=False)


def test_round_inputs_one_pass_gives_argmax_ties_and_softmax():
    """The round's lazy numbers over the target's logits (argmax, log-normaliser) agree with argmax (first index on
    ties) and with the softmax they replace, so greedy acceptance and the displayed p(x) are unchanged; the draft's
    logit rows stack to the [γ, V] matrix."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 300, generator=g)
    logits[1, 7] = logits[1, 250] = logits[1].max() + 1.0  # a tie: argmax must take the first index
    logits[3, 0] = 40.0  # a large logit (the log-normaliser is shifted by the max)
    inputs = RoundInputs(torch.tensor([7, 3, 9, 0]), torch.randn(4, 300, generator=g), None, torch.zeros(4, 2), logits)
    assert torch.equal(inputs.target_argmax, logits.argmax(-1)) and int(inputs.target_argmax[1]) == 7
    assert torch.allclose(inputs.target_logsumexp, torch.logsumexp(logits, -1), atol=1e-5)
    tokens = torch.tensor([7, 250, 3, 0])
    expected = torch.softmax(logits, -1)[torch.arange(4), tokens]
    assert torch.allclose(inputs.target_prob_at(slice(0, 4), tokens), expected, atol=1e-6)
    assert torch.allclose(inputs.target_prob_at(slice(3, 4), tokens[3:]), expected[3:], atol=1e-6)
    rows = tuple(torch.randn(300, generator=g) for _ in range(4))
    stacked = RoundInputs(torch.tensor([7, 3, 9, 0]), rows, None, torch.zeros(4, 2), logits).draft_logits
    assert stacked.shape == (4, 300) and torch.equal(stacked[2], rows[2])


def test_diversed_verifies_with_the_head_trained_under_the_runs_rule_and_band(monkeypatch):
    """``diversed`` (no head=) uses the greedy head at temperature 0 and, when sampling, the sampled head whose
    band covers the temperature; each round's trace names the head and its band; ``diversed:head=NAME`` uses
    NAME at every temperature."""
    from spec_core.heads import ensemble
    from spec_core.heads.ensemble import ShippedHead

    bands = (
        ShippedHead("diversed", "default", "argmax", 0.0, 0.0),
        ShippedHead("diversed-sampled", "default", "sampled", 0.1, 1.0),
        ShippedHead("diversed-sampled-low", "default", "sampled", 0.1, 0.4),
    )
    monkeypatch.setattr(ensemble, "diversed_heads", lambda directory=None: bands)
    pair = make_tiny_pair()
    greedy, sampled, low = (EnsembleHead(32, 32, init_w=w) for w in (0.9, 0.1, 0.3))
    pair.extras["diversed-head:diversed"] = (greedy, {})
    pair.extras["diversed-head:diversed-sampled"] = (sampled, {})
    pair.extras["diversed-head:diversed-sampled-low"] = (low, {})
    cases = (
        (0.0, "diversed", "temperature 0", 0.9),
        (0.1, "diversed-sampled-low", "temperatures 0.1–0.4", 0.3),
        (1.0, "diversed-sampled", "temperatures 0.1–1", 0.1),
    )
    for temperature, name, serves, w in cases:
        out = generate(pair, "rule", "fixed:2+diversed", 12, temperature=temperature, seed=1, chat=False)
        traces = [e.verifier_trace for e in out.events if e.draft_len]
        assert traces and all(t["head"] == name and t["w"][0] == pytest.approx(w) for t in traces), temperature
        assert all(t["head_serves"] == serves for t in traces)
    pair.extras["diversed-head:mine"] = (greedy, {})
    out = generate(pair, "rule", "fixed:2+diversed:head=mine", 12, temperature=0.8, seed=1, chat=False)
    assert all(e.verifier_trace["head"] == "mine" for e in out.events if e.draft_len)
