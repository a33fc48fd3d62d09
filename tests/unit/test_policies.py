"""Draft-length policies on scripted outcome sequences."""

from __future__ import annotations

import pytest
import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs
from spec_core.policies import DraftSoFar, make_policy


def drafted(n: int, probs=None, budget: int = 100) -> DraftSoFar:
    return DraftSoFar(list(range(n)), list(probs or [0.9] * n), [], budget)


def round_of(gamma: int, vocab: int = 8, hidden: int = 4) -> RoundInputs:
    """A round's inputs with ``gamma`` drafted tokens (policies that only count read the shape)."""
    return RoundInputs(
        torch.zeros(gamma, dtype=torch.long),
        torch.zeros(gamma, vocab),
        None,
        torch.zeros(gamma, hidden),
        torch.zeros(gamma + 1, vocab),
    )


def test_fixed_window_and_budget():
    pol = make_policy("fixed:4")
    assert pol.next_chunk(drafted(0)) == 4
    assert pol.next_chunk(drafted(4)) == 0 and pol.stop_reason == "window"
    assert pol.next_chunk(drafted(0, budget=2)) == 2
    assert pol.next_chunk(drafted(2, budget=2)) == 0 and pol.stop_reason == "budget"


def test_heuristic_schedule_like_transformers():
    pol = make_policy("heuristic")
    windows = []
    for accepted_all in [True, True, False, False, False, False, False, False, True]:
        k = pol.next_chunk(drafted(0))
        windows.append(k)
        pol.end_round(round_of(k), k if accepted_all else 0)
    assert windows == [5, 7, 9, 8, 7, 6, 5, 4, 3]
    for _ in range(10):
        pol.end_round(round_of(3), 0)
    assert pol.next_chunk(drafted(0)) == 1  # floor 1


def test_confidence_stops_on_low_probability():
    pol = make_policy("confidence:0.5")
    assert pol.next_chunk(drafted(0)) == 1
    assert pol.next_chunk(drafted(2, [0.9, 0.8])) == 1
    assert pol.next_chunk(drafted(3, [0.9, 0.8, 0.3])) == 0 and pol.stop_reason == "confidence"
    assert pol.next_chunk(drafted(16)) == 0 and pol.stop_reason == "max"


@pytest.mark.parametrize("spec", ["fixed", "fixed:x", "fixed:0", "confidence:2", "nope:1", "heuristic:a"])
def test_bad_policy_specs(spec):
    with pytest.raises(SpecScopeError):
        make_policy(spec)


@pytest.mark.parametrize(
    ("spec", "name"), [("heuristic:0", "heuristic:START"), ("fixed:99", "fixed:K"), ("confidence:-1", "confidence:T")]
)
def test_out_of_range_messages_name_the_policy(spec, name):
    with pytest.raises(SpecScopeError, match=name):
        make_policy(spec)
