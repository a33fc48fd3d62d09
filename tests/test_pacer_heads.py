"""PACER's head comparison (spec_core/policies/pacer_heads.py) and its view (visuals/pacer_heads.py)."""

from __future__ import annotations

import pytest
import torch

from spec_core.cost_model import CostProfile
from spec_core.policies import pacer_heads
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_tuning import TuningRounds, load_rounds
from spec_core.types import RoundEvent
from tests.test_pacer_tuning import synthetic_rounds

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
