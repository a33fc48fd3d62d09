"""Draft-length policies: how many tokens the draft proposes in a round (ALGORITHMS.md §1).

A policy is asked, before each chunk of drafting, how many more tokens to draft (0 = stop and verify), and
hears each round's outcome afterwards. It sees what was drafted so far (:class:`DraftSoFar`) and must stay
within ``budget`` (tokens still allowed by ``max_new_tokens``).

- ``fixed:K`` — the baseline window, K tokens every round.
- ``heuristic`` — transformers' ``num_assistant_tokens_schedule="heuristic"`` (generation/candidate_generator.py):
  start at 5; +2 after a round where every draft was accepted, else −1 (floor 1).
- ``confidence:T`` — transformers' ``assistant_confidence_threshold`` idea: stop drafting once the draft's own
  probability of its token falls under T (their default 0.4), up to a maximum length.

A new policy is one class with a ``parse`` classmethod and one line in :data:`POLICIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from spec_core.errors import SpecScopeError


@dataclass(frozen=True)
class DraftSoFar:
    """What the drafter produced so far in this round."""

    tokens: list[int]  # drafted token ids
    token_probs: list[float]  # the draft's own (temperature-1) probability of each drafted token
    hidden: list[torch.Tensor]  # the draft's hidden state per drafted token, [H] each (learned policies read it)
    budget: int  # tokens still allowed this round (max_new_tokens − generated − 1 for the target's token)


class DraftLengthPolicy(Protocol):
    name: str

    def next_chunk(self, so_far: DraftSoFar) -> int:
        """How many tokens to draft next (0 = stop). Sets ``stop_reason`` when it returns 0."""

    def end_round(self, drafted: int, accepted: int) -> None:
        """The round's outcome (for policies that adapt)."""

    stop_reason: str

    def trace(self) -> dict:
        """Internals to show in the round's event."""


def _number(text: str, kind: type, what: str):
    try:
        return kind(text)
    except ValueError as err:
        raise SpecScopeError(f"{what}: expected a {kind.__name__}, got {text!r}") from err


class FixedLength:
    """Draft exactly K tokens per round (the fixed-window baseline)."""

    prefix: ClassVar[str] = "fixed"

    def __init__(self, k: int):
        if not 1 <= k <= 64:
            raise SpecScopeError(f"fixed:K needs 1 <= K <= 64, got {k}")
        self.k, self.name, self.stop_reason = k, f"fixed:{k}", ""

    @classmethod
    def parse(cls, arg: str | None) -> FixedLength:
        if arg is None:
            raise SpecScopeError("fixed needs a window size, e.g. fixed:4")
        return cls(_number(arg, int, "fixed:K"))

    def next_chunk(self, so_far: DraftSoFar) -> int:
        want = min(self.k - len(so_far.tokens), so_far.budget - len(so_far.tokens))
        if want <= 0:
            self.stop_reason = "window" if len(so_far.tokens) >= self.k else "budget"
        return max(want, 0)

    def end_round(self, drafted: int, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        return {"window": self.k}


class HeuristicLength(FixedLength):
    """transformers' heuristic schedule: K starts at 5, +2 when all drafts pass, else −1 (floor 1)."""

    prefix: ClassVar[str] = "heuristic"

    def __init__(self, start: int = 5):
        super().__init__(start)
        self.name = "heuristic"

    @classmethod
    def parse(cls, arg: str | None) -> HeuristicLength:
        return cls(5 if arg is None else _number(arg, int, "heuristic:START"))

    def end_round(self, drafted: int, accepted: int) -> None:
        self.k = min(self.k + 2, 64) if drafted and accepted == drafted else max(self.k - 1, 1)


class ConfidenceLength:
    """Stop when the draft's probability of its last token is under ``threshold`` (or at ``max_len``)."""

    prefix: ClassVar[str] = "confidence"

    def __init__(self, threshold: float = 0.4, max_len: int = 16):
        if not 0.0 <= threshold <= 1.0:
            raise SpecScopeError(f"confidence:T needs 0 <= T <= 1, got {threshold}")
        self.threshold, self.max_len = threshold, max_len
        self.name, self.stop_reason = f"confidence:{threshold:g}", ""

    @classmethod
    def parse(cls, arg: str | None) -> ConfidenceLength:
        return cls(0.4 if arg is None else _number(arg, float, "confidence:T"))

    def next_chunk(self, so_far: DraftSoFar) -> int:
        n = len(so_far.tokens)
        if n and so_far.token_probs[-1] < self.threshold:
            self.stop_reason = "confidence"
            return 0
        if n >= min(self.max_len, so_far.budget):
            self.stop_reason = "max" if n >= self.max_len else "budget"
            return 0
        return 1

    def end_round(self, drafted: int, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        return {"threshold": self.threshold}


POLICIES: dict[str, type] = {cls.prefix: cls for cls in (FixedLength, HeuristicLength, ConfidenceLength)}


def make_policy(spec: str) -> DraftLengthPolicy:
    """``"fixed:4"`` → a fresh policy object (policies keep per-generation state)."""
    head, _, arg = spec.partition(":")
    if head not in POLICIES:
        raise SpecScopeError(f"unknown draft-length policy {head!r}; known: {sorted(POLICIES)}")
    return POLICIES[head].parse(arg or None)
