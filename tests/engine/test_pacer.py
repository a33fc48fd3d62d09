"""PACER (arXiv 2602.01274): the stop rule on scripted predictions, parsing, training end to end on a tiny pair,
losslessness, the shipped heads, and the view's figure traces as data."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent, SamplingConfig
from spec_core.engine.loop import Generation, generate
from spec_core.engine.methods import parse_method
from spec_core.heads.preverifier import PreVerifier, PreVerifierConfig, find_head, load_head
from spec_core.policies import make_policy
from spec_core.policies.base import DraftSoFar
from spec_core.policies.pacer import HEAD_KEY, PacerLength, PacerParams, parse_params, replay_length


class ScriptedHead:
    """A stub pre-verifier: â of the token at draft position i is ``script[i − 1]``."""

    class cfg:  # noqa: N801 — mimics PreVerifierConfig's flag
        use_token_prob = False

    def __init__(self, script):
        self.script, self.calls = list(script), []

    def predict(self, hidden, positions, prob_features=None):
        self.calls.append(positions.tolist())
        return torch.tensor([self.script[int(i) - 1] for i in positions])


def drive(policy: PacerLength, budget: int = 64) -> tuple[int, list[int]]:
    """Run one round of drafting by hand: (draft length, the chunk sizes asked for)."""
    tokens, probs, hidden, chunks = [], [], [], []
    while (n := policy.next_chunk(DraftSoFar(tokens, probs, hidden, budget))) > 0:
        chunks.append(n)
        tokens += [1] * n
        probs += [0.5] * n
        hidden += [torch.zeros(4)] * n
    return len(tokens), chunks


def pacer(script, **kw) -> tuple[PacerLength, ScriptedHead]:
    head = ScriptedHead(script)
    return PacerLength(PacerParams(**kw), head, "stub"), head


# -- the stop rule ---------------------------------------------------------------------------------------------


def test_threshold_grows_by_rho_after_each_passing_block():
    policy, _ = pacer([0.6] * 16, block=2, threshold=0.5, rho=1.1, max_len=16)
    length, chunks = drive(policy)
    blocks = policy.trace()["blocks"]
    # 0.5, 0.55, 0.605 > 0.6: the third block is the first under its threshold
    assert length == 6 and chunks == [2, 2, 2] and policy.stop_reason == "threshold"
    assert [b["threshold"] for b in blocks] == pytest.approx([0.5, 0.55, 0.605])
    assert [b["decision"] for b in blocks] == ["pass", "pass", "stop"]
    assert [b["mean"] for b in blocks] == pytest.approx([0.6, 0.6, 0.6])


def test_rho_one_keeps_the_threshold_and_runs_to_max():
    policy, _ = pacer([0.6] * 16, block=2, threshold=0.5, rho=1.0, max_len=7)
    length, chunks = drive(policy)
    assert length == 7 and chunks == [2, 2, 2, 1] and policy.stop_reason == "max"
    assert [b["decision"] for b in policy.trace()["blocks"]] == ["pass", "pass", "pass", "max"]


def test_blocks_are_scored_once_at_their_boundaries_and_the_mean_decides():
    policy, head = pacer([0.9, 0.1, 0.9, 0.9, 0.2, 0.2, 0.9, 0.9], block=2, threshold=0.45, rho=1.0, max_len=8)
    length, _ = drive(policy)
    assert head.calls == [[1, 2], [3, 4], [5, 6]]  # each block once, positions 1-based in the draft
    assert length == 6 and policy.stop_reason == "threshold"  # mean(0.9, 0.1) = 0.5 passes; 0.2 stops
    assert policy.trace()["predicted"] == pytest.approx([0.9, 0.1, 0.9, 0.9, 0.2, 0.2])


def test_first_block_under_threshold_stops_after_b_tokens():
    policy, _ = pacer([0.3] * 8, block=3, threshold=0.5)
    assert drive(policy)[0] == 3 and policy.stop_reason == "threshold"


def test_budget_caps_the_draft_and_a_new_round_resets_the_threshold():
    policy, _ = pacer([1.0] * 16, block=2, threshold=0.5, rho=1.5, max_len=16)
    assert drive(policy, budget=3) == (3, [2, 1]) and policy.stop_reason == "budget"
    assert drive(policy, budget=0) == (0, []) and policy.stop_reason == "budget"
    drive(policy, budget=64)
    assert policy.trace()["blocks"][0]["threshold"] == 0.5  # reset each round
    assert policy.trace()["blocks"][0]["start"] == 0


@pytest.mark.parametrize("seed", range(20))
def test_replay_agrees_with_the_policy(seed):
    g = torch.Generator().manual_seed(seed)
    script = torch.rand(12, generator=g)
    params = PacerParams(
        block=int(torch.randint(1, 5, (1,), generator=g)),
        threshold=float(torch.rand(1, generator=g)),
        rho=1.0 + float(torch.rand(1, generator=g)) / 2,
        max_len=int(torch.randint(1, 13, (1,), generator=g)),
    )
    budget = int(torch.randint(0, 14, (1,), generator=g))
    policy = PacerLength(params, ScriptedHead(script.tolist()))
    assert replay_length(script, params, budget=budget) == drive(policy, budget)[0]


# -- parsing ------------------------------------------------------------------------------------------------------


def test_parse_defaults_subsets_and_composition():
    assert parse_params(None) == PacerParams(auto_t=True)  # no t: tuned for the machine when built
    p = parse_params("b=3,rho=1.2")
    assert (p.block, p.rho, p.threshold, p.auto_t) == (3, 1.2, PacerParams().threshold, True)
    assert parse_params("b=2,t=0.5,rho=1.1,max=16") == PacerParams(2, 0.5, 1.1, 16)  # a given t is kept
    assert parse_params("t=auto,b=2") == PacerParams(block=2, auto_t=True)
    assert parse_params("t=auto").describe() == "pacer:b=1,t=auto,rho=1.1,max=8"
    spec = parse_method("pacer+lossless")
    assert spec.policy.family == "pacer" and spec.verifier.family == "lossless"
    assert parse_method("pacer:head=nopos").policy.params.head == "nopos"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.block = 4


@pytest.mark.parametrize(
    "text",
    [
        "pacer:b=0",
        "pacer:b=x",
        "pacer:t=1.5",
        "pacer:t=-0.1",
        "pacer:t=automatic",
        "pacer:rho=0",
        "pacer:rho=9",
        "pacer:max=0",
        "pacer:max=65",
        "pacer:b=8,max=4",
        "pacer:foo=1",
        "pacer:b",
        "pacer:b=2,b=3",
        "pacer:head=../x",
    ],
)
def test_parse_errors_name_pacer(text):
    with pytest.raises(SpecScopeError, match="pacer"):
        parse_method(text)


def test_build_without_a_matching_head_says_how_to_train_one():
    pair = make_tiny_pair()
    with pytest.raises(SpecScopeError, match="train pacer"):
        make_policy("pacer", pair)
    with pytest.raises(SpecScopeError, match="pair"):
        make_policy("pacer", None)


# -- the head, training end to end on a tiny pair ------------------------------------------------------------------


def test_prob_features_match_per_round_running_sums():
    from spec_core.train.pacer import round_prob_features

    probs = torch.tensor([0.5, 0.25, 1.0, 0.1, 0.2])
    position = torch.tensor([1, 2, 1, 2, 3])
    feats = round_prob_features(probs, position)
    expect = torch.cat([PreVerifier.prob_features(probs[:2]), PreVerifier.prob_features(probs[2:])])
    assert torch.allclose(feats, expect)


def test_auc_and_calibration():
    from spec_core.heads.metrics import calibration, roc_auc

    labels = torch.tensor([0, 0, 1, 1])
    assert roc_auc(torch.tensor([0.1, 0.2, 0.3, 0.4]), labels) == 1.0
    assert roc_auc(torch.tensor([0.4, 0.3, 0.2, 0.1]), labels) == 0.0
    assert roc_auc(torch.tensor([0.5, 0.5, 0.5, 0.5]), labels) == 0.5
    ece, bins = calibration(torch.tensor([0.05, 0.05, 0.95, 0.95]), labels)
    assert ece == pytest.approx(0.05) and [b["count"] for b in bins] == [2, 2]


@pytest.fixture(scope="module")
def tiny_trained(tmp_path_factory):
    """Simulate rounds on a tiny feature pair, train a head, save it where a test can find it."""
    from spec_core.train.pacer import SimConfig, TrainConfig, load_data, simulate, train_head

    pair = make_tiny_pair(vocab=6, draft="feature")  # a small vocabulary: some drafts get accepted
    pair.draft_card = {"design": "feature", "sha256": "ab" * 32}
    work = tmp_path_factory.mktemp("pacer")
    prompts = tuple(f"prompt number {i} about tokens" for i in range(6))
    sim = SimConfig(work / "feature", num_prompts=6, shard_size=2, window=5, max_new_tokens=16, prompts=prompts)
    paths = simulate(pair, sim, progress=False)
    again = simulate(pair, sim, progress=False)  # resumable: nothing to redo
    data = load_data(paths)
    head, metrics = train_head(data, TrainConfig(steps=40, batch_size=64, heldout_every=3), progress=False)
    return pair, sim, paths, again, data, head, metrics, work


def test_simulation_labels_follow_the_verifier(tiny_trained):
    pair, sim, paths, again, data, *_ = tiny_trained
    assert len(paths) == 3 and again == paths
    gammas, accepted = data["round_gamma"].long(), data["round_accepted"].long()
    assert int(gammas.sum()) == data["label"].shape[0] and (gammas <= sim.window).all()
    # label = 1 exactly for the first `accepted` tokens of each round
    kept = torch.repeat_interleave(accepted, gammas)
    assert torch.equal(data["label"].bool(), data["position"].long() <= kept)
    assert 0 < int(data["label"].sum()) < data["label"].shape[0]
    # the engine's own verdict: rerunning prompt 0 as the simulation did accepts what the shard recorded
    from spec_core.train.pacer import prompt_sampling, sampled_shards

    sampling = prompt_sampling(sim, 0, 0, 0 in sampled_shards(sim, len(paths)))
    run = Generation(pair, sim.prompts[0], f"fixed:{sim.window}", sim.max_new_tokens, sampling)
    events = [e for e in run.rounds() if e.draft_len]
    assert [e.accepted for e in events] == data["round_accepted"][data["round_prompt"] == 0].tolist()


def test_training_end_to_end_and_the_head_drives_pacer(tiny_trained, tmp_path):
    from spec_core.heads.preverifier import head_name, save_head

    pair, sim, paths, again, data, head, metrics, work = tiny_trained
    assert 0.0 <= metrics["auc"] <= 1.0 and metrics["tokens"] > 0 and metrics["reliability"]
    save_head(head, head_name("feature"), {"draft": "feature", "draft_sha256": pair.draft_card["sha256"]}, tmp_path)
    assert find_head(pair.draft_card, directory=tmp_path) == "pacer-feature"
    with pytest.raises(SpecScopeError, match="train pacer"):
        find_head({"design": "feature", "sha256": "cd" * 32}, directory=tmp_path)
    loaded, card = load_head("pacer-feature", tmp_path)
    assert card["config"]["hidden_size"] == data["hidden"].shape[1] and card["kind"] == "pacer"
    assert (tmp_path / "pacer-feature.safetensors").stat().st_size < 1_000_000
    x = data["hidden"][:5].float()
    pos, feats = data["position"][:5].long(), data["prob_features"][:5]
    assert torch.allclose(loaded.predict(x, pos, feats), head.predict(x, pos, feats), atol=2e-2)  # bf16 weights
    # the trained head drives the engine (through pair.extras, as `build` caches it)
    pair.extras[HEAD_KEY] = (loaded, "pacer-feature")
    result = generate(pair, sim.prompts[0], "pacer:b=1,t=0.3,rho=1.2,max=5", max_new_tokens=12)
    traces = [e.policy_trace for e in result.events if e.draft_len]
    assert traces and all(
        len(t["predicted"]) == e.draft_len for t, e in zip(traces, [e for e in result.events if e.draft_len])
    )
    json.dumps(traces)  # JSON-ready


# -- losslessness -----------------------------------------------------------------------------------------------------


def _with_head(pair, script):
    pair.extras[HEAD_KEY] = (ScriptedHead(script), "stub")
    return pair


@pytest.mark.parametrize("method", ["pacer:b=1,t=0.5,rho=1.3,max=6", "pacer:b=2,t=0.2,rho=2.0+lossless"])
def test_pacer_is_lossless_greedy_float32(method):
    pair = _with_head(make_tiny_pair(vocab=16), [0.9, 0.7, 0.6, 0.5, 0.4, 0.3] + [0.2] * 10)
    ar = generate(pair, "abcdef", "ar", max_new_tokens=30)
    spec = generate(pair, "abcdef", method, max_new_tokens=30)
    assert spec.token_ids == ar.token_ids
    lengths = {e.draft_len for e in spec.events}
    assert len(lengths) > 1 or lengths == {1}  # the rule really varied the length (or stopped at b = 1)
    assert all(e.stop_reason in {"threshold", "max", "budget"} for e in spec.events if e.draft_len)


def test_pacer_sampling_matches_the_target_distribution():
    """Stopping on the draft's own state never biases the output: first two tokens ≈ the target's."""
    vocab, draws = 6, 3000
    pair = make_tiny_pair(vocab=vocab, draft="standalone", target_seed=3, draft_seed=11)

    class HiddenHead(ScriptedHead):  # stops depending on the drafted state, to couple the length to the draft
        def predict(self, hidden, positions, prob_features=None):
            return torch.sigmoid(hidden.float().sum(-1))

    pair.extras[HEAD_KEY] = (HiddenHead([]), "stub")
    prompt_ids = Generation(pair, "lossless", "ar", 2).prompt_ids
    with torch.no_grad():
        ids = torch.tensor([prompt_ids])
        p1 = torch.softmax(pair.target(ids).logits[0, -1], -1)
        seqs = torch.cat([ids.repeat(vocab, 1), torch.arange(vocab)[:, None]], dim=1)
        exact = p1[:, None] * torch.softmax(pair.target(seqs).logits[:, -1], -1)
    counts = torch.zeros(vocab, vocab)
    for seed in range(draws):
        run = Generation(
            pair, "lossless", "pacer:b=1,t=0.5,rho=1.0,max=3", 3, SamplingConfig(temperature=1.0, seed=seed)
        )
        for _ in run.rounds():
            pass
        t1, t2 = run.result().token_ids[:2]
        counts[t1, t2] += 1
    assert float(rules.total_variation((counts / draws).flatten(), exact.flatten())) < 0.06


# -- the shipped heads on the embedded pair --------------------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.parametrize("draft", ["feature", "standalone"])
def test_shipped_head_loads_matches_its_card_and_stays_lossless(draft):
    from spec_core.model.models import embedded_target_dir, load_pair

    try:
        embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    pair = dataclasses.replace(load_pair("embedded", dtype="float32", draft=draft), extras={})
    name = find_head(pair.draft_card)
    head, card = load_head(name)  # the weights' sha256 is checked against the card
    assert card["draft_sha256"] == pair.draft_card["sha256"] and card["draft"] == draft
    assert head.num_parameters() == card["parameters"] < 300_000
    assert 0.5 < card["heldout"]["auc"] <= 1.0 and card["heldout"]["reliability"]
    prompt = "Write a Python function that returns the square of a number."
    ar = generate(pair, prompt, "ar", max_new_tokens=24)
    spec = generate(pair, prompt, "pacer", max_new_tokens=24)
    assert spec.token_ids == ar.token_ids
    assert spec.stats.accepted_tokens > 0 and all(e.policy_trace["head"] == name for e in spec.events if e.draft_len)


def test_tiny_head_is_small():
    head = PreVerifier(PreVerifierConfig(hidden_size=576))
    assert head.num_parameters() < 300_000


# -- the view: figure traces as data ---------------------------------------------------------------------------------


def _event(index: int, method: str, draft_len: int, accepted: int, trace: dict) -> RoundEvent:
    return RoundEvent(
        index=index,
        method=method,
        context_len=10,
        draft_tokens=(1,) * draft_len,
        draft_pieces=("a",) * draft_len,
        draft_probs=(0.5,) * draft_len,
        target_probs=(0.5,) * draft_len,
        accept_probs=(1.0,) * draft_len,
        gold_draft_probs=(0.5,) * draft_len,
        accepted=accepted,
        next_token=2,
        next_piece="b",
        next_kind="bonus" if accepted == draft_len else "recovered",
        emitted=(1,) * accepted + (2,),
        draft_s=0.0,
        verify_s=0.0,
        policy_trace=trace,
    )


def _pacer_events() -> list[RoundEvent]:
    """Two rounds driven through the real policy with scripted predictions."""
    events = []
    for index, (script, accepted) in enumerate([([0.8, 0.6, 0.3, 0.1], 3), ([0.2, 0.1], 0)]):
        policy, _ = pacer(script + [0.0] * 8, block=2, threshold=0.5, rho=1.2, max_len=8)
        length, _ = drive(policy)
        events.append(_event(index, "pacer", length, accepted, policy.trace()))
    return events


def test_view_figures_are_built_from_policy_traces():
    from visuals import pacer as pacer_view
    from visuals.views import lanes_for, views_for

    events = _pacer_events()
    fixed = [_event(0, "fixed:3", 3, 1, {"window": 3}), _event(1, "fixed:3", 3, 3, {"window": 3})]
    lanes = {"pacer": events, "fixed:3": fixed}
    keys = [v.key for v in views_for(["pacer"])]
    assert "pacer_threshold" in keys and "pacer_predicted_vs_kept" in keys
    assert "pacer_threshold" not in [v.key for v in views_for(["fixed:4"])]
    threshold_view = next(v for v in views_for(["pacer"]) if v.key == "pacer_threshold")
    assert set(lanes_for(threshold_view, lanes)) == {"pacer", "fixed:3"}  # the fixed window is drawn beside it

    points = pacer_view.block_points(events)
    assert [(p["round"], p["block"], p["decision"], p["kept"]) for p in points] == [
        (0, 1, "pass", 2),
        (0, 2, "stop", 1),
        (1, 1, "stop", 0),
    ]
    fig = pacer_view.threshold_figure(lanes)
    line = next(t for t in fig.data if t.name == "pacer · threshold")
    assert list(line.x) == [1, 2] and list(line.y) == pytest.approx([0.5, 0.6])  # grows by rho
    stops = next(t for t in fig.data if "stopped" in t.name)
    assert list(stops.y) == pytest.approx([0.2, 0.15])

    fig = pacer_view.predicted_vs_kept_figure(lanes)
    predicted = next(t for t in fig.data if t.name == "pacer · predicted â")
    assert list(predicted.x) == [1, 2, 3, 4] and list(predicted.y) == pytest.approx([0.5, 0.35, 0.3, 0.1])
    kept = next(t for t in fig.data if t.name == "pacer · kept")
    assert list(kept.y) == pytest.approx([0.5, 0.5, 1.0, 0.0])  # round 0 kept 3 of 4; round 1 none of 2
    baseline = next(t for t in fig.data if t.name == "fixed:3 · kept")
    assert list(baseline.y) == pytest.approx([1.0, 0.5, 0.5])
    empty = pacer_view.threshold_figure({"fixed:3": fixed})
    assert not empty.data and empty.layout.annotations

    text = pacer_view.round_text(events[0])
    assert "block 1" in text and "block 2" in text and "stopped" in text and "kept 3 of 4" in text
    from visuals.views import explain

    assert "pre-verifier" in explain("pacer+lossless", 0.0)


# -- the oracle analysis: replay on hand-made rounds ------------------------------------------------------------------


def test_policy_replay_and_oracle_on_recorded_rounds():
    from spec_core.analysis.policies import RecordedRounds, policy_table, replay
    from spec_core.core.cost_model import CostProfile

    # three rounds drafted to 4: kept 0, 2 and 4 drafts; PACER's head predicts per token
    rounds = RecordedRounds(
        gamma=torch.tensor([4, 4, 4]),
        accepted=torch.tensor([0, 2, 4]),
        prompt=torch.tensor([0, 0, 1]),
        greedy=torch.tensor([True, True, True]),
        predicted={"": torch.tensor([0.2, 0.1, 0.1, 0.1, 0.9, 0.8, 0.2, 0.1, 0.9, 0.9, 0.9, 0.9])},
    )
    costs = CostProfile(widths=(1, 5), target_ms=(10.0, 14.0), draft_ms=1.0, engine_ms=0.0, head_ms=0.0)
    fixed2 = replay(rounds, torch.full((3,), 2), costs)
    # tokens: min(a, 2) + 1 = 1, 3, 3; time: 2 steps + target over 3 tokens (12 ms) per round
    assert fixed2["tokens_per_round"] == pytest.approx(7 / 3) and fixed2["ms_per_token"] == pytest.approx(42 / 7)
    table = policy_table(rounds, costs, {"pacer": PacerParams(block=1, threshold=0.5, rho=1.0, max_len=4)}).set_index(
        "policy"
    )
    # the oracle drafts 0, 2, 4: tokens 1 + 3 + 5 = 9 for 10 + (2 + 12) + (4 + 14) = 42 ms
    assert table.loc["oracle", "ms_per_token"] == pytest.approx(42 / 9)
    assert table.loc["oracle", "speedup_vs_ar"] == pytest.approx(10 / (42 / 9))
    # PACER (b = 1, t = 0.5): stops after 1, 3 and 4 tokens → tokens 1 + 3 + 5
    assert table.loc["pacer", "drafted_per_round"] == pytest.approx(8 / 3)
    best = table.loc[[f"fixed:{k}" for k in (1, 2, 3, 4)], "speedup_vs_ar"].max()
    assert table.loc["oracle", "vs_best_fixed"] == pytest.approx(table.loc["oracle", "speedup_vs_ar"] / best)
    assert table.loc["oracle", "share_of_oracle_gain"] == pytest.approx(1.0)
