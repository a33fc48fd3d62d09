"""scripts/draft_scaling.py: the rows of the data-scaling table, for drafts trained from scratch or warm-started."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("draft_scaling", ROOT / "scripts" / "draft_scaling.py")
assert _spec and _spec.loader
draft_scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(draft_scaling)


def _held(step: int, agree: float) -> dict:
    return {"step": step, "heldout_agree0": agree, "heldout_agree1": agree - 0.1, "heldout_agree2": agree - 0.12}


def _card(name: str, tokens: int, agree: float, init: dict | None = None, start: float | None = None) -> dict:
    history = [_held(0, start)] if start is not None else [_held(200, agree - 0.05)]
    return {
        "name": name,
        "training": {},
        "data": {"train_answer_tokens": tokens},
        "heldout": _held(400, agree),
        "history": [*history, _held(400, agree)],
        "init": init,
    }


START = {"from": "feature.safetensors", "sha256": "abc", "train_answer_tokens": 1000}


def test_a_card_from_scratch_counts_its_own_tokens():
    table = draft_scaling.scaling_table([_card("b", 4000, 0.5), _card("a", 2000, 0.4)])
    assert table["draft"].tolist() == ["a", "b"]
    assert table["train_answer_tokens"].tolist() == [2000, 4000]


def test_a_warm_start_counts_the_tokens_its_start_saw():
    table = draft_scaling.scaling_table([_card("warm", 3000, 0.45, init=START, start=0.41)])
    assert table["train_answer_tokens"].tolist() == [4000]
    assert table["agree_1st"].tolist() == [0.45]


def test_with_start_the_shared_start_is_one_row_read_from_step_0():
    cards = [_card("w1", 3000, 0.45, init=START, start=0.41), _card("w2", 7000, 0.48, init=START, start=0.41)]
    table = draft_scaling.scaling_table(cards, with_start=True)
    assert table["train_answer_tokens"].tolist() == [1000, 4000, 8000]
    assert table["agree_1st"].tolist() == [0.41, 0.45, 0.48]
    assert table["best_step"].tolist() == [0, 400, 400]
    a, b, rows = draft_scaling.extrapolate(table, [0.6], tok_per_s=100)
    assert b > 0 and rows["answer_tokens"][0] > 8000


def test_a_card_without_a_step_0_adds_no_start_row():
    table = draft_scaling.scaling_table([_card("w", 3000, 0.45, init=START)], with_start=True)
    assert len(table) == 1
