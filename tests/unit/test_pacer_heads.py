"""PACER's head comparison (spec_core/policies/pacer_heads.py) and its view (visuals/pacer_heads.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_pacer_tuning import synthetic_rounds

from spec_core.core.cost_model import CostProfile, rounds_spread
from spec_core.core.lane_speed import lane_speed
from spec_core.core.types import RoundEvent
from spec_core.heads.metrics import calibration, roc_auc
from spec_core.policies import pacer_heads
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_headroom import headroom
from spec_core.policies.pacer_tuning import TuningRounds, best_threshold, load_rounds, rule_lengths

FLAT = CostProfile(widths=(1, 2, 4, 8), target_ms=(50.0, 51.0, 52.0, 54.0), draft_ms=3.0, engine_ms=0.3)


def test_token_labels_are_cumulative_and_positions_restart_each_round():
    rounds = TuningRounds(torch.tensor([3, 2, 4]), torch.tensor([1, 2, 0]), {}, {})
    labels, position = pacer_heads.token_labels(rounds)
    assert position.tolist() == [1, 2, 3, 1, 2, 1, 2, 3, 4]
    assert labels.tolist() == [True, False, False, True, True, False, False, False, False]


def test_cost_profile_replay_prices_each_round_once():
    """By hand: lengths 2 and 1 where the target keeps 1 and 3 → kept 1 and 1, tokens 2 + 2; head calls are free
    here; ms = (t(3) + 2 d + engine) + (t(2) + d + engine)."""
    costs = CostProfile(widths=(1, 2, 4), target_ms=(10.0, 12.0, 16.0), draft_ms=1.0, engine_ms=0.5)
    r = costs.replay([2, 1], [1, 3], head_calls=[2, 1])
    ms = (14.0 + 2.0 + 0.5) + (12.0 + 1.0 + 0.5)
    assert r["speedup"] == pytest.approx(4 * costs.step_ms / ms) and r["ms_per_token"] == pytest.approx(ms / 4)
    assert r["drafted_per_round"] == 1.5 and r["tokens_per_round"] == 2.0 and r["kept_share"] == pytest.approx(2 / 3)


def test_the_comparison_has_every_row_and_a_perfect_pre_verifier_ranks_perfectly():
    rounds = synthetic_rounds(300)
    rounds.predicted[pacer_heads.DRAFT_CUMPROB] = rounds.predicted["h@b1"].clone()
    rows = {r.name: r for r in pacer_heads.compare(rounds, FLAT, PacerParams())}
    assert {"draft's own Π q", "perfect pre-verifier", "fixed:1", "fixed:4", "oracle"} <= set(rows)
    perfect = rows["perfect pre-verifier"]
    assert perfect.auc == 1.0 and perfect.auc_first == 1.0 and perfect.ece == 0.0
    # it stops right after the first token the target rejects: every round drafts min(accepted + 1, 8)
    want = torch.clamp(rounds.accepted + 1, max=8).float().mean()
    assert perfect.drafted_per_round == pytest.approx(float(want))
    # the rows a rule cannot beat on flat costs: the perfect one beats Π q, the oracle beats everything
    assert perfect.speedup >= rows["draft's own Π q"].speedup
    assert rows["oracle"].speedup == max(r.speedup for r in rows.values())
    # a fixed window is the one cost model's replay of a constant length
    assert rows["fixed:2"].speedup == pytest.approx(FLAT.replay([2] * 300, rounds.accepted.numpy())["speedup"])
    # the calibrated synthetic predictor is not perfect
    assert 0.5 < rows["draft's own Π q"].auc < 1.0


def test_without_probabilities_the_row_is_left_out():
    rows = pacer_heads.compare(synthetic_rounds(50), FLAT)
    assert all(r.kind != "probability" for r in rows) and any(r.kind == "perfect" for r in rows)


def pacer_event(head: str, precision: str = "") -> RoundEvent:
    trace = {
        "blocks": [{"start": 0, "predicted": [0.7], "mean": 0.7, "threshold": 0.3, "decision": "pass"}],
        "predicted": [0.7],
        "block": 1,
        "rho": 1.1,
        "max": 8,
        "head": head,
        "precision": precision,
    }
    return RoundEvent(
        index=1,
        method="pacer",
        context_len=10,
        draft_tokens=(5,),
        draft_pieces=("a",),
        draft_probs=(0.6,),
        target_probs=(0.7,),
        accept_probs=(1.0,),
        gold_draft_probs=(0.6,),
        accepted=1,
        next_token=6,
        next_piece="b",
        next_kind="bonus",
        emitted=(5, 6),
        draft_s=0.01,
        verify_s=0.05,
        policy_trace=trace,
    )


@pytest.mark.skipif(load_rounds("feature") is None, reason="the shipped rounds asset is missing")
def test_the_view_draws_the_shipped_rounds_and_marks_the_lanes_head():
    from visuals import pacer_heads as view

    rounds = load_rounds("feature")
    paper = next(n for n, (_, method, _) in pacer_heads.head_names(rounds).items() if method == "pacer")
    lanes = {"pacer": [pacer_event(paper)], "fixed:4": []}
    fig = view.heads_figure(lanes)
    labels = list(fig.data[0].y)
    assert any(label.endswith("◀ this lane") and label.startswith("paper head") for label in labels)
    assert any(label.startswith("fixed:2") for label in labels) and "perfect pre-verifier" in labels
    bars = fig.data[0]
    assert len(bars.x) == len(labels) and bars.base == 1.0 and all(1.0 + x > 0 for x in bars.x)
    # the dashed line is named in the note under the title, not by a label on the line's top, which sat on the note
    (dashed,) = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    best = next(
        label for label in labels if label.startswith("fixed:") and bars.x[labels.index(label)] + 1 == dashed.x0
    )
    title = fig.layout.title.text.replace("<br>", " ")  # the note wraps for narrow screens
    assert f"dashed: the best fixed window ({best})" in title and not fig.layout.annotations
    said = view.describe(lanes)
    assert "paper head is predicted" in said and "perfect pre-verifier" in said and "oracle" in said.lower()
    # a lane on a head the rounds were not scored by (another draft's): nothing to compare, and the figure says so
    other = {"pacer": [pacer_event("pacer-standalone")]}
    assert view.describe(other) == ""
    assert "no recorded rounds" in str(view.heads_figure(other).layout.annotations[0].text)
    # no PACER rounds: an empty figure that says so, and no sentence
    assert view.describe({"fixed:4": []}) == ""
    assert "no PACER rounds yet" in str(view.heads_figure({"fixed:4": []}).layout.annotations[0].text)


def test_the_view_is_offered_to_pacer_lanes_only():
    from visuals import views

    assert "pacer_heads" in [v.key for v in views.views_for(["pacer+diversed"])]
    assert "pacer_heads" not in [v.key for v in views.views_for(["fixed:4", "confidence:0.4"])]


def test_costs_carry_their_unit_and_a_head_call_is_priced_in_it():
    """A head call timed in ms is never added raw to a model priced in steps: there it costs its parameters'
    share of a step, as a draft forward does; a measured profile takes the ms."""
    from spec_core.core.cost_model import accelerator_profile

    model = accelerator_profile(0.046)
    assert model.unit == "step" and FLAT.unit == "ms"
    with pytest.raises(ValueError, match="priced in step"):
        model.in_own_unit(0.3, "ms")
    with pytest.raises(ValueError, match="priced in ms"):
        FLAT.in_own_unit(1e-4, "step")
    assert model.with_head(0.3, 1.5e-4).head_ms == pytest.approx(1.5e-4)
    assert FLAT.with_head(0.3, 1.5e-4).head_ms == pytest.approx(0.3)


def test_under_the_accelerator_model_the_paper_head_is_priced_by_its_parameters():
    """The fresh-machine fallback (no cost table): the paper head's row equals the same rule with free calls
    within 0.005 (it has 21k parameters beside the target's 135M), where adding its 0.3 ms raw to a one-step
    model had priced each call at 0.3 of a step."""
    from spec_core.core.cost_model import accelerator_profile

    rounds = load_rounds("feature")
    model = accelerator_profile(0.046)
    paper = next(n for n, (_, method, _) in pacer_heads.head_names(rounds).items() if method == "pacer")
    row = next(r for r in pacer_heads.compare(rounds, model) if r.head == paper)
    per_round = rounds.per_round(pacer_heads.prediction_key(paper, 1))
    free = best_threshold(per_round, rounds.gamma, rounds.accepted, PacerParams(), model.with_head(0.0, 0.0))[1]
    # the bug: milliseconds read as a share of a step
    raw_costs = model.with_head(0.0, float(rounds.card["head_ms"][paper]))
    raw = best_threshold(per_round, rounds.gamma, rounds.accepted, PacerParams(), raw_costs)[1]
    assert abs(row.speedup - free["speedup"]) < 0.005
    assert raw["speedup"] < row.speedup - 0.05


def reference_compare(rounds: TuningRounds, costs: CostProfile, params: PacerParams) -> list[pacer_heads.HeadRow]:
    """The comparison computed directly, every t of every rule replayed and priced one at a time
    (:func:`best_threshold`), as it was before the replays were cached apart from their prices: what the cached
    path must reproduce."""
    labels, position = pacer_heads.token_labels(rounds)
    accepted = rounds.accepted.numpy()
    rows, prices = [], {}

    def rule(predicted, head_ms=0.0, share=0.0, **row):
        per_round = list(torch.split(predicted.float(), rounds.gamma.tolist()))
        priced = costs.with_head(head_ms, share)
        t, best = best_threshold(per_round, rounds.gamma, rounds.accepted, params, priced)
        lengths, calls = rule_lengths(per_round, rounds.gamma, dataclasses.replace(params, threshold=t))
        prices[row["name"]] = priced.round_prices(lengths, accepted, calls)
        first = position == 1
        ece, _ = calibration(predicted.float().clamp(0, 1), labels)
        auc, auc_first = roc_auc(predicted, labels), roc_auc(predicted[first], labels[first])
        figures = {k: best[k] for k in ("speedup", "drafted_per_round", "tokens_per_round")}
        rows.append(pacer_heads.HeadRow(**figures, threshold=t, auc=auc, auc_first=auc_first, ece=ece, **row))

    heads = sorted(pacer_heads.head_names(rounds).items(), key=lambda item: item[1][1] != "pacer")
    for name, (row, method, inputs) in heads:
        key = pacer_heads.prediction_key(name, params.block)
        if key in rounds.predicted:
            head_ms = float(rounds.card.get("head_ms", {}).get(name, 0.0))
            share = pacer_heads.head_share(name)
            named = {"name": row, "kind": "head", "method": method, "inputs": inputs, "head": name}
            rule(rounds.predicted[key], head_ms, share, **named)
    if pacer_heads.DRAFT_CUMPROB in rounds.predicted:
        rule(
            rounds.predicted[pacer_heads.DRAFT_CUMPROB],
            name="draft's own Π q",
            kind="probability",
            method="",
            inputs="Π q",
        )
    rule(labels.float(), name="perfect pre-verifier", kind="perfect", method="", inputs="outcome")
    windows = {f"fixed:{k}": np.minimum(rounds.gamma.numpy(), k) for k in pacer_heads.FIXED_WINDOWS}
    for name, lengths in windows.items():
        r = costs.replay(lengths, accepted)
        prices[name] = costs.round_prices(lengths, accepted)
        rows.append(
            pacer_heads.HeadRow(name, "fixed", name, "k", r["speedup"], r["drafted_per_round"], r["tokens_per_round"])
        )
    found = headroom(prices, list(windows), "perfect pre-verifier")
    r = costs.replay(accepted, accepted)
    prices["oracle"] = costs.round_prices(accepted, accepted)
    rows.append(
        pacer_heads.HeadRow("oracle", "oracle", "", "o", r["speedup"], r["drafted_per_round"], r["tokens_per_round"])
    )
    return [
        dataclasses.replace(row, headroom=found.get(row.name), spread=rounds_spread(*prices[row.name], costs.step_ms))
        for row in rows
    ]


NUMBERS = ("speedup", "drafted_per_round", "tokens_per_round", "threshold", "auc", "auc_first", "ece", "spread")


def assert_same_rows(got: list[pacer_heads.HeadRow], want: list[pacer_heads.HeadRow]):
    """Row by row, every number the view prints equal to 1e-9 (the headroom's NaN, no headroom, equal to itself)."""
    assert [(r.name, r.kind, r.method, r.head) for r in got] == [(r.name, r.kind, r.method, r.head) for r in want]
    for g, w in zip(got, want):
        for field in NUMBERS:
            a, b = getattr(g, field), getattr(w, field)
            assert (a is None) == (b is None), (g.name, field)
            if a is not None:
                assert np.asarray(a, dtype=float) == pytest.approx(np.asarray(b, dtype=float), abs=1e-9), (
                    g.name,
                    field,
                )
        assert (g.headroom is None) == (w.headroom is None), g.name
        if g.headroom is not None:
            a = [g.headroom.value, g.headroom.low, g.headroom.high]
            b = [w.headroom.value, w.headroom.low, w.headroom.high]
            assert a == pytest.approx(b, abs=1e-9, nan_ok=True) and g.headroom.groups == w.headroom.groups, g.name


@pytest.mark.parametrize(
    "costs",
    [FLAT, dataclasses.replace(FLAT, head_ms=0.7), pytest.param("model", id="accelerator")],
    ids=["flat", "head-ms", "accelerator"],
)
@pytest.mark.parametrize("params", [PacerParams(), PacerParams(block=2, rho=1.3, max_len=6)], ids=["b1", "b2"])
def test_the_priced_replays_equal_the_direct_comparison(costs, params):
    """The replays computed apart from their prices (:func:`pacer_heads.replays`, then :func:`pacer_heads.price`)
    give the rows the direct computation gives, t included, on synthetic rounds with both kinds of predictor."""
    from spec_core.core.cost_model import accelerator_profile

    costs = accelerator_profile(0.046) if costs == "model" else costs
    rounds = synthetic_rounds(200)
    rounds.predicted[pacer_heads.DRAFT_CUMPROB] = rounds.predicted["h@b1"].clone() * 0.9
    for i, name in enumerate(sorted(pacer_heads.recorded_heads())):  # rows priced with the heads' own cards
        rounds.card.setdefault("heads", {})[name] = ""
        rounds.card.setdefault("head_ms", {})[name] = 0.3 + 0.2 * i
        rounds.predicted[pacer_heads.prediction_key(name, params.block)] = rounds.predicted["h@b1"] ** (1 + i)
    assert_same_rows(pacer_heads.compare(rounds, costs, params), reference_compare(rounds, costs, params))


@pytest.mark.skipif(load_rounds("feature") is None, reason="the shipped rounds asset is missing")
def test_the_cached_comparison_equals_the_direct_one_on_a_runs_profile():
    """What the view draws for a Live run (:func:`pacer_heads.shipped_comparison`: the shipped rounds' replays
    cached once per process, priced per run) equals the direct computation on the same run's profile, and a second
    run's profile reuses the replays."""
    from test_quotes import event

    from spec_core.engine.replay import costs_from_events

    lanes = {
        "fixed:4": [event(i, "fixed:4", 4, i % 3, 0.090 + 0.01 * (i % 2)) for i in range(20)],
        "ar": [event(i, "ar", 0, 0, 0.040 + 0.004 * (i % 3)) for i in range(40)],
    }
    costs = costs_from_events(lanes)
    assert costs is not None and costs.source == "run"
    params = PacerParams()
    cached = list(pacer_heads.shipped_comparison(costs, params))
    assert_same_rows(cached, reference_compare(load_rounds("feature"), costs, params))
    before = pacer_heads.shipped_replays.cache_info().hits
    pacer_heads.shipped_comparison(dataclasses.replace(costs, draft_ms=costs.draft_ms * 1.5), params)
    assert pacer_heads.shipped_replays.cache_info().hits == before + 1


@pytest.mark.skipif(load_rounds("feature") is None, reason="the shipped rounds asset is missing")
def test_the_comparison_prices_with_the_runs_costs_and_quotes_the_lanes_fixed_window_beside_its_own():
    """With an ar lane the rows are priced by the run's own rounds (the Live lanes' predictions' profile), each with
    its 10–90% spread; a fixed window that ran as a lane gets its measured speedup beside the bar and one sentence."""
    from test_quotes import event

    from visuals import pacer_heads as view
    from visuals import views

    rounds = load_rounds("feature")
    paper = next(n for n, (_, method, _) in pacer_heads.head_names(rounds).items() if method == "pacer")
    lanes = {
        "pacer": [pacer_event(paper)],
        "fixed:4": [event(i, "fixed:4", 4, i % 3, 0.090 + 0.01 * (i % 2)) for i in range(20)],
        "ar": [event(i, "ar", 0, 0, 0.040 + 0.004 * (i % 3)) for i in range(40)],
    }
    rows, costs, _ = view.comparison_for(lanes)
    assert costs.source == "run"
    assert all(r.spread is not None and r.spread[0] <= r.speedup <= r.spread[1] for r in rows)
    note = view.lanes_note(lanes)
    assert note.startswith("fixed:4: the Live lane measured") and "the PACER comparison predicts" in note
    assert note.count("timed in this run's rounds") == 2  # both name their cost source: the same one
    assert "They agree within their spreads." in note or "They disagree beyond their spreads. " in note
    (heads,) = [v for v in views.views_for(list(lanes)) if v.key == "pacer_heads"]
    assert views.caption_for(heads, lanes).endswith("\n\n" + note)
    fig = view.heads_figure(lanes)
    measured = next(t for t in fig.data if t.name == "Live lane, measured")
    assert list(measured.y) == ["fixed:4"] and list(measured.x) == [
        pytest.approx(lane_speed("fixed:4", lanes).measured)
    ]
    without_ar = {m: ev for m, ev in lanes.items() if m != "ar"}  # nothing to anchor the run's prices, nothing measured
    assert (
        view.comparison_for(without_ar)[1].source in ("table", "reference", "model")
        and view.lanes_note(without_ar) == ""
    )


def assert_value_labels_clear(fig) -> None:
    """A horizontal bar chart's value labels (issue 45, item 6): no bar carries its own text (drawn at the bar's
    end, it ran into the row's name, "fixed:40.60×", or under the whiskers); each label starts right of every mark
    of its row (bar, whisker, ◆ and its whisker) and, at the placer's character width, ends inside the axis."""
    bars = [t for t in fig.data if t.type == "bar"]
    assert bars and all(t.text is None for t in bars)
    from visuals.labels import BAR_PLOT_PX, CHAR_PX

    (values,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    low, top = fig.layout.xaxis.range
    marks: dict[str, list[float]] = {}
    for t in fig.data:
        if t is values:
            continue
        base = (t.base or 0.0) if t.type == "bar" else None
        for i, (x, y) in enumerate(zip(t.x, t.y)):
            end = x + (base or 0.0)
            row = marks.setdefault(y, [])
            row += [end] + ([base] if base is not None else [])
            if t.error_x is not None and t.error_x.array is not None:
                row.append(end + t.error_x.array[i])
    assert set(values.y) == set(marks)
    for x, y, text in zip(values.x, values.y, values.text):
        assert x >= max(marks[y]) - 1e-9, (y, x, marks[y])
        assert x + CHAR_PX * len(text) * (top - low) / BAR_PLOT_PX <= top + 1e-9, (y, text)


@pytest.mark.skipif(load_rounds("feature") is None, reason="the shipped rounds asset is missing")
def test_which_pre_verifier_value_labels_never_touch_a_name_a_whisker_or_a_diamond():
    from test_quotes import event

    from visuals import pacer_heads as view

    rounds = load_rounds("feature")
    paper = next(n for n, (_, method, _) in pacer_heads.head_names(rounds).items() if method == "pacer")
    lanes = {
        "pacer": [pacer_event(paper)],
        "fixed:4": [event(i, "fixed:4", 4, i % 3, 0.090 + 0.01 * (i % 2)) for i in range(20)],
        "ar": [event(i, "ar", 0, 0, 0.040 + 0.004 * (i % 3)) for i in range(40)],
    }
    fig = view.heads_figure(lanes)
    assert any(t.name == "Live lane, measured" for t in fig.data)
    assert_value_labels_clear(fig)


@pytest.mark.skipif(load_rounds("feature") is None, reason="the shipped rounds asset is missing")
def test_the_which_pre_verifier_caption_shows_60_words_and_folds_the_rest():
    """Issue 45, item 6: its caption (what the comparison says, how to read it, the Live lane's quote) ran to about
    200 words; the slot shows at most 60 and the rest behind "more"."""
    from test_quotes import event

    from ui.shared import view_updates
    from visuals import views

    rounds = load_rounds("feature")
    paper = next(n for n, (_, method, _) in pacer_heads.head_names(rounds).items() if method == "pacer")
    lanes = {
        "pacer": [pacer_event(paper)],
        "fixed:4": [event(i, "fixed:4", 4, i % 3, 0.090 + 0.01 * (i % 2)) for i in range(20)],
        "ar": [event(i, "ar", 0, 0, 0.040 + 0.004 * (i % 3)) for i in range(40)],
    }
    (heads,) = [v for v in views.views_for(list(lanes)) if v.key == "pacer_heads"]
    assert len(views.caption_for(heads, lanes).split()) > 120
    out = view_updates(lanes)
    caption = next(c for c in out[1::3] if c.startswith("**PACER: which pre-verifier?**"))
    shown, folded = caption.split("<details><summary>more</summary>")
    assert len(shown.replace("**PACER: which pre-verifier?** —", "").split()) <= 60 and folded.strip()
