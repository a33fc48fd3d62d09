"""Window policies: ``fixed:K`` (the baseline) and ``heuristic``, transformers' adaptive window; and the policies
of drafters that set their own length (:func:`own_length`).

``heuristic`` follows transformers' ``num_assistant_tokens_schedule="heuristic"``
(``generation/candidate_generator.py``): start at 5; +2 after a round where every draft was accepted, else −1
(floor 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs
from spec_core.policies.base import DraftSoFar, number

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

MAX_WINDOW = 64


def _window(k: int, what: str) -> int:
    if not 1 <= k <= MAX_WINDOW:
        raise SpecScopeError(f"{what} needs 1 <= K <= {MAX_WINDOW}, got {k}")
    return k


class FixedLength:
    """Draft exactly K tokens per round (the fixed-window baseline)."""

    prefix: ClassVar[str] = "fixed"
    about: ClassVar[str] = "a fixed draft window"
    examples: ClassVar[tuple[str, ...]] = ("fixed:2", "fixed:4", "fixed:6")
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (("fixed:K", "draft K tokens every round."),)

    @classmethod
    def rule(cls, temperature: float) -> str:
        return "Draft length: a fixed window of K tokens every round."

    def __init__(self, k: int):
        self.k, self.name, self.stop_reason = _window(k, "fixed:K"), f"fixed:{k}", ""

    @classmethod
    def parse(cls, arg: str | None) -> int:
        if arg is None:
            raise SpecScopeError("fixed needs a window size, e.g. fixed:4")
        return _window(number(arg, int, "fixed:K"), "fixed:K")

    @classmethod
    def build(cls, k: int, pair: ModelPair | None = None) -> FixedLength:
        return cls(k)

    def next_chunk(self, so_far: DraftSoFar) -> int:
        want = min(self.k - len(so_far.tokens), so_far.budget - len(so_far.tokens))
        if want <= 0:
            self.stop_reason = "window" if len(so_far.tokens) >= self.k else "budget"
        return max(want, 0)

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        return {"window": self.k}


class HeuristicLength(FixedLength):
    """transformers' heuristic schedule: K starts at 5, +2 when all drafts pass, else −1 (floor 1)."""

    prefix: ClassVar[str] = "heuristic"
    about: ClassVar[str] = "an adaptive window (+2 / −1)"
    examples: ClassVar[tuple[str, ...]] = ("heuristic",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "heuristic",
            "transformers' schedule: the window grows by 2 after a round where every draft passed, shrinks by 1 "
            "otherwise.",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        return (
            "Draft length: transformers' heuristic, window +2 after a round where every "
            "draft passed, −1 otherwise (floor 1)."
        )

    def __init__(self, start: int = 5):
        super().__init__(_window(start, "heuristic:START"))

    @classmethod
    def parse(cls, arg: str | None) -> int:
        return 5 if arg is None else _window(number(arg, int, "heuristic:START"), "heuristic:START")

    @classmethod
    def build(cls, start: int, pair: ModelPair | None = None) -> HeuristicLength:
        return cls(start)

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        drafted = len(inputs.draft_tokens)
        self.k = min(self.k + 2, MAX_WINDOW) if drafted and accepted == drafted else max(self.k - 1, 1)


class NoDraft:
    """Draft nothing: the policy of the empty drafter (plain decoding, ``ar``)."""

    stop_reason = ""

    def next_chunk(self, so_far: DraftSoFar) -> int:
        return 0

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        return {}


def own_length(k: int) -> FixedLength | NoDraft:
    """The policy of a drafter that sets its own length (its ``block_len``: a block's B − 1 tokens, a tree's D
    levels): ``fixed:k``; no drafting at all for 0 (the empty drafter of ``ar``)."""
    return FixedLength(k) if k else NoDraft()
