"""Prompt lookup replayed on a recorded text: the engine's own rounds, and the oracle above every length."""

from __future__ import annotations

import pytest
from conftest import make_tiny_pair

from spec_core.core.cost_model import CostProfile
from spec_core.engine.lookup_replay import copies, copy_replays, replay_cost, replay_window
from spec_core.engine.loop import generate

CPU_LIKE = CostProfile(widths=(1, 2, 4, 8, 16), target_ms=(50, 54, 60, 86, 129), draft_ms=3.0)


def test_copies_are_what_the_index_offers_and_what_the_answer_bears_out():
    at = copies([1, 2, 3, 4, 5], [1, 2, 3, 9, 1, 2])
    assert at[0].n == 0 and at[0].tokens == ()  # the text ends in 5, seen nowhere before
    assert at[1].n == 1 and at[1].tokens == (2, 3, 4, 5, 1) and at[1].match == 2  # the answer goes on 2 3 9
    assert at[2].n == 2 and at[2].match == 1
    assert at[3].n == 3 and at[3].match == 0  # 1 2 3 was followed by 4; the answer says 9
    assert at[4].n == 0  # after 9: nothing to copy


@pytest.mark.parametrize("method,k", [("lookup+fixed:3", 3), ("lookup", None)])
def test_the_replay_is_the_engines_own_rounds(method, k, one_thread):
    pair = make_tiny_pair(vocab=8)
    run = generate(pair, "abcabcabdabcab", method, 40)
    prompt_ids, answer = run.prompt_ids, run.token_ids
    profile = CostProfile.from_dict(run.events[0].costs)  # the prices the run recorded: the replay reuses them
    at = copies(prompt_ids, answer)
    replay = replay_window(at, profile, k, limit=40) if k else replay_cost(at, profile, limit=40)
    assert list(replay.lengths) == [e.draft_len for e in run.events]
    assert list(replay.kept) == [e.accepted for e in run.events]


def test_the_replay_keeps_the_engines_rounds_where_the_tokenizer_has_special_tokens(one_thread):
    """The copy never proposes a special token (issue 45, item 9); the replay, told the same set, matches the
    engine still, and a record carries the set (``meta["special_ids"]``) for the Playground's lookup view."""
    from spec_core.drafters.lookup import special_ids

    pair = make_tiny_pair(vocab=8)

    class WithSpecials(type(pair.tokenizer)):
        all_special_ids = [ord("c") % 8]

    pair.tokenizer = WithSpecials(8)
    run = generate(pair, "abcabcabdabcab", "lookup+fixed:3", 40)
    banned = special_ids(pair.tokenizer)
    at = copies(run.prompt_ids, run.token_ids, banned=banned)
    assert not any(set(c.tokens) & banned for c in at)
    replay = replay_window(at, CostProfile.from_dict(run.events[0].costs), 3, limit=40)
    assert list(replay.lengths) == [e.draft_len for e in run.events]
    assert list(replay.kept) == [e.accepted for e in run.events]
    assert list(copies(run.prompt_ids, run.token_ids)) != at  # without the set the replay would copy them


def test_the_oracle_is_never_beaten_and_the_cost_policy_beats_long_fixed_copies():
    prompt = list(range(40)) * 2
    answer = list(range(40)) + [99, 98] + list(range(20))
    rows = {r.policy: r for r in copy_replays(prompt, answer, CPU_LIKE)}
    assert all(rows["oracle"].speedup >= r.speedup - 1e-9 for r in rows.values())
    assert rows["lookup (cost)"].speedup > rows["k=1"].speedup
    assert all(r.tokens == len(answer) for r in rows.values())


def test_the_playground_view_draws_every_length_and_says_it_in_numbers():
    import numpy as np

    from spec_core.engine.replay import TextRecord
    from visuals.lookup import copy_view

    prompt = list(range(30)) * 2
    answer = list(range(30)) + [77] + list(range(10))
    n = len(answer)
    record = TextRecord(
        "p",
        tuple(prompt),
        tuple(answer),
        64,
        np.zeros((n, 4), np.int64),
        np.zeros((n, 4), np.float32),
        np.zeros(n, np.int64),
        costs=CPU_LIKE,
    )
    fig, text = copy_view(record)
    assert [*fig.data[0].x] == ["k=1", "k=2", "k=3", "k=4", "k=6", "k=8", "k=10", "lookup (cost)", "oracle"]
    assert "lookup` as it runs is predicted" in text and "oracle" in text and "k=10" in text
    assert [t.name for t in fig.data][1] == "GPU-like (a model)" and "accelerator model" in text
    assert max(fig.data[1].y[:7]) >= max(fig.data[0].y[:7])  # wide passes cost nothing there: copies pay more
    empty_fig, intro = copy_view(None)
    assert "Prompt lookup" in intro and not empty_fig.data


def test_the_live_view_stacks_kept_drafts_by_source_and_says_so(one_thread):
    from visuals import views
    from visuals.lookup import sources_caption, sources_figure

    pair = make_tiny_pair(vocab=16, draft="feature")
    lanes = {m: generate(pair, "abcdefgabcdefg", m, 40).events for m in ("hybrid", "fixed:2", "ar")}
    assert "lookup_sources" in [v.key for v in views.views_for(["hybrid"])]
    assert "lookup_sources" not in [v.key for v in views.views_for(["fixed:2", "ar"])]
    fig = sources_figure({m: lanes[m] for m in ("hybrid", "fixed:2")})
    names = [t.name for t in fig.data]
    assert "hybrid · copied, kept" in names and "hybrid · kept drafts the costs planned for" in names
    assert "fixed:2 · drafted" in names
    copied = sum(e.draft_sources[: e.accepted].count("lookup") for e in lanes["hybrid"])
    kept = sum(e.accepted for e in lanes["hybrid"])
    text = sources_caption({"hybrid": lanes["hybrid"]})
    assert f"{copied} of its {kept} kept drafts were copied" in text and "planned for" in text


def test_analyze_lookup_refuses_bad_settings_and_tables_by_category(capsys):
    import pandas as pd

    from spec_core.analysis import lookup

    assert lookup.main(["--per-category", "0"]) == 2
    assert "error:" in capsys.readouterr().out
    df = pd.DataFrame(
        {
            "prompt_id": ["1", "1", "2", "2"],
            "category": ["rag", "rag", "qa", "qa"],
            "policy": ["k=3", "oracle", "k=3", "oracle"],
            "speedup_vs_ar": [1.2, 1.5, 1.0, 1.1],
        }
    )
    t = lookup.table(df)
    assert list(t.columns) == ["overall", "qa", "rag"] and t.loc["oracle", "rag"] == 1.5


@pytest.mark.parametrize("prompt", ["abcabcabdabcab", "hello there"])
def test_network_runs_are_what_the_engines_network_rounds_keep(prompt, one_thread):
    """At each position where the engine's ``fixed:4`` starts a round, it keeps min(run, 4) drafts: the replay's
    network sees the features and text the engine's drafter sees."""
    from spec_core.engine.hybrid_replay import network_runs

    pair = make_tiny_pair(vocab=8, draft="feature")
    run = generate(pair, prompt, "fixed:4", 40)
    runs = network_runs(pair, run.prompt_ids, run.token_ids, depth=4)
    assert len(runs) == len(run.token_ids)
    pos = 0
    for e in run.events:
        if e.draft_len == 4:  # the budget cuts the last rounds short
            assert e.accepted == min(runs[pos], 4), pos
        pos += e.accepted + 1
    assert pos == len(run.token_ids) and any(runs)


def test_network_chains_are_the_engines_drafts_with_their_q(one_thread):
    """Where the engine's ``fixed:4`` starts a full round, the replay's chain is its four drafts and their q (the
    per-round forecast a choice rule reads), and its run over the answer is :func:`network_runs`'."""
    from spec_core.engine.hybrid_replay import network_chains, network_runs
    from spec_core.engine.lookup_replay import run_length

    pair = make_tiny_pair(vocab=8, draft="feature")
    run = generate(pair, "abcabcabdabcab", "fixed:4", 40)
    chains = network_chains(pair, run.prompt_ids, run.token_ids, depth=4)
    answer = list(run.token_ids)
    assert [run_length(c, answer[i:]) for i, (c, _) in enumerate(chains)] == network_runs(pair, run.prompt_ids, answer)
    pos, checked = 0, 0
    for e in run.events:
        if e.draft_len == 4:
            tokens, q = chains[pos]
            assert tokens == tuple(e.draft_tokens) and q == pytest.approx(e.draft_probs, abs=1e-5), pos
            checked += 1
        pos += e.accepted + 1
    assert checked >= 3 and run_length((1, 2, 3), [1, 2]) == 2 and run_length((1, 2), [1, 5, 2]) == 1


def test_the_hybrid_oracle_is_at_least_either_sources_oracle_and_equals_the_copys_without_a_network():
    from spec_core.engine.lookup_replay import replay_oracle, replay_oracle_sources

    prompt = list(range(30)) * 2
    answer = list(range(30)) + [99, 98, 97, 96] + list(range(10))
    at = copies(prompt, answer)
    runs = [2 if 30 <= i < 34 else 0 for i in range(len(answer))]  # the network knows the new words, no others
    copy = replay_oracle(at, CPU_LIKE)
    assert replay_oracle_sources(at, None, CPU_LIKE).ms == pytest.approx(copy.ms)
    assert replay_oracle_sources(at, [0] * len(answer), CPU_LIKE).ms == pytest.approx(copy.ms)
    network = replay_oracle_sources(at, runs, CPU_LIKE, copy=False)
    hybrid = replay_oracle_sources(at, runs, CPU_LIKE)
    assert hybrid.ms < copy.ms and hybrid.ms < network.ms  # each source serves a stretch the other cannot
    assert hybrid.tokens == sum(k + 1 for k in hybrid.kept) == len(answer)
    assert (hybrid.policy, network.policy) == ("oracle (hybrid)", "oracle (network)")
