"""Is the draft's own confidence Π q calibrated? The pure pieces of ``analyze calibration``
(spec_core/heads/metrics.py, spec_core/analysis/calibration.py) and the app's lesson that reads its summary
(visuals/pacer_heads.py)."""

from __future__ import annotations

import pytest
import torch

from spec_core.__main__ import main
from spec_core.analysis import calibration as calib
from spec_core.core.errors import SpecScopeError
from spec_core.heads.metrics import calibration_summary, confidence_verdict, prefix_confidence
from spec_core.policies.pacer_heads import load_calibration


def test_prefix_confidence_is_the_running_product_and_the_label_is_cumulative():
    scores, labels, positions = prefix_confidence([([0.5, 0.5, 0.8], 1), ([0.9, 0.1], 2), ([0.2], 0)])
    assert scores.tolist() == pytest.approx([0.5, 0.25, 0.2, 0.9, 0.09, 0.2])
    assert labels.tolist() == [True, False, False, True, True, False]
    assert positions.tolist() == [1, 2, 3, 1, 2, 1]
    empty = prefix_confidence([])
    assert all(len(t) == 0 for t in empty)


def test_an_overconfident_draft_has_a_positive_gap_and_its_ece_by_hand():
    """Π q says 0.9 on 10 tokens of which 5 are kept, and 0.15 on 10 of which 1 is: bins 0.9-1.0 and 0.1-0.2,
    ECE = ½·|0.9 − 0.5| + ½·|0.15 − 0.1| = 0.225; mean predicted 0.525 against 0.3 kept."""
    scores = torch.tensor([0.9] * 10 + [0.15] * 10, dtype=torch.float64)
    labels = torch.tensor([1] * 5 + [0] * 5 + [1] + [0] * 9).bool()
    s = calibration_summary(scores, labels)
    assert s["ece"] == pytest.approx(0.225, abs=1e-4)
    assert s["mean_predicted"] == pytest.approx(0.525) and s["kept_rate"] == pytest.approx(0.3)
    assert s["gap"] == pytest.approx(0.225) and s["verdict"] == "overconfident"
    assert [b["count"] for b in s["bins"]] == [10, 10] and s["bins"][1]["kept"] == pytest.approx(0.5)
    # the same tokens, kept more often than said: underconfident, the sign flips
    under = calibration_summary(1 - scores, ~labels)
    assert under["gap"] < -0.05 and under["verdict"] == "underconfident"


def test_a_calibrated_predictor_has_a_small_ece_and_ranks_by_its_scores():
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(20000, generator=g, dtype=torch.float64)
    labels = torch.rand(20000, generator=g, dtype=torch.float64) < scores  # kept with probability = the score
    positions = torch.arange(20000) % 4 + 1
    s = calibration_summary(scores, labels, positions)
    assert s["ece"] < 0.02 and abs(s["gap"]) < 0.02 and s["verdict"] == "calibrated"
    assert 0.8 < s["auc"] < 0.86 and 0.78 < s["auc_first"] < 0.88  # AUC of a calibrated uniform score: 5/6
    assert s["ece_first"] < 0.05 and abs(s["mean_predicted_first"] - s["kept_first"]) < 0.03


def test_the_verdict_needs_the_ece_over_the_bar_and_reads_the_sign():
    assert confidence_verdict(0.04, 0.04) == "calibrated"
    assert confidence_verdict(0.1, 0.08) == "overconfident"
    assert confidence_verdict(0.1, -0.08) == "underconfident"
    assert confidence_verdict(0.1, 0.01) == "mixed"


def test_drafts_and_temperatures_parse_and_bad_ones_say_why():
    assert calib.parse_drafts("feature, block:dpace,feature") == ["feature", "block:dpace"]
    blocks = calib.parse_drafts("block")
    assert len(blocks) >= 1 and all(b.startswith("block:") for b in blocks)
    assert calib.method_of("standalone") == ("standalone", f"fixed:{calib.CHAIN_WINDOW}")
    assert calib.method_of("block:dpace") == ("feature", "block:dpace")
    with pytest.raises(SpecScopeError, match="unknown draft 'tree'"):
        calib.parse_drafts("tree")
    with pytest.raises(SpecScopeError, match="empty"):
        calib.parse_drafts(" , ")
    assert calib.parse_temperatures("0,0.7") == [0.0, 0.7]
    with pytest.raises(SpecScopeError, match="below 0"):
        calib.parse_temperatures("-1")


def test_the_command_exits_2_with_one_line_on_bad_input(tmp_path, capsys):
    assert main(["analyze", "calibration", "--drafts", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown draft 'nope'")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["analyze", "calibration", "--prompts", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert main(["analyze", "calibration", "--prompts", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def summary(cells: list[dict], trained: list[dict] | None = None) -> dict:
    doc = {"date": "2026-12-03", "commit": "abc1234", "settings": {"max_new_tokens": 48}, "cells": cells}
    return doc | ({"trained": trained} if trained else {})


def cell(draft: str, t: float, ece: float, predicted: float, kept: float) -> dict:
    gap = predicted - kept
    return {
        "draft": draft,
        "temperature": t,
        "prompts": 8,
        "ece": ece,
        "mean_predicted": predicted,
        "kept_rate": kept,
        "gap": gap,
        "verdict": confidence_verdict(ece, gap),
    }


def test_the_lesson_follows_the_summary():
    from visuals.pacer_heads import calibration_lesson

    assert calibration_lesson(None) == "" and calibration_lesson({"cells": []}) == ""
    fine = calibration_lesson(
        summary([cell("feature", 0, 0.016, 0.31, 0.30), cell("standalone", 0.7, 0.03, 0.2, 0.18)])
    )
    assert "already calibrated" in fine and "ECE 0.016 … 0.030" in fine and "within 0.02" in fine
    assert "2026-12-03" in fine and "abc1234" in fine and "8 held-out prompts × 48 tokens" in fine
    assert "first drafted token" not in fine
    first = cell("feature", 0.7, 0.03, 0.11, 0.10) | {
        "ece_first": 0.15,
        "ece_first_noise": 0.07,
        "mean_predicted_first": 0.50,
        "kept_first": 0.43,
    }
    noted = calibration_lesson(summary([cell("feature", 0, 0.016, 0.31, 0.30), first]))
    assert "already calibrated" in noted and "first drafted token of feature at T = 0.7: q says 0.50, 0.43" in noted
    assert "ECE 0.150; a calibrated draft would show 0.070" in noted
    within_noise = first | {"ece_first": 0.06}
    assert "first drafted token" not in calibration_lesson(summary([within_noise]))
    over = summary([cell("feature", 0, 0.016, 0.31, 0.30), cell("block:dpace", 0.7, 0.12, 0.40, 0.25)])
    said = calibration_lesson(over)
    assert "already calibrated" not in said and "overconfident" in said
    assert "block:dpace at T = 0.7 (mean Π q 0.40 against 0.25 kept, ECE 0.120)" in said
    assert "feature at T = 0 (0.016)" in said
    trained = [{"draft": "block:dpace", "head_auc": 0.91, "pi_q_auc": 0.85}]
    beats = calibration_lesson(summary(over["cells"], trained))
    assert beats.startswith("A learned pre-verifier beats the draft's own confidence when")
    assert "AUC 0.910 against Π q's 0.850" in beats


@pytest.mark.skipif(load_calibration() is None, reason="the shipped calibration summary is missing")
def test_the_lesson_cites_the_shipped_summary():
    from visuals.pacer_heads import calibration_lesson

    shipped = load_calibration()
    assert shipped is not None
    said = calibration_lesson(shipped)
    assert shipped["commit"] in said and shipped["date"] in said
    for c in shipped["cells"]:
        assert f"{c['draft']} at T = {c['temperature']:g}" in said or "already calibrated" in said
        assert f"{c['ece']:.3f}" in said or "already calibrated" in said


def test_the_noise_floor_is_what_a_calibrated_predictor_shows_and_shrinks_with_more_tokens():
    from spec_core.heads.metrics import ece_noise

    few, many = torch.full((50,), 0.3, dtype=torch.float64), torch.full((5000,), 0.3, dtype=torch.float64)
    assert 0.02 < ece_noise(few) < 0.12 and ece_noise(many) < 0.012
    assert ece_noise(few) == ece_noise(few)  # a fixed seed: the same number every time
