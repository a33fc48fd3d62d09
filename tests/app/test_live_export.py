"""A Live run taken away (spec_core/serve/live_export.py, ui/live_export.py): the token table built from
scripted rounds, and a real Live run on the tiny pair whose files download, whose CSV names each rejection's cause
beside both models' top-5, and whose events file the Analyzer tab loads back."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pandas as pd
import pytest
from conftest_app import MIXED, tiny_loader
from test_visuals import AR, ev

import app
from spec_core.core.types import Rejection
from spec_core.serve import live, requests
from spec_core.serve import live_export as lx
from spec_core.serve import records as rec
from spec_core.serve.rejections import CAUSES
from ui import analyzer
from ui.live_export import export_outputs
from visuals.rejections import why_rejected_figure

PROMPT = "Why is the sky blue?"


def rejected_at(position, draft_piece, target_pieces, target_probs):
    """A rejection record whose target top-5 is ``target_pieces`` (ids 50..54) and the draft's its own token."""
    n = len(target_pieces)
    return Rejection(
        position, tuple(range(50, 50 + n)), target_pieces, target_probs, (position,), (draft_piece,), (0.5,), 0.02
    )


TOP5 = (0.40, 0.35, 0.1, 0.05, 0.01)
SPLIT = rejected_at(1, " Ray", (" Rayleigh", " light", " x", " y", " z"), TOP5)  # " Ray" + "leigh" = " Rayleigh"
OTHER = rejected_at(0, " x", (" scattering", " y", " q", " r", " s"), TOP5)  # " x" is nowhere near
LANE = [
    ev(0, [" The", " Ray", "leigh"], 1, " Rayleigh", rejection=SPLIT),  # 1 accepted, rejected, discarded, recovered
    ev(1, [" because", " of"], 2, " light"),  # all accepted + bonus
    ev(2, [" x", " y", " z"], 0, " scattering", rejection=OTHER),
]


def test_the_token_table_has_a_row_per_drafted_and_emitted_token():
    table = lx.token_table({"fixed:4": LANE, "ar": AR})
    assert list(table.columns) == lx.TOKEN_COLUMNS
    assert len(table) == sum(e.draft_len + 1 for e in LANE) + len(AR)
    first = table[(table["lane"] == "fixed:4") & (table["round"] == 1)]
    assert list(first["kind"]) == ["accepted", "rejected", "discarded", "recovered"]
    assert list(first["position"]) == [1, 2, 3, 2]  # the recovered token takes the rejected draft's place
    assert list(first["piece"]) == [" The", " Ray", "leigh", " Rayleigh"]
    assert list(first["emitted"]) == [True, False, False, True]
    assert list(first["source"]) == ["model"] * 3 + ["target"]
    bonus = table[(table["round"] == 2) & (table["lane"] == "fixed:4")]
    assert list(bonus["kind"]) == ["accepted", "accepted", "bonus"] and list(bonus["position"]) == [1, 2, 3]
    assert set(table.loc[table["lane"] == "ar", "kind"]) == {"target"}


def test_a_rejected_row_carries_both_top_5_and_its_cause():
    table = lx.token_table({"fixed:4": LANE})
    rejected = lx.rejections(table)
    assert list(rejected["rejection_cause"]) == ["tokenization split", "real disagreement"]
    row = rejected.iloc[0]
    assert row["target_top1_piece"] == " Rayleigh" and row["target_top1_id"] == 50 and row["target_top5_p"] == 0.01
    assert row["draft_top1_piece"] == " Ray" and row["draft_top1_p"] == 0.5 and pd.isna(row["draft_top2_id"])
    assert row["q_target_token"] == 0.02 and row["target_gap"] == pytest.approx(0.05)
    others = table[table["kind"] != "rejected"]
    assert others[["rejection_cause", "target_top1_id", "q_target_token"]].isna().all().all()  # only at rejections
    assert str(table["target_top1_id"].dtype) == "Int64"  # written as 50, not 50.0


def test_cause_counts_name_every_cause_and_feed_the_figure():
    counts = lx.cause_counts(lx.token_table({"fixed:4": LANE, "ar": AR}))
    assert list(counts["lane"]) == ["fixed:4"] * 3 and tuple(counts["rejection_cause"]) == CAUSES
    assert dict(zip(counts["rejection_cause"], counts["count"])) == {
        "tokenization split": 1,
        "near-tie": 0,
        "real disagreement": 1,
    }
    assert counts["examples"][0] == ["' Ray' → ' Rayleigh' (p 0.25 vs 0.40)"]
    fig = why_rejected_figure(counts)
    assert [list(t.y) for t in fig.data] == [[1, 0, 1]] and "Ray" in fig.data[0].customdata[0]
    assert why_rejected_figure(counts.iloc[:0]).layout.annotations[0].text == "no rejected draft in this run"
    kept = lx.cause_counts(lx.token_table({"fixed:4": LANE[1:2]}))  # it drafted, and every draft was kept
    assert list(kept["count"]) == [0, 0, 0]


# -- a Live run on the tiny pair ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frame():
    request = requests.parse_live_request(
        PROMPT, ["fixed:4", "ar"], MIXED["temperature"], 1.0, MIXED["seed"], 24, "embedded", "bfloat16", ["embedded"]
    )
    last = list(live.live_frames(tiny_loader, request))[-1]
    assert last.done and not last.errors
    return last


def test_a_live_run_downloads_and_reloads_in_the_analyzer(frame):
    rounds, tokens, why = export_outputs(frame, PROMPT)
    assert rounds["visible"] and tokens["visible"] and why["visible"]
    assert Path(rounds["value"]).is_file() and Path(tokens["value"]).is_file()
    table = pd.read_csv(tokens["value"])
    assert {"rejection_cause", "q_target_token", "target_top5_id", "draft_top1_piece", "q", "p"} <= set(table.columns)
    rejected = table[table["kind"] == "rejected"]
    assert len(rejected) and set(rejected["rejection_cause"]) <= set(CAUSES)
    assert rejected["target_top1_id"].notna().all() and rejected["draft_top1_p"].notna().all()
    assert len(table) == sum(e.draft_len + 1 for events in frame.lanes.values() for e in events)
    # the rounds file is the Analyzer's events file: its per-method table comes back from it
    records, note = analyzer.load_events(rounds["value"])
    assert note.startswith("Loaded 1 prompts") and records["live"].prompt == PROMPT
    assert {m: len(ev) for m, ev in records["live"].lanes.items()} == {m: len(ev) for m, ev in frame.lanes.items()}
    assert list(rec.table_rows(records)["method"]) == ["fixed:4"]
    assert records["live"].lanes["fixed:4"] == frame.lanes["fixed:4"]  # every field, the rejections included


def test_the_export_is_wired_after_a_run():
    demo = app.build_demo(tiny_loader)
    wired = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "export_outputs"]
    assert len(wired) == 1
    assert [type(c) for c in wired[0].outputs] == [gr.DownloadButton, gr.DownloadButton, gr.Plot]
    assert export_outputs(None, PROMPT) == [gr.update(value=None, visible=False)] * 3  # nothing run yet
