"""scripts/draft_confidence.py: the positions a 2-gram prompt lookup would get right (does a draft copy?)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("draft_confidence", ROOT / "scripts" / "draft_confidence.py")
assert _spec and _spec.loader
draft_confidence = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(draft_confidence)


def test_a_lookup_hit_is_the_token_after_the_last_earlier_occurrence_of_the_current_two():
    tokens = torch.tensor([[5, 1, 2, 3, 1, 2, 7, 1, 2, 0]])
    # logits at j predict token j + 1; the text so far is tokens[: j + 1]
    choice = torch.tensor([[1, 2, 3, 1, 2, 3, 1, 2, 7, 0]])
    hits = draft_confidence.lookup_hits(tokens, choice)
    assert hits[0].nonzero().flatten().tolist() == [5, 8]  # (1, 2) was followed by 3, then by 7: the latest wins
    assert not hits[0, 2]  # the first (1, 2) has no earlier occurrence: no proposal
    wrong = choice.clone()
    wrong[0, 8] = 3  # the earlier continuation, not the latest one
    assert not draft_confidence.lookup_hits(tokens, wrong)[0, 8]
