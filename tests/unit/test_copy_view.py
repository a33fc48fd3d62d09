"""The copying draft's view and hovers: which kept drafts its pointer supplied, how far its gate opened, and the
sentence a token's hover adds. Scripted rounds only (no model)."""

from __future__ import annotations

from test_visuals import ev

from ui.shared import N_VIEW_SLOTS
from visuals import copying, views
from visuals.menus import PRESETS
from visuals.tokens import token_spans

# draft_tokens are 0..n−1: an offer of token i at position i is the drafted token itself (the copy won)
ROUNDS = [
    ev(0, [" a", " b", " c"], 2, method="fixed:3", draft_copy_offers=((0, 0.9), (1, 0.8), (-1, 0.0))),
    ev(1, [" d", " e"], 1, method="fixed:3", draft_copy_offers=((7, 0.1), (1, 0.7))),  # first: the draft's own
    ev(2, [" f"], 0, method="fixed:3"),  # a round without offers
]


def test_kept_drafts_split_into_the_pointers_copies_and_the_networks_own():
    assert [copying.kept_split(e) for e in ROUNDS] == [(2, 0), (0, 1), (0, 0)]
    assert copying.copied_flags(ROUNDS[1]) == [False, True]


def test_the_figure_and_caption_count_what_the_rounds_say():
    lanes = {"fixed:3": ROUNDS, "lookup": [ev(0, [" x"], 1, method="lookup", draft_sources=("lookup",))]}
    fig = copying.pointer_figure(lanes)
    names = [t.name for t in fig.data]
    assert "fixed:3 · pointer's copy, kept" in names and "fixed:3 · network's own, kept" in names
    assert not any(n.startswith("lookup") for n in names)  # a lookup lane has no pointer: not drawn here
    gates = next(t for t in fig.data if t.name == "fixed:3 · mean gate g of the offers")
    assert list(gates.x) == [0, 1] and [round(y, 3) for y in gates.y] == [0.85, 0.4]
    caption = copying.pointer_caption(lanes)
    assert "2 of its 3 kept drafts were the pointer's copies" in caption
    assert "offered a token at 4 of 6 drafted positions and the gate made it the draft at 3" in caption
    assert "No lane" in copying.pointer_caption({"lookup": lanes["lookup"]})


def test_a_tokens_hover_says_whether_the_pointer_supplied_it():
    spans = token_spans(ROUNDS[:2])
    first = spans[0]
    assert any("copied: the draft's pointer offered this token" in n and "0.900" in n for n in first.notes)
    own = next(s for s in spans if s.round == 1 and s.position == 1)
    assert any("offered another token (gate g = 0.100)" in n for n in own.notes)
    assert not any("pointer" in n for s in token_spans(ROUNDS[2:]) for n in s.notes)


def test_every_task_keeps_its_views_within_the_slots_the_copy_view_among_them():
    for preset in PRESETS:
        keys = [v.key for v in views.views_for(list(preset.methods))]
        assert len(keys) <= N_VIEW_SLOTS and "copy_pointer" in keys, (preset.task, keys)


def test_the_copy_view_takes_a_slot_only_when_a_lane_copies():
    plain = {"fixed:3": [ev(0, [" a"], 1, method="fixed:3")]}
    assert "copy_pointer" not in [v.key for v in views.views_with_data(plain)]
    assert "copy_pointer" in [v.key for v in views.views_with_data({"fixed:3": ROUNDS})]
