"""Figures and token HTML asserted as data, from scripted events (no model)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from spec_core.core import rules
from spec_core.core.lane_speed import TOO_FEW, LaneSpeed
from spec_core.core.types import RoundEvent, Stats
from spec_core.engine.session import event_from_record, event_record, interleave, speedup
from spec_core.serve.live import Divergence, LiveFrame
from spec_core.serve.prompts import load_prompts as read_prompts
from visuals import glossary, lens, live_page, plots, stepthrough, tokens, views
from visuals.style import OKABE_ITO, TOKEN_STYLE, token_css


def ev(index, drafts, accepted, next_piece="N", kind=None, method="fixed:4", cut=None, gold=None, **kw):
    """A scripted round: drafts are pieces; token ids are their positions; p, q, accept probs are fixed."""
    n = len(drafts)
    kind = kind or ("target" if n == 0 else "bonus" if accepted == n else "recovered")
    emitted = tuple(range(accepted + 1))[:cut] if cut is not None else tuple(range(accepted + 1))
    return RoundEvent(
        index=index,
        method=method,
        context_len=10 + index,
        draft_tokens=tuple(range(n)),
        draft_pieces=tuple(drafts),
        draft_probs=tuple(0.5 for _ in drafts),
        target_probs=tuple(0.25 for _ in drafts),
        accept_probs=tuple(0.5 for _ in drafts),
        gold_draft_probs=tuple(gold or [0.9 - 0.1 * i for i in range(n)]),
        accepted=accepted,
        next_token=99,
        next_piece=next_piece,
        next_kind=kind,
        emitted=emitted,
        draft_s=0.01,
        verify_s=0.02,
        **kw,
    )


LANE = [
    ev(0, ["The", " sky", " is", " red"], 3, " blue"),  # 3 accepted, 1 rejected, recovered
    ev(1, [" because", " of"], 2, " light"),  # all accepted + bonus
    ev(2, [" x", " y", " z", " w"], 0, " scattering"),  # nothing accepted
]
AR = [ev(i, [], 0, f" t{i}", method="ar") for i in range(5)]


def test_token_spans_follow_the_events():
    spans = tokens.token_spans(LANE)
    assert [(s.text, s.kind, s.round) for s in spans] == [
        ("The", "accepted", 0),
        (" sky", "accepted", 0),
        (" is", "accepted", 0),
        (" red", "rejected", 0),
        (" blue", "recovered", 0),
        (" because", "accepted", 1),
        (" of", "accepted", 1),
        (" light", "bonus", 1),
        (" x", "rejected", 2),
        (" y", "rejected", 2),
        (" z", "rejected", 2),
        (" w", "rejected", 2),
        (" scattering", "recovered", 2),
    ]
    assert tokens.emitted_text(LANE) == "The sky is blue because of light scattering"
    first = spans[0]
    assert (first.p, first.q, first.accept_prob, first.position) == (0.25, 0.5, 0.5, 1)
    assert spans[4].p is None  # the target's own token: no draft numbers


def test_token_spans_cut_at_eos_show_only_emitted():
    cut = ev(0, ["a", "b", "c"], 3, "<eos>", cut=2)  # only "a", "b" made it before the limit
    assert [(s.text, s.kind) for s in tokens.token_spans([cut])] == [("a", "accepted"), ("b", "accepted")]
    partly = ev(0, ["a", "b", "c"], 1, "R", cut=2)
    assert [s.kind for s in tokens.token_spans([partly])] == ["accepted", "rejected", "rejected", "recovered"]


def test_plain_decoding_tokens_are_target_kind():
    assert {s.kind for s in tokens.token_spans(AR)} == {"target"}


def test_tokens_html_kinds_and_hover():
    html = tokens.tokens_html(LANE, show_rejected=True)
    assert html.count('data-kind="accepted"') == 5
    assert html.count('data-kind="rejected"') == 5
    assert html.count('data-kind="recovered"') == 2 and html.count('data-kind="bonus"') == 1
    assert "accepted draft · round 0, position 1" in html
    assert "p(x) = 0.250 (target) · q(x) = 0.500 (draft)" in html and "acceptance probability = 0.500" in html
    assert html.count('<span class="tip" role="tooltip">') == 13 and html.count('tabindex="-1"') == 13
    assert "title=" not in html  # a styled tooltip element, not the browser's native one
    assert "·red" in html  # a rejected piece's space is made visible
    hidden = tokens.tokens_html(LANE)  # rejected drafts are off by default: the text reads as text
    assert 'data-kind="rejected"' not in hidden and hidden.count('class="tok ') == 8
    assert "spec-empty" in tokens.tokens_html([], placeholder="waiting")
    assert "style=" not in html  # colours come from the style sheet, not from every token


def test_hover_probabilities_never_read_as_zero():
    assert [tokens.prob_text(x) for x in (0.25, 1.0, 0.0, 0.0004, 3.2e-7)] == [
        "0.250",
        "1.000",
        "0.000",
        "4.0e-04",
        "3.2e-07",
    ]


def test_token_css_gives_each_kind_its_palette_colour():
    css = token_css()
    for kind, (colour, _, underline) in TOKEN_STYLE.items():
        rule = next(line for line in css.splitlines() if line.startswith(f".tok-{kind} "))
        r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert f"rgba({r}, {g}, {b}," in rule, kind
        assert ("line-through" in rule) == (kind == "rejected") and (underline in rule or kind == "rejected")
    assert TOKEN_STYLE["rejected"][0] == OKABE_ITO["vermillion"] and TOKEN_STYLE["recovered"][0] == OKABE_ITO["purple"]


def test_drafts_after_the_first_rejection_are_discarded_not_rejected():
    e = ev(0, ["a", "b", "c", "d"], 1, "R")  # a accepted, b rejected, c and d discarded
    spans = tokens.token_spans([e])
    assert [s.discarded for s in spans] == [False, False, True, True, False]
    html = tokens.tokens_html([e], show_rejected=True)
    assert html.count("discarded draft") == 2 and html.count("first rejection)") == 1
    assert html.count("acceptance probability") == 2  # a and b only: later ones were never used
    card = stepthrough.round_step_html(e, "accept")
    assert card.count("discarded (after the first rejection)") == 2 and "not checked" not in card
    assert card.count("<td>–</td>") == 2  # their acceptance probability is not shown as if it mattered


def test_special_tokens_show_as_an_end_marker():
    html = tokens.tokens_html([ev(0, [], 0, "<|im_end|>", method="ar")])
    shown = html.split('class="tok-text">', 1)[1].split("</span>")[0]
    assert "<|im_end|>" not in html and shown == "⏎ end"
    assert "⏎ end" in html and "tok-special" in html and "end of text" in html
    assert not tokens.is_special("<b>") and tokens.is_special("</s>")


def test_divergence_marks_the_token_with_the_note():
    html = tokens.tokens_html(AR, marks={2: "the target's two best tokens here"})
    assert html.count('data-diverge="1"') == 1 and "tok-diverge" in html
    marked = html.split('data-diverge="1"')[1].split('data-kind="target"')[0]
    assert "two best tokens" in marked and "round 2" in marked and "tip-note" in marked


def test_html_escapes_pieces():
    html = tokens.tokens_html([ev(0, ["<b>"], 1, "&\n")])
    assert "&lt;b&gt;" in html and "<b>" not in html.replace("<b>Rule", "")
    assert "&amp;↵\n" in html


def test_legend_has_every_kind_and_the_divergence_marker():
    html = tokens.legend_html()
    for kind, (_, label, _) in TOKEN_STYLE.items():
        assert f'data-kind="{kind}"' in html and f"tok-{kind}" in html and label.split(" (")[0] in html
    assert "tok-diverge" in html


def test_stats_and_speedup():
    s = Stats.from_events(LANE)
    assert s.method == "fixed:4" and s.new_tokens == 4 + 3 + 1 and s.target_forwards == 3 and s.drafted_tokens == 10
    assert s.accepted_tokens == 5 and math.isclose(s.acceptance_rate, 0.5) and math.isclose(s.tau, 8 / 3)
    assert math.isclose(s.busy_s, 0.09) and math.isclose(s.tokens_per_s, 8 / 0.09) and s.wall_s == s.busy_s
    assert Stats.from_events(LANE, new_tokens=5, wall_s=2.0).wall_s == 2.0
    base = Stats.from_events(AR)
    assert math.isclose(speedup(s, base), (8 / 0.09) / (5 / 0.15))
    assert speedup(s, None) is None
    assert {"new_tokens", "tau", "tokens_per_s"} <= set(s.as_dict())


def test_counters_show_measured_and_predicted_or_say_why_not():
    s = Stats.from_events(LANE)
    html = tokens.counters_html(s, LaneSpeed(88.9, 1.234, 1.3))
    assert "1.23×" in html and "1.30×" in html and "0.50" in html and "2.67" in html and "88.9" in html
    assert 'data-speedup="1.2340"' in html and 'data-predicted="1.3000"' in html
    spread = tokens.counters_html(s, LaneSpeed(88.9, 1.234, 1.3, spread=(1.101, 1.352)))  # the spread the views quote
    assert "measured (10–90%: 1.10–1.35)" in spread and 'data-spread-low="1.1010" data-spread-high="1.3520"' in spread
    running = tokens.counters_html(s, LaneSpeed(None, None, None, TOO_FEW))  # the scripted lane is unfinished
    assert TOO_FEW not in running and running.count("spec-counter-quiet") == 3  # quiet placeholders, no shouting
    done = dataclasses.replace(s, finished=True)
    short = tokens.counters_html(done, LaneSpeed(None, None, None, TOO_FEW))
    assert short.count(TOO_FEW) == 3 and "data-speedup" not in short and "×</div>" not in short
    assert short.count("spec-counter-quiet") == 3 and "spec-counter-quiet" not in html  # numbers stay large


def test_draft_lengths_figure_traces():
    fig = plots.draft_lengths_figure({"fixed:4": LANE, "ar": AR})
    names = [t.name for t in fig.data]
    assert names == ["fixed:4 · drafted", "fixed:4 · accepted"]  # ar drafts nothing: left out
    assert list(fig.data[0].y) == [4, 2, 4] and list(fig.data[1].y) == [3, 2, 0]
    assert list(fig.data[0].x) == [0, 1, 2]
    assert fig.layout.xaxis.title.text.startswith("round") and fig.layout.yaxis.title.text == "tokens"


def test_acceptance_by_position():
    pos, rates, counts = plots.acceptance_by_position(LANE)
    assert pos == [1, 2, 3, 4] and counts == [3, 3, 2, 2]
    assert rates == [2 / 3, 2 / 3, 1 / 2, 0.0]
    fig = plots.acceptance_by_position_figure({"fixed:4": LANE})
    assert list(fig.data[0].y) == rates and fig.layout.yaxis.tickformat == ".0%"


def test_accepted_histogram():
    xs, fractions = plots.accepted_histogram(LANE)
    assert xs == [0, 1, 2, 3, 4] and fractions == [1 / 3, 0, 1 / 3, 1 / 3, 0]
    fig = plots.accepted_histogram_figure({"heuristic": LANE, "fixed:4": LANE})
    assert [t.name for t in fig.data] == ["heuristic", "fixed:4"]
    assert fig.data[0].marker.color != fig.data[1].marker.color  # distinct series colours


def test_empty_figures_say_so():
    for build in (plots.draft_lengths_figure, plots.accepted_histogram_figure, lens.training_lens_figure):
        fig = build({"ar": AR})
        assert fig.layout.annotations and "no drafted rounds" in fig.layout.annotations[0].text


def test_lens_weights_match_the_rules():
    q = [0.9, 0.8, 0.3, 0.1]
    w = lens.lens_weights(q)
    assert w["uniform"] == [1.0] * 4
    assert w["decay"] == pytest.approx([math.exp(-k / 4.0) for k in range(4)])
    qt = [0.5 * x + 0.5 for x in q]  # α = 0.5
    prefix = [math.prod(qt[: k + 1]) for k in range(4)]
    assert w["dpace"] == pytest.approx([sum(prefix[j:]) for j in range(4)])
    import torch

    assert w["dpace"] == pytest.approx(rules.dpace_weights(torch.tensor(q)).tolist(), rel=1e-6)
    assert rules.decay_gamma(8) == 4.0 and rules.decay_gamma(12) == 5.5 and rules.decay_gamma(16) == 7.0
    assert w["decay"] == pytest.approx(rules.decay_weights(torch.tensor(q), rules.decay_gamma(5)).tolist())


def test_training_lens_figure_uses_a_real_block():
    gold = [0.9, 0.7, 0.2, 0.05]
    lane = [ev(0, ["a", "b"], 2), ev(1, ["c", "d", "e", "f"], 2, gold=gold), ev(2, ["g", "h", "i"], 1)]
    first = lens.training_lens_figure({"heuristic": lane})  # opens on the block kept most (rounds 0, 1 tie: 0)
    assert "round 0" in first.layout.title.text and "one block" in first.layout.title.text
    fig = lens.training_lens_figure({"heuristic": lane}, round_index=1)
    assert "round 1" in fig.layout.title.text and "heuristic" in fig.layout.title.text
    assert "B = 5" in fig.layout.title.text and "γ_w = 4" in fig.layout.title.text  # the block size it weighs
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["q_j: the draft's probability of the target's token"].y) == gold
    dpace = by_name["D-PACE (from q_j)"]
    raw = lens.lens_weights(gold)["dpace"]
    assert list(dpace.y) == pytest.approx([x / sum(raw) for x in raw])
    assert sum(by_name["uniform"].y) == pytest.approx(1.0)
    assert dpace.y[0] > dpace.y[-1]  # weight goes to the positions the verifier reaches
    fig1 = lens.training_lens_figure({"heuristic": lane}, round_index=2)
    assert "round 2" in fig1.layout.title.text
    short = lens.training_lens_figure({"heuristic": [ev(0, ["a"], 1), *lane[1:]]}, round_index=0)
    said = short.layout.annotations[0].text
    assert "round 0 of heuristic drafted 1 token:" in said and "rounds 1, 2 have one" in said
    copy = ev(0, ["a", "b", "c"], 3, method="hybrid", draft_sources=("lookup",) * 3)  # a copied run: no q to train
    said = lens.training_lens_figure({"hybrid": [copy]}, round_index=0).layout.annotations[0].text
    assert "drafted 3 tokens copied from the text" in said and "a copy has no q to train" in said


def test_round_views_follow_the_chosen_round():
    lane = [ev(0, ["a", "b"], 2), ev(1, ["c", "d", "e"], 1)]
    lanes = {"heuristic": lane, "ar": AR}
    by_key = {v.key: v for v in views.views_for(list(lanes))}
    fig = views.build_for_round(by_key["training_lens"], lanes, "heuristic", 1)
    assert "round 1" in fig.layout.title.text and len(fig.data[0].y) == 3
    assert views.build_for_round(by_key["draft_lengths"], lanes, "heuristic", 1) is None


def test_views_registry_by_prefix():
    keys = [v.key for v in views.views_for(["heuristic", "fixed:4", "ar"])]
    assert keys[:4] == ["draft_lengths", "acceptance_by_position", "accepted_histogram", "training_lens"]
    assert "heuristic_window" in keys and "confidence" not in keys
    assert views.views_for(["ar"]) == []
    assert "confidence" in [v.key for v in views.views_for(["confidence:0.3+lossless"])]
    assert views.views_for(["warp:9"]) == []  # a name that does not parse (its lane shows the error): no view


def test_a_plugin_view_appears_for_its_method_only(monkeypatch):
    from spec_core.policies import POLICIES

    monkeypatch.setitem(POLICIES, "zz", POLICIES["fixed"])  # a policy family of its own, for its own view
    view = views.View("test_wt", "w_t", "look", lambda lanes: plots.draft_lengths_figure(lanes), prefixes=("zz",))
    views.register_view(view)
    try:
        assert view in views.views_for(["zz:1+lossless"]) and view not in views.views_for(["fixed:4"])
        lanes = views.lanes_for(view, {"zz:1": LANE, "fixed:4": LANE, "heuristic": LANE, "ar": AR})
        assert list(lanes) == ["zz:1", "fixed:4"]  # the method plus its fixed-window baseline
    finally:
        views.VIEWS.remove(view)


def test_explain_rules():
    assert "min(1, p(x)/q(x))" in views.explain("fixed:4", 0.7)
    assert "most likely" in views.explain("heuristic", 0.0) and "+2" in views.explain("heuristic", 0.0)
    assert "Plain decoding" in views.explain("ar", 0.0)


def test_stepthrough_steps():
    e = LANE[0]
    draft = stepthrough.round_step_html(e, "draft")
    assert 'data-step="draft"' in draft and "4 tokens drafted" in draft and "<td>?</td>" in draft
    verify = stepthrough.round_step_html(e, 1)
    assert "<td>0.250</td>" in verify and "verdict" not in verify
    accept = stepthrough.round_step_html(e, "accept", temperature=1.0)
    assert accept.count(">accepted<") == 3 and "rejected (first rejection)" in accept and "recovered" in accept
    assert "min(1, p(x)/q(x))" in accept
    emit = stepthrough.round_step_html(e, "emit")
    assert emit.count('data-kind="accepted"') == 3 and 'data-kind="recovered"' in emit and "Appended 4 tokens" in emit
    assert "bonus" in stepthrough.round_step_html(LANE[1], "accept")
    assert "No draft" in stepthrough.round_step_html(AR[0], "draft")
    with pytest.raises(ValueError):
        stepthrough.round_step_html(e, 7)


def test_interleave_round_robin():
    out = list(interleave([iter("abc"), iter("x"), iter("pq")]))
    assert out == [(0, "a"), (1, "x"), (2, "p"), (0, "b"), (2, "q"), (0, "c")]
    assert list(interleave([iter("abc")], should_stop=lambda: True)) == []


def test_event_records_round_trip(tmp_path):
    records = [event_record(e, prompt_id="p1") for e in LANE]
    path = tmp_path / "events.jsonl"
    from spec_core.engine.session import events_to_jsonl, read_events_jsonl

    path.write_text(events_to_jsonl(records))
    back = read_events_jsonl(path)
    assert [e for _, e in back] == LANE and back[0][0] == {"prompt_id": "p1"}
    with pytest.raises(Exception, match="missing"):
        event_from_record({"index": 0})
    path.write_text("not json\n")
    with pytest.raises(Exception, match="line 1"):
        read_events_jsonl(path)


def test_read_prompts(tmp_path):
    good = tmp_path / "p.jsonl"
    good.write_text('{"id": "a", "category": "x", "prompt": "hi"}\n\n{"id": "b", "prompt": "yo"}\n')
    assert read_prompts(good) == [
        {"id": "a", "category": "x", "prompt": "hi"},
        {"id": "b", "category": "", "prompt": "yo"},
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    with pytest.raises(Exception, match="prompt"):
        read_prompts(bad)


def test_glossary_explains_the_words_the_page_uses():
    html = glossary.glossary_html()
    for word in ("ar", "τ", "α", "recovered", "bonus", "heuristic", "fixed:K", "block:LOSS", "D-PACE", "embedded"):
        assert word in html, word
    assert 'id="glossary"' in html
    header = glossary.lane_header("block:dpace+lossless")
    assert header.startswith("### block:dpace+lossless") and "block drafter" in header and "(#glossary)" in header


def frame_with(lanes, **kw) -> LiveFrame:
    return LiveFrame(tuple(lanes), {m: tuple(ev) for m, ev in lanes.items()}, done=True, **kw)


def test_lane_parts_mark_a_divergence_in_both_lanes():
    d = Divergence("fixed:4", 2, " x", " t2", ((" t2", 0.41), (" x", 0.40)), 0.02, 3, "bfloat16")
    frame = frame_with({"fixed:4": LANE, "ar": AR}, divergences={"fixed:4": d})
    header, counters, body = live_page.lane_parts(frame, "fixed:4")
    assert header.startswith("### fixed:4") and 'data-method="fixed:4"' in counters
    assert body.count('data-diverge="1"') == 1 and "new token 3" in body and "logit gap 0.020" in body
    assert "3-token verification pass" in body and "spec-diverge-note" in body
    _, _, ar_body = live_page.lane_parts(frame, "ar")
    assert ar_body.count('data-diverge="1"') == 1 and "spec-diverge-note" not in ar_body
    exact = dataclasses.replace(d, precision="float32").note()
    assert "In float32 both passes should agree" in exact and "near-tie" not in exact


def test_lane_parts_of_an_error_lane_and_empty_slots():
    frame = LiveFrame(("warp:9", "ar"), {"warp:9": (), "ar": tuple(AR)}, errors={"warp:9": "unknown method"})
    parts = live_page.lanes_parts(frame, 3)
    assert "spec-error" in parts[2] and "unknown method" in parts[2] and parts[1] == ""
    assert 'data-method="ar"' in parts[4] and parts[6:] == list(live_page.EMPTY_LANE)
    assert live_page.step_lanes(frame_with({"ar": AR, "fixed:4": LANE})) == ["fixed:4", "ar"]


def test_hovers_and_step_through_show_what_the_method_parts_said():
    """PACER's â and an ensemble verifier's w_t, ν(x) reach the token hover and the step-through's table."""
    blocks = [
        {"predicted": [0.7], "mean": 0.7, "threshold": 0.6, "decision": "pass"},
        {"predicted": [0.4], "mean": 0.4, "threshold": 0.66, "decision": "stop"},
    ]
    e = ev(
        0,
        ["The", " sky"],
        1,
        " blue",
        method="pacer+diversed",
        policy_trace={"blocks": blocks, "predicted": [0.7, 0.4]},
        verifier_trace={"w": [0.9, 0.2], "nu_x": [0.31, 0.05]},
    )
    spans = tokens.token_spans([e])
    first = tokens.span_html(spans[0])
    assert "â = 0.700" in first and "w_t = 0.900" in first and "ν(x) = 0.310" in first
    assert "â = 0.400" in tokens.span_html(spans[1]) and "w_t = 0.200" in tokens.span_html(spans[1])
    assert spans[2].notes == ()  # the target's own token: nothing drafted, nothing predicted
    plain = tokens.token_spans([ev(0, ["a"], 1, "b")])[0]
    assert plain.notes == () and "â" not in tokens.span_html(plain)

    draft_step = stepthrough.round_step_html(e, "draft")
    assert "â (PACER)" in draft_step and "0.700" in draft_step and "w_t" in draft_step
    assert "block 1: mean predicted 0.70 vs threshold 0.60" in draft_step
    assert "kept 1 of 2" not in draft_step  # the outcome is for the accept step
    assert ">0.900<" not in draft_step  # w_t needs the target's pass: "?" while drafting
    verify_step = stepthrough.round_step_html(e, "verify")
    assert ">0.900<" in verify_step and ">0.310<" in verify_step
    assert "â (PACER)" not in stepthrough.round_step_html(ev(0, ["a"], 1, "b"), "draft")


def test_pacer_threshold_caption_says_where_t_came_from():
    """The caption under PACER's threshold view names the lane's t and why (tuned for this machine, or given)."""
    from visuals import pacer as pacer_view

    blocks = [{"start": 0, "predicted": [0.3], "mean": 0.3, "threshold": 0.35, "decision": "stop"}]
    trace = {"blocks": blocks, "threshold_note": "t = 0.35, tuned for this machine", "predicted": [0.3]}
    lane = [ev(0, ["a"], 0, method="pacer", policy_trace=trace)]
    text = pacer_view.threshold_caption({"pacer": lane})
    assert "1 block: 0 passed, 1 stopped" in text and "t = 0.35, tuned for this machine" in text
    assert "It never adapted" in text and "score (mean 0.30, at most 0.30) stayed under t = 0.35" in text
    assert "kept 0% of first tokens" in text


def test_pacer_caption_blocks_add_up_and_say_nothing_of_adapting_when_a_block_passed():
    """passed + stopped + capped = blocks; a block that reached the draft's cap is counted as such."""
    from visuals import pacer as pacer_view

    blocks = [
        {"start": 0, "predicted": [0.9], "mean": 0.9, "threshold": 0.6, "decision": "pass"},
        {"start": 1, "predicted": [0.7], "mean": 0.7, "threshold": 0.66, "decision": "max"},
    ]
    lane = [ev(0, ["a", "b"], 2, method="pacer", policy_trace={"blocks": blocks, "predicted": [0.9, 0.7]})]
    text = pacer_view.threshold_caption({"pacer": lane})
    assert "2 blocks: 1 passed, 0 stopped the draft, 1 reached the draft's cap" in text
    assert "never adapted" not in text


def _tokens_lane(method, ids, per_round=2):
    """A lane whose emitted token ids are ``ids``, ``per_round`` a round (pieces are the ids as text)."""
    out = []
    for r, k in enumerate(range(0, len(ids), per_round)):
        chunk = ids[k : k + per_round]
        drafts = [str(t) for t in chunk[:-1]]
        e = ev(r, drafts, len(drafts), str(chunk[-1]), method=method)
        out.append(dataclasses.replace(e, emitted=tuple(chunk), draft_tokens=tuple(chunk[:-1])))
    return out


def test_no_divergence_mark_where_one_text_is_a_prefix_of_the_other():
    """◆ only where both texts exist and differ: a lane ahead of ar (or ar not started, or a run cut by Stop)
    has not parted from it (issue 45, item 1)."""
    ar = _tokens_lane("ar", [1, 2, 3, 4], per_round=1)
    ahead = _tokens_lane("fixed:4", [1, 2, 3, 4, 5, 6])
    for ar_lane in (ar, ar[:0], ar[:2]):  # ar done with fewer tokens, not started, part-way
        frame = LiveFrame(("fixed:4", "ar"), {"fixed:4": tuple(ahead), "ar": tuple(ar_lane)}, done=True)
        assert frame.marks("fixed:4") == {} and frame.marks("ar") == {}
        _, counters, body = live_page.lane_parts(frame, "fixed:4")
        assert 'data-diverge="1"' not in body and "near-tie" not in counters
    frame = frame_with({"fixed:4": ahead, "ar": ar})
    assert frame.text_note("fixed:4") == "Same text as ar over the first 4 tokens ✓."
    parted = _tokens_lane("fixed:4", [1, 2, 9, 4, 5, 6])
    assert list(frame_with({"fixed:4": parted, "ar": ar}).marks("fixed:4")) == [2]  # a real difference is marked


def test_sampled_lanes_are_not_marked_as_rounded_differently():
    """At temperature > 0 a lane parts from ar's sample by chance: no ◆, no "rounded differently", and a lossy
    lane's distance from ar is not reported (issue 45, items 1 and 4)."""
    ar = _tokens_lane("ar", [1, 2, 3, 4, 5, 6], per_round=1)
    lossless = _tokens_lane("fixed:4", [1, 7, 8, 9, 5, 6])
    lossy_lane = _tokens_lane("static:0.5", [1, 2, 8, 9, 5, 6])
    lanes = {"fixed:4": lossless, "static:0.5": lossy_lane, "ar": ar}
    frame = frame_with(lanes, temperature=0.7)
    for method in lanes:
        assert frame.marks(method) == {}
        _, counters, body = live_page.lane_parts(frame, method)
        assert 'data-diverge="1"' not in body and "rounded differently" not in body
        assert "parts from ar" not in (counters + body).lower()
    assert frame.text_note("static:0.5") == "" and frame.text_note("fixed:4") == ""
    _, _, body = live_page.lane_parts(frame, "static:0.5")
    assert "not reported" in body and "set the temperature to 0" not in body
    greedy = frame_with(lanes)  # at temperature 0 the lossy lane's distance is reported, and not as a rounding
    assert "parts from ar's at token 3" in greedy.text_note("static:0.5")
    _, _, body = live_page.lane_parts(greedy, "static:0.5")
    assert 'data-diverge="1"' in body and "verifier is lossy" in body and "rounded differently" not in body


@pytest.mark.parametrize("method", ["fixed:4+diversed", "fixed:4+static:0.7"])
def test_a_lossy_recovered_token_is_drawn_from_nus_residual_header_and_body_alike(method):
    """Issue 45, item 3: a lossy ensemble verifier resamples from norm(max(0, ν − q)); its tooltip's header and body
    say so, from the verifier's own words, and neither calls the token the target's own."""
    e = ev(0, ["The", " sky"], 1, " blue", method=method, verifier_trace={"w": [0.9, 0.2], "nu_x": [0.3, 0.1]})
    recovered = [s for s in tokens.token_spans([e], temperature=0.7) if s.kind == "recovered"][0]
    lines = tokens.hover_lines(recovered)
    head, text = lines[0][1], tokens.hover_text(recovered)
    assert "ν's residual" in head and "the target's own" not in head
    assert "norm(max(0, ν − q))" in recovered.why and "exactly the target's" not in text
    lossless = [s for s in tokens.token_spans([ev(0, ["a", "b"], 1, "c")], 0.7) if s.kind == "recovered"][0]
    assert "the target's own" in tokens.hover_lines(lossless)[0][1]
    assert "norm(max(0, p − q))" in lossless.why and "exactly the target's" in lossless.why


def test_a_long_caption_shows_at_most_60_words_and_folds_the_rest_behind_more():
    """Issue 45, item 6 (captions): a caption over 60 words shows its first whole sentences up to 60 and puts the
    rest behind a "more" link; no word is lost, and a paragraph break stays where it was."""
    import re

    from visuals.captions import CAPTION_WORDS, folded

    long = " ".join(f"Sentence {i} has exactly seven words here." for i in range(12)) + "\n\nA footnote."
    text = folded(long)
    head, rest = text.split("<details><summary>more</summary>")
    assert len(head.split()) == 56 and head.strip().endswith("Sentence 7 has exactly seven words here.")
    assert rest.strip().endswith("\n\nA footnote.\n\n</details>")
    assert re.sub(r"\s+", " ", head + rest.replace("</details>", "")).strip() == re.sub(r"\s+", " ", long)
    assert folded("One sentence. Another.") == "One sentence. Another."
    run_on = " ".join(["word"] * 80)  # no sentence ends within 60 words: cut at 60, marked on both sides
    cut, more = folded(run_on).split("<details><summary>more</summary>")
    assert len(cut.split()) == CAPTION_WORDS + 1 and cut.strip().endswith("…") and more.split()[0] == "…"


def test_the_house_layout_fits_a_phone_title_note_axis_and_legend():
    """Issue #45: at 420 px a long title, its note and a long y-axis title ran off the plot or into each other, and
    a legend stacked one entry a row climbed into the x-axis title. They now wrap, and the figure grows a row per
    legend entry past two."""
    import plotly.graph_objects as go

    from visuals.plots import AXIS_CHARS, HEIGHT, LEGEND_ROW_PX, NOTE_CHARS, TITLE_CHARS, base_layout

    fig = go.Figure([go.Scatter(x=[1], y=[1], name=f"lane {i} · a long legend entry") for i in range(5)])
    fig.add_trace(go.Scatter(x=[1], y=[1], showlegend=False, name="labels"))
    title = "PACER: the threshold grows after each block that passes"
    note = "pacer+diversed: 89 blocks in 56 rounds · fixed:2 (replayed): 78 rounds"
    base_layout(fig, title, "block in the round", "mean predicted acceptance of the block", note=note)
    head, sup = fig.layout.title.text.split("<br><sup>")
    assert all(len(line) <= TITLE_CHARS for line in head.split("<br>")) and head.replace("<br>", " ") == title
    assert all(len(line) <= NOTE_CHARS for line in sup.removesuffix("</sup>").split("<br>"))
    assert all(len(line) <= AXIS_CHARS for line in fig.layout.yaxis.title.text.split("<br>"))
    extra_top = fig.layout.margin.t - 40
    assert fig.layout.height == HEIGHT + LEGEND_ROW_PX * 3 + extra_top  # five entries shown, the label trace not
    assert fig.layout.modebar.orientation == "v"  # the mode bar never covers the title
    short = base_layout(go.Figure(), "Draft length", "round", "tokens")
    assert short.layout.title.text == "Draft length" and short.layout.height == HEIGHT
