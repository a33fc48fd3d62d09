"""The analyzer's per-prompt records: runs, table, summary row, downloads, events files, replays (tiny pair)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest_app import MIXED, tiny_pair

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig, Stats
from spec_core.engine.methods import parse_method
from spec_core.serve import records as rec

SAMPLING = SamplingConfig(temperature=MIXED["temperature"], seed=MIXED["seed"])
PROMPTS = [
    {"id": "a", "category": "x", "prompt": "Why is the sky blue? Explain it to a child, please."},
    {"id": "b", "category": "y", "prompt": "Say hi."},
]


@pytest.fixture(scope="module")
def records():
    runs = list(rec.run_records(tiny_pair(), PROMPTS, parse_method("fixed:4"), 10, SAMPLING))
    assert [list(r) for r in runs] == [["a"], ["a", "b"]]  # yielded after each prompt
    return runs[-1]


def test_table_rows_per_prompt(records):
    table = rec.table_rows(records)
    assert list(table.columns) == rec.TABLE_COLUMNS
    assert list(table["prompt_id"]) == ["a", "b"] and set(table["method"]) == {"fixed:4"}
    assert (table["new_tokens"] == 10).all() and (table["speedup_vs_ar"] > 0).all()
    assert table["prompt"][0].startswith("Why is the sky blue?") and len(table["prompt"][0]) <= rec.PROMPT_CHARS
    a = records["a"]
    s, base = Stats.from_events(a.lanes["fixed:4"]), Stats.from_events(a.lanes["ar"])
    assert table["speedup_vs_ar"][0] == pytest.approx(s.tokens_per_s / base.tokens_per_s)
    assert table["tau"][0] == pytest.approx(s.tau)


def test_summary_row_pools_all_prompts(records):
    summary = rec.summary_rows(records)
    assert list(summary.columns) == rec.SUMMARY_COLUMNS and list(summary["method"]) == ["fixed:4"]
    row = summary.iloc[0]
    events = [e for r in records.values() for e in r.lanes["fixed:4"]]
    pooled = Stats.from_events(events)
    assert row["prompts"] == 2 and row["new_tokens"] == 20 and row["tau"] == pytest.approx(pooled.tau)
    table = rec.table_rows(records)
    assert row["median_speedup_vs_ar"] == pytest.approx(float(table["speedup_vs_ar"].median()))
    assert row["same_as_ar"] == f"{int(table['first_divergence'].isna().sum())}/2"


def test_downloads_and_events_file_round_trip(records, tmp_path):
    table = rec.table_rows(records)
    csv_path, jsonl_path = rec.write_downloads(records, table, tmp_path)
    assert open(csv_path).readline().strip() == ",".join(rec.TABLE_COLUMNS)
    back = rec.records_from_file(jsonl_path)
    assert back.keys() == records.keys() and back["a"].prompt == PROMPTS[0]["prompt"] and back["b"].category == "y"
    assert back["a"].lanes == records["a"].lanes
    assert rec.table_rows(back).equals(table)


def test_replay_frame_and_missing_runs(records):
    frame = rec.replay_frame(records["b"])
    assert frame.methods == ("fixed:4", "ar") and frame.done and frame.stats("ar").new_tokens == 10
    assert rec.record_for(records, "b") is records["b"]
    with pytest.raises(SpecScopeError, match="no run"):
        rec.record_for(records, "zzz")
    with pytest.raises(SpecScopeError, match="run a prompt set"):
        rec.record_for(None, "a")


def test_bad_events_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(SpecScopeError, match="not a SpecScope event"):
        rec.records_from_file(bad)


def test_the_csv_keeps_whole_prompts_where_the_screen_shows_their_start(records, tmp_path):
    import dataclasses

    import pandas as pd

    long = "word " * 40 + "the end"
    records = {**records, "a": dataclasses.replace(records["a"], prompt=long)}
    table = rec.table_rows(records)
    assert table.set_index("prompt_id").loc["a", "prompt"].endswith("…")  # the screen: the first characters
    csv_path, _ = rec.write_downloads(records, table, tmp_path)
    written = pd.read_csv(csv_path, dtype={"prompt_id": str}).set_index("prompt_id")
    assert written.loc["a", "prompt"] == long


def test_a_speedup_above_tau_is_flagged_as_noise():
    assert rec.above_tau_note(1.296, 1.164) == rec.NOISE_NOTE  # code-2 in the issue: τ 1.164, speedup 1.296
    assert rec.above_tau_note(1.10, 1.164) == "" and rec.above_tau_note(None, 1.2) == ""


def test_first_divergence_is_the_1_based_new_token_and_blank_when_the_same():
    """What the CSVs and the Analyzer's table show: the lane's "parts from ar at new token N" numbering."""
    from spec_core.engine.session import divergence_token

    assert divergence_token([1, 2, 3], [1, 2, 3]) is None
    assert divergence_token([1, 2, 4], [1, 2, 3]) == 3 and divergence_token([9], [1]) == 1
    assert divergence_token([1, 2], [1, 2, 3]) == 3  # one stopped early: it parts at the first missing token


def test_drafts_kept_after_the_end_token_count_neither_as_drafted_nor_accepted():
    from test_visuals import ev

    from spec_core.core.types import Stats

    # 4 drafted, all 4 kept by the verifier, but the text ended at the 2nd (the end token): 2 of 2 count
    ended = dataclasses.replace(ev(0, ["a", "b", "c", "d"], 4, "e"), emitted=(1, 2), finished=True)
    s = Stats.from_events([ended])
    assert (s.drafted_tokens, s.accepted_tokens, s.new_tokens) == (2, 2, 2)
    whole = ev(0, ["a", "b", "c", "d"], 2, "e")  # an ordinary round: 4 drafted, 2 kept, 3 written
    assert (Stats.from_events([whole]).drafted_tokens, Stats.from_events([whole]).accepted_tokens) == (4, 2)


def test_the_lookup_view_and_the_verdict_count_the_same_kept_drafts_at_the_end_token():
    from test_visuals import ev

    from spec_core.core.types import Stats
    from visuals.lookup import sources_caption

    copied = dataclasses.replace(
        ev(0, ["a", "b", "c", "d"], 4, "e", method="lookup"), draft_sources=("lookup",) * 4, emitted=(1, 2)
    )
    assert Stats.from_events([copied]).copied_tokens == 2
    assert "2 of its 2 kept drafts were copied" in sources_caption({"lookup": [copied]})


def test_the_analyzer_tables_agree_on_tau_and_the_median_and_read_as_words(records):
    """Issue 45, item 7: the summary and the per-category table give one τ (pooled, the same computation) and one
    median speedup (taken before any rounding, rounded once), under readable headers."""
    table = rec.table_rows(records)
    summary, board = rec.shown(rec.summary_rows(records)), rec.shown(rec.board_rows(records, table))
    assert "mean accepted tokens" not in board.columns and not any("_" in c for c in [*summary, *board])
    assert board.loc[0, "τ"] == summary.loc[0, "τ"]
    assert board.loc[0, "median speedup vs ar"] == summary.loc[0, "median speedup vs ar"]
    assert not any("_" in c for c in rec.shown(table).columns) and "α" in rec.shown(table).columns
