"""The policy playground: one recorded pass replays every policy family exactly as the engine runs it (float32,
greedy, tiny pairs), the oracle is never beaten, bad names fail clearly, and the view is built from the record."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import generate
from spec_core.heads.preverifier import PreVerifier, PreVerifierConfig
from spec_core.model.draft_networks import FeatureDraft
from spec_core.model.models import ModelPair
from spec_core.policies.pacer import HEAD_KEY, PacerParams
from spec_core.serve.playground import (
    ORACLE,
    TextRecord,
    best_fixed,
    pacer_grid,
    record_text,
    replay_all,
    replay_policy,
    standard_policies,
)

COSTS = CostProfile(widths=(1, 4, 8, 16), target_ms=(10.0, 11.0, 12.5, 16.0), draft_ms=1.0, engine_ms=0.5, head_ms=0.1)
PROMPTS = ("hello world prompt", "another one here", "abc def ghi")
N = 40


def noisy_pair(design: str, noise: float) -> ModelPair:
    """A tiny float32 pair whose draft is the target with noise (mixed acceptance), plus a random pre-verifier
    head where PACER finds it (as ``PacerLength.build`` caches a loaded one)."""
    base = make_tiny_pair(vocab=16)
    torch.manual_seed(int(noise * 1000))
    if design == "feature":
        draft = FeatureDraft(base.target, num_layers=1, init_from_target=True).eval()
        layer = draft.body.layers[0]
    else:
        draft = copy.deepcopy(base.target)
        layer = draft.model.layers[-1]
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(noise * torch.randn_like(p))
    pair = ModelPair("tiny", base.target, draft, design, base.tokenizer, torch.device("cpu"), torch.float32)
    torch.manual_seed(0)
    pair.extras[HEAD_KEY] = (PreVerifier(PreVerifierConfig(hidden_size=32)).eval(), "tiny")
    return pair


@pytest.fixture(scope="module")
def records():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out = []
    for design, noise in (("standalone", 0.1), ("feature", 0.05)):
        pair = noisy_pair(design, noise)
        for prompt in PROMPTS[:2]:
            out.append((pair, prompt, record_text(pair, prompt, max_new_tokens=N, costs=COSTS)))
    yield out
    torch.set_num_threads(before)


def rounds_of(result) -> list[tuple[int, int]]:
    return [(e.draft_len, e.accepted) for e in result.events]


def pacer_settings(record: TextRecord) -> list[str]:
    """Two PACER settings whose thresholds sit inside the random head's scores (so lengths vary)."""
    t = float(np.median(record.predicted[""][:, 0]))
    return [f"pacer:b=1,t={t:.3f},rho=1.02,max=6", f"pacer:b=2,t={t - 0.02:.3f},rho=1.05,max=7"]


@pytest.mark.parametrize("case", range(4))
def test_replay_equals_engine_runs_for_every_family(records, case):
    pair, prompt, record = records[case]
    policies = [
        "fixed:1",
        "fixed:3",
        "fixed:6",
        "heuristic",
        "confidence:0.3",
        "confidence:0.7",
        *pacer_settings(record),
    ]
    for policy in policies:
        replay = replay_policy(record, policy)
        real = generate(pair, prompt, policy, max_new_tokens=N)
        assert real.token_ids == record.tokens, policy  # lossless: the same greedy text
        assert list(zip(replay.lengths, replay.kept)) == rounds_of(real), policy
        assert replay.tau == real.stats.tau and replay.truncated == 0, policy
        assert (replay.drafted, replay.accepted) == (real.stats.drafted_tokens, real.stats.accepted_tokens)
        if policy.startswith("pacer"):
            assert len({n for n in replay.lengths[:-1]}) > 1, policy  # the rule really varied the length
            assert replay.head_calls == sum(len(e.policy_trace["blocks"]) for e in real.events)


def test_the_oracle_is_never_beaten(records):
    extra = ["fixed:2", "fixed:12", "confidence:0.9", "heuristic:2"]
    for _, _, record in records:
        replays = replay_all(record, [*standard_policies(), *pacer_settings(record), *extra])
        oracle = next(r for r in replays if r.policy == ORACLE)
        assert oracle.wasted == 0 and oracle.accepted == int(sum(record.match[list(oracle.starts)]))
        for r in replays:
            assert oracle.tau >= r.tau and oracle.ms_per_token <= r.ms_per_token + 1e-9, r.policy
        assert best_fixed(replays).policy.startswith("fixed:")
    # the records' drafts agree with a real round: the draft's first token is what fixed:1 drafted
    pair, prompt, record = records[0]
    first = generate(pair, prompt, "fixed:1", max_new_tokens=N).events[0].draft_tokens
    assert first == (int(record.draft_tokens[0, 0]),)


def test_predicted_time_follows_the_cost_model(records):
    record = records[0][2]
    rep = replay_policy(record, "fixed:3")
    widths = np.asarray(rep.lengths)
    expected = (widths * 1.0 + COSTS.target(widths + 1) + 0.5).sum()
    assert rep.ms == pytest.approx(expected) and rep.ar_ms == pytest.approx(10.5 * N)
    assert rep.predicted_speedup == pytest.approx(10.5 * N / expected)
    pacer = replay_policy(record, PacerParams(block=2, threshold=0.5, rho=1.1, max_len=6))
    assert pacer.head_calls == sum((n + 1) // 2 for n in pacer.lengths)
    grid = pacer_grid(record, [0.3, 0.6], [1.0, 1.2], block=2, max_len=6)
    assert grid.shape == (2, 2) and np.isfinite(grid).all()


def test_bad_policies_fail_clearly(records):
    record = records[0][2]
    for bad in ["nonsense", "fixed:0", "fixed:4+static:0.7", "", "pacer:max=32"]:
        with pytest.raises(SpecScopeError):
            replay_policy(record, bad)
    bare = TextRecord(
        record.prompt,
        record.prompt_ids,
        record.tokens,
        record.max_new_tokens,
        record.draft_tokens,
        record.draft_probs,
        record.match,
    )
    with pytest.raises(SpecScopeError, match="pre-verifier"):
        replay_policy(bare, "pacer")
    assert replay_policy(bare, "fixed:2").ms is None  # no costs: rounds and τ only
    from visuals.playground import playground_view

    text, *figs = playground_view(bare, "pacer", 3, 0.4, 1, 0.55, 1.1, 6)  # the rest drawn, PACER's absence said
    assert "no pre-verifier scores" in text and figs[0].data
    assert [r.policy for r in replay_all(bare, ["fixed:2", "pacer", ORACLE])] == ["fixed:2", ORACLE]


def test_record_round_trips_through_json(records, tmp_path):
    from spec_core.serve.playground import load_record, save_record

    record = records[2][2]
    save_record(record, tmp_path / "r.json")
    back = load_record(tmp_path / "r.json")
    assert back.tokens == record.tokens and back.costs == record.costs
    assert np.array_equal(back.draft_tokens, record.draft_tokens) and np.array_equal(back.match, record.match)
    for policy in ["fixed:3", "heuristic", "confidence:0.5", "pacer:b=1,t=0.55,rho=1.1,max=6", ORACLE]:
        assert replay_policy(back, policy).lengths == replay_policy(record, policy).lengths
    (tmp_path / "bad.json").write_text('{"kind": "something else"}')
    with pytest.raises(SpecScopeError, match="playground record"):
        load_record(tmp_path / "bad.json")


def test_prompt_rows_and_summary(records):
    import pandas as pd

    from spec_core.analysis.playground_table import CSV_COLUMNS, measure_runs, prompt_rows, summary

    pair, prompt, record = records[0]
    policies = ["fixed:1", "fixed:3", "heuristic", "pacer:b=1,t=0.5,rho=1.1,max=6", ORACLE]
    runs = measure_runs(pair, prompt, policies[:-1], N)
    rows = prompt_rows(record, replay_all(record, policies), {"id": "p0"}, runs)
    df = pd.DataFrame(rows).reindex(columns=CSV_COLUMNS)
    assert {"policy", "prompt_id", "tau", "drafted_tokens", "accepted_tokens", "predicted_speedup"} <= set(df)
    assert df.loc[df["policy"] != ORACLE, "engine_same_rounds"].all()
    assert df.loc[df["policy"] == ORACLE, "measured_speedup"].isna().all()
    table, best = summary(df)
    row = table.set_index("policy").loc[ORACLE]
    assert best.startswith("fixed:") and row["share_of_oracle_gain"] == pytest.approx(1.0)
    assert row["wasted"] == 0


def test_playground_view_is_built_from_the_record(records):
    from visuals.playground import playground_view

    record = records[0][2]
    text, rounds_fig, speed_fig, grid_fig = playground_view(record, "pacer", 3, 0.4, 1, 0.55, 1.1, 6)
    names = [t.name for t in rounds_fig.data]
    assert any("oracle" in n for n in names) and any("fixed:" in n for n in names)
    policy = replay_policy(record, "pacer:b=1,t=0.55,rho=1.1,max=6")
    drafted = next(t for t in rounds_fig.data if t.name.endswith("drafted"))
    assert list(drafted.x) == list(policy.starts) and list(drafted.y) == list(policy.lengths)
    assert "oracle" in list(speed_fig.data[0].y)
    heat = grid_fig.data[0]
    assert np.asarray(heat.z).shape == (len(heat.y), len(heat.x))
    assert "rounds" in text and "oracle" in text
    assert [t.x[0] for t in grid_fig.data if t.name == "shipped default"] == [0.6]  # no lane's t known
    ran = dataclasses.replace(record, meta={**record.meta, "pacer_t": 0.8})  # recorded where pacer ran at t = 0.8
    marks = {t.name: t.x[0] for t in playground_view(ran, "pacer", 3, 0.4, 1, 0.55, 1.1, 6)[3].data[1:]}
    assert marks == {"pacer's t here": 0.8, "sliders": 0.55}
    fixed = playground_view(record, "fixed", 3, 0.4, 1, 0.55, 1.1, 6)
    assert "fixed:3" in fixed[0]
    hint, *empty = playground_view(None, "fixed", 3, 0.4, 1, 0.55, 1.1, 6)
    assert "Record" in hint and all(not f.data for f in empty)


def test_no_policy_is_predicted_above_the_oracle_even_where_verifying_is_dear(records):
    """On an AVX2 CPU in bfloat16 a pass over k tokens costs almost k steps: drafting everything the target keeps
    is then not the fastest plan, and the oracle, a cost-aware plan over the record, still bounds every policy."""
    dear = CostProfile(widths=(1, 2, 4, 8, 16), target_ms=(39.2, 54.5, 89.8, 162.7, 336.5), draft_ms=3.0)
    for _, _, record in records:
        replays = replay_all(record, [*standard_policies(), *pacer_settings(record)], dear)
        oracle = next(r for r in replays if r.policy == ORACLE)
        for r in replays:
            assert r.predicted_speedup <= oracle.predicted_speedup + 1e-9, (r.policy, r.predicted_speedup)
            assert r.predicted_speedup <= r.tau + 1e-9  # never above τ
        assert oracle.wasted == 0


def test_a_record_without_costs_replays_under_this_machines_cached_table(monkeypatch, tmp_path):
    """A record that carries no costs is priced by this machine's cached table for its precision when one
    exists (never measured by the view), else by the labelled reference table."""
    from spec_core.core import precision
    from spec_core.core.cost_model import CostProfile
    from spec_core.engine import replay

    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path))
    assert replay.default_costs("int8") is replay.DEFAULT_COSTS  # nothing measured here
    mine = CostProfile(widths=(1, 2, 4), target_ms=(30.0, 33.0, 36.0), draft_ms=4.0, engine_ms=0.3, name="x")
    precision.save_table({"int8": mine})
    got = replay.default_costs("int8")
    assert got.name == "this machine" and got.target_ms == (30.0, 33.0, 36.0) and got.head_ms > 0
    assert replay.default_costs("bfloat16") is replay.DEFAULT_COSTS  # no row for it in the table


def test_a_replay_prices_each_round_and_quotes_its_spread(records):
    """Every round's predicted time is kept (they add up to the replay's), so its speedup gets a 10–90% spread
    over resampled rounds, as the Live lane's measured one does; a record without costs has neither."""
    record = records[0][2]
    for policy in ["fixed:3", *pacer_settings(record)]:
        rep = replay_policy(record, policy)
        assert sum(rep.round_tokens) == rep.tokens and len(rep.round_ms) == rep.rounds
        assert sum(rep.round_ms) == pytest.approx(rep.ms)
        low, high = rep.spread
        assert low <= rep.predicted_speedup <= high
        quote = rep.quote(COSTS.source, record.prompt)
        assert (quote.value, quote.low, quote.high, quote.tau) == (rep.predicted_speedup, low, high, rep.tau)
        assert quote.source == "table" and quote.step_ms == pytest.approx(COSTS.step_ms) and not quote.measured
    bare = replay_policy(dataclasses.replace(record, costs=None), "fixed:3")
    assert bare.spread is None and bare.quote("table") is None


def test_the_playground_sets_a_live_lanes_measured_speedup_beside_its_replay(records, tmp_path):
    """A record made from a Live run carries that run's measured speedups; the Playground's text quotes each beside
    its replay of the same method, agreeing within the spreads or with the reason, and the speed figure marks it."""
    from spec_core.core.lane_speed import lane_quote
    from spec_core.serve.playground import live_quotes, load_record, save_record
    from visuals.playground import playground_view

    pair, prompt, record = records[0]
    lanes = {m: generate(pair, prompt, m, max_new_tokens=N).events for m in ("fixed:3", "ar")}
    quotes = live_quotes(lanes, prompt)
    assert list(quotes) == ["fixed:3"] and quotes["fixed:3"] == lane_quote("fixed:3", lanes, text=prompt).to_dict()
    ran = dataclasses.replace(record, meta={**record.meta, "live_quotes": quotes})
    text, _, speed, _ = playground_view(ran, "fixed", 3, 0.4, 1, 0.55, 1.1, 6)
    said = text.split("\n\n")[-1]
    assert said.startswith("fixed:3: the Live lane measured ") and "; the Playground predicts " in said
    assert "They agree within their spreads." in said or "They disagree beyond their spreads. " in said
    marked = next(t for t in speed.data if t.name == "Live lane, measured")
    assert list(marked.y) == ["fixed:3"] and list(marked.x) == [pytest.approx(quotes["fixed:3"]["value"])]
    from test_pacer_heads import assert_value_labels_clear

    assert_value_labels_clear(speed)  # the bars' values clear of names, whiskers and the ◆ (issue 45, item 6)
    assert "Live lane" not in playground_view(record, "fixed", 3, 0.4, 1, 0.55, 1.1, 6)[0]  # no Live run: no quote
    path = tmp_path / "r.json"
    save_record(ran, path)
    assert load_record(path).meta["live_quotes"] == quotes  # a saved record keeps the run's quotes


def test_a_copying_drafts_record_replays_the_engines_rounds():
    """A feature draft with a copy gate (docs/ALGORITHMS.md §6): the record drafts as the drafter does (the pointer's
    copy mixed in by the gate, row by row), so every fixed window and confidence rule replays the engine's rounds."""
    from spec_core.drafters.copying import EVIDENCE
    from spec_core.model.draft_networks import CopyGate

    pair = noisy_pair("feature", 0.05)
    gate = CopyGate(32, len(EVIDENCE))
    with torch.no_grad():
        gate.linear.weight.normal_(0.0, 0.5)
        gate.linear.bias.fill_(0.5)
    pair.draft.copy_gate = gate
    prompt = "abcabcabd abcab"  # text that repeats itself: the pointer offers, the gate weighs
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record = record_text(pair, prompt, max_new_tokens=N, costs=COSTS)
        offered = 0
        for policy in ("fixed:1", "fixed:3", "fixed:6", "confidence:0.3"):
            real = generate(pair, prompt, policy, max_new_tokens=N)
            replay = replay_policy(record, policy)
            assert real.token_ids == record.tokens, policy
            assert list(zip(replay.lengths, replay.kept)) == rounds_of(real), policy
            offered += sum(1 for e in real.events for t, _ in e.draft_copy_offers if t >= 0)
        assert offered > 0  # the pointer really took part
    finally:
        torch.set_num_threads(before)
