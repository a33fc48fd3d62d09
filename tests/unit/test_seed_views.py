"""Issue 45: the default visit shows the seeds. The four seed views (draft length per round, PACER's threshold,
DIVERSED's w_t, the D-PACE training lens) each draw this run's rounds beside a fixed window: a lane of the run,
else ``fixed:2`` replayed on its text (:mod:`visuals.baseline`); each caption opens with what to look for. The
block drafter's view sets this run's acceptance per position beside the weights its card says it was trained with.
Scripted rounds only (no model)."""

from __future__ import annotations

import dataclasses
import json

from test_visuals import ev

from spec_core.core.assets import BLOCK_DIR
from spec_core.engine.replay import PolicyReplay
from spec_core.serve.live import LiveFrame
from ui import live_baseline, live_steps
from visuals import labels, lens, plots, views

SEEDS = ("draft_lengths", "pacer_threshold", "ensemble_weights", "training_lens")


def pacer_round(index: int, accepted: int, two: bool = True):
    """A pacer+diversed round: block 1 passed (â 0.7 ≥ t = 0.4), block 2 stopped (0.3 < 0.44); w_t per draft."""
    blocks = [{"start": 0, "predicted": [0.7], "mean": 0.7, "threshold": 0.4, "decision": "pass" if two else "stop"}]
    if two:
        blocks.append({"start": 1, "predicted": [0.3], "mean": 0.3, "threshold": 0.44, "decision": "stop"})
    n = len(blocks)
    return ev(
        index,
        [" a", " b"][:n],
        accepted,
        method="pacer+diversed",
        policy_trace={"blocks": blocks, "predicted": [b["predicted"][0] for b in blocks]},
        verifier_trace={"w": [0.4, 0.6][:n], "p_x": [0.3] * n, "q_x": [0.6] * n, "nu_x": [0.48] * n},
    )


COPIED = [ev(i, [" x", " y", " z"], 3, method="hybrid", draft_sources=("lookup",) * 3) for i in range(3)]
PACER = [pacer_round(0, 1), pacer_round(1, 2), pacer_round(2, 0, two=False)]
AR = [ev(i, [], 0, method="ar") for i in range(6)]
REPLAY = PolicyReplay("fixed:2", starts=(0, 1, 3, 4), lengths=(2, 2, 2, 2), kept=(0, 1, 0, 2), tokens=7)
DEFAULT = {"hybrid": COPIED, "pacer+diversed": PACER, "ar": AR}


def seed_views(lanes, replayed):
    active = {v.key: v for v in views.views_for(list(lanes))}
    assert set(SEEDS) <= set(active), sorted(active)
    return {k: (views.build(active[k], lanes, replayed), views.caption_for(active[k], lanes, replayed)) for k in SEEDS}


def test_the_default_trio_draws_all_four_seeds_beside_a_replayed_fixed_window():
    for key, (fig, caption) in seed_views(DEFAULT, REPLAY).items():
        names = [t.name or "" for t in fig.data]
        assert any(n.startswith("fixed:2 (replayed)") for n in names), (key, names)
        assert any(("pacer+diversed" in n or n in ("uniform", "D-PACE (from q_j)")) for n in names), (key, names)
        assert all(len(t.x) for t in fig.data if t.x is not None), key  # every trace has data
        assert caption.startswith("Look for"), (key, caption)
        assert "replayed" in caption, (key, caption)


def test_the_seed_figures_hold_this_runs_numbers():
    built = seed_views(DEFAULT, REPLAY)
    by_name = lambda key: {t.name: t for t in built[key][0].data}  # noqa: E731
    lengths = by_name("draft_lengths")
    assert list(lengths["fixed:2 (replayed) · accepted"].y) == [0, 1, 0, 2]
    assert list(lengths["pacer+diversed · drafted"].y) == [2, 2, 1]
    threshold = by_name("pacer_threshold")
    assert list(threshold["pacer+diversed · threshold"].y) == [0.4, 0.44]  # t, then ρ·t after a block passed
    kept = threshold["fixed:2 (replayed) · share kept at block k (no threshold)"]
    assert list(kept.x) == [1, 2] and list(kept.y) == [0.5, 0.25]  # block 1 kept in 2 of 4 rounds, block 2 in 1
    w = by_name("ensemble_weights")
    assert list(w["pacer+diversed"].y) == [0.4, 0.6, 0.4, 0.6, 0.4]
    ones = w["fixed:2 (replayed) · w = 1 (lossless)"]
    assert list(ones.x) == [0, 1, 1, 2, 3, 4, 4, 5] and set(ones.y) == {1.0}
    lens = built["training_lens"][0]
    assert "pacer+diversed, round 1" in lens.layout.title.text  # not hybrid (copied); round 1 kept the most


def test_a_fixed_window_lane_of_the_run_is_the_baseline_before_any_replay():
    fixed = [dataclasses.replace(e, method="fixed:2") for e in PACER[:2]]
    lanes = {"pacer+diversed": PACER, "fixed:2": fixed, "ar": AR}
    for key, (fig, _) in seed_views(lanes, REPLAY).items():
        names = [t.name or "" for t in fig.data]
        assert any(n.startswith("fixed:2") for n in names) and not any("replayed" in n for n in names), (key, names)


def test_the_replay_is_asked_for_only_where_it_is_exact_and_missing():
    done = LiveFrame(tuple(DEFAULT), DEFAULT, done=True, temperature=0.0)
    assert live_baseline.wants_replay(done, stopped=False)
    assert not live_baseline.wants_replay(done, stopped=True)  # a cut text
    assert not live_baseline.wants_replay(dataclasses.replace(done, temperature=0.7), stopped=False)  # sampled
    assert not live_baseline.wants_replay(dataclasses.replace(done, done=False), stopped=False)
    with_fixed = {**DEFAULT, "fixed:4": [dataclasses.replace(e, method="fixed:4") for e in PACER]}
    assert not live_baseline.wants_replay(LiveFrame(tuple(with_fixed), with_fixed, done=True), stopped=False)
    assert live_baseline.with_baseline(dataclasses.replace(done, temperature=0.7), None, None).baseline is None


def test_after_a_run_the_step_through_and_lens_follow_a_lane_with_a_model_drafted_block():
    frame = LiveFrame(tuple(DEFAULT), DEFAULT, done=True, temperature=0.0, baseline=REPLAY)
    out = live_steps.after_run(frame, "draft")
    assert out[0]["value"] == "pacer+diversed", out[0]  # lane A (hybrid) only copied: nothing for the lens to weigh
    lens = next(f for f in out[3:] if hasattr(f, "layout") and "Training lens" in (f.layout.title.text or ""))
    assert "pacer+diversed, round 1" in lens.layout.title.text and out[1]["value"] == 1  # the lens and the slider
    assert any((t.name or "").startswith("fixed:2 (replayed)") for t in lens.data)  # the baseline stays beside it


def test_the_block_view_sets_acceptance_by_position_beside_the_cards_training_weights():
    lane = [ev(i, [f" t{k}" for k in range(7)], acc, method="block:dpace") for i, acc in enumerate([0, 1, 3, 0])]
    lanes = {"block:dpace": lane, "ar": AR}
    view = next(v for v in views.views_for(list(lanes)) if v.key == "block_positions")
    fig = views.build(view, lanes, REPLAY)
    traces = {t.name: t for t in fig.data}
    card = json.loads((BLOCK_DIR / "dpace.json").read_text())
    trained = traces["block:dpace · trained weight (D-PACE, its card)"]
    assert list(trained.y) == card["log"][-1]["weights_by_position"]  # read from the card, not typed in
    kept = traces["block:dpace · kept at position j (this run)"]
    assert list(kept.y) == plots.acceptance_by_position(lane)[1] == [0.5, 0.25, 0.25, 0, 0, 0, 0]
    assert "fixed:2 (replayed) · kept at position j" in traces
    caption = views.caption_for(view, lanes, REPLAY)
    assert caption.startswith("Look for") and f"{card['log'][-1]['weights_by_position'][0]:.0%}" in caption
    assert "block_positions" not in {v.key for v in views.views_for(["pacer", "ar"])}  # block lanes only


def test_pacers_predicted_vs_kept_draws_the_fixed_window_its_caption_names():
    """Its caption says the fixed window's kept share is beside it: on the default trio that is the replay."""
    lanes = {"pacer+diversed": PACER, "ar": AR}
    view = next(v for v in views.views_for(list(lanes)) if v.key == "pacer_predicted_vs_kept")
    assert "fixed window's kept share" in view.caption
    traces = {t.name: t for t in views.build(view, lanes, REPLAY).data}
    base = traces["fixed:2 (replayed) · kept"]
    assert list(base.x) == [1, 2] and list(base.y) == [0.5, 0.25]  # position 1 kept in 2 of 4 rounds, 2 in 1
    assert "pacer+diversed · predicted â" in traces and "pacer+diversed · kept" in traces
    caption = views.caption_for(view, lanes, REPLAY)
    assert "fixed:2 (replayed) kept 0.50 at position 1 (4 rounds)" in caption and "replayed" in caption
    alone = {t.name for t in views.build(view, lanes).data}  # no replay (a sampled run): no baseline drawn
    assert not any("fixed" in n for n in alone)


def test_the_lens_opens_on_a_telling_block_not_a_lanes_first():
    """The default run's first model-drafted block had q_j 0.00, 0.00: every schedule's weights vanish there. The
    lens and the step-through open on the block the target kept the most of (the earliest among equals; with none
    kept, the one whose q_1 is highest)."""
    dull = ev(0, [" a", " b"], 0, method="pacer", gold=[0.0, 0.0])
    some = ev(1, [" c", " d", " e"], 1, method="pacer", gold=[0.6, 0.2, 0.1])
    most = ev(2, [" f", " g", " h"], 2, method="pacer", gold=[0.9, 0.7, 0.1])
    again = ev(3, [" i", " j"], 2, method="pacer", gold=[0.95, 0.9])
    lane = [dull, some, most, again]
    assert lens.telling_block(lane) is most and lens.telling_round(lane) == 2
    assert lens.telling_round([dull, dataclasses.replace(some, accepted=0)]) == 1  # none kept: the higher q_1
    assert lens.telling_round([ev(0, [" a"], 1, method="pacer")]) == 0  # nothing to weigh: round 0
    fig = lens.training_lens_figure({"pacer": lane, "ar": AR})
    assert "pacer, round 2" in fig.layout.title.text
    assert "round 2, the one of its 4 blocks" in lens.lens_caption({"pacer": lane}) and "(2 of 3;" in lens.lens_caption(
        {"pacer": lane}
    )
    frame = LiveFrame(("pacer", "ar"), {"pacer": lane, "ar": AR}, done=True, temperature=0.0)
    out = live_steps.after_run(frame, "draft")
    assert out[0]["value"] == "pacer" and out[1]["value"] == 2


def _clear(fig, annotation) -> bool:
    """Whether ``annotation``'s box (the label placer's estimate) covers no marker or bar of the lens."""
    canvas, markers, shapes = lens.lens_marks(fig)
    right = annotation.xanchor == "left"
    point = labels.Point(annotation.x, annotation.y, 0.0, annotation.text)
    box = labels.label_box(point, "middle right" if right else "middle left", canvas)
    dots = [labels.marker_box(m, canvas) for m in markers] + shapes
    return labels.inside(box, canvas) and not any(labels.overlap(box, d, gap=0) for d in dots)


def test_the_lens_rejection_label_is_placed_clear_of_every_mark():
    """The dashed line at the first rejection used to carry its label at the top right whatever stood there (q_j
    near 1 sits at the top); the label placer now finds it room beside the line, at a phone's plot width, or the
    note says it."""
    high = ev(0, [" a", " b", " c", " d"], 2, method="pacer", gold=[0.98, 0.97, 0.96, 0.95])
    fig = lens.training_lens_figure({"pacer": [high], "ar": AR}, replayed=REPLAY)
    placed = [a for a in fig.layout.annotations if a.name == "placed"]
    said = "dashed: the first rejection (kept 2)" in fig.layout.title.text
    assert len(placed) == 1 or said, (fig.layout.annotations, fig.layout.title.text)
    for a in placed:
        assert a.text == "first rejection" and _clear(fig, a) and a.y < 0.98 * fig.layout.yaxis.range[1]
    crowded = ev(0, [" a", " b"], 1, method="pacer", gold=[0.5, 0.5])
    fig = lens.training_lens_figure({"pacer": [crowded]})
    assert all(_clear(fig, a) for a in fig.layout.annotations if a.name == "placed")


def test_the_seed_and_block_views_carry_no_label_the_placer_did_not_place():
    """Every always-on label of the four seed views and the block view: none but the lens's placed one (and an
    empty figure's message), and no trace draws text of its own, so no two labels can pile up."""
    block = [ev(i, [f" t{k}" for k in range(7)], acc, method="block:dpace") for i, acc in enumerate([0, 1, 3, 0])]
    rejected = [dataclasses.replace(e, accepted=min(e.accepted, 1)) for e in PACER]
    for lanes in (DEFAULT, {**DEFAULT, "pacer+diversed": rejected}, {"block:dpace": block, "ar": AR}):
        for view in views.views_for(list(lanes)):
            if view.key not in (*SEEDS, "block_positions"):
                continue
            fig = views.build(view, lanes, REPLAY)
            assert all("text" not in (getattr(t, "mode", None) or "") for t in fig.data), view.key
            assert all(a.name == "placed" for a in fig.layout.annotations), (view.key, fig.layout.annotations)
