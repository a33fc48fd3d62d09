"""``confidence:T`` — transformers' ``assistant_confidence_threshold`` idea (docs/ALGORITHMS.md §1): stop drafting
once the draft's own probability of its token falls under T (their default 0.4), up to a maximum length."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs
from spec_core.policies.base import DraftSoFar, number

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


class ConfidenceLength:
    """Stop when the draft's probability of its last token is under ``threshold`` (or at ``max_len``)."""

    prefix: ClassVar[str] = "confidence"
    about: ClassVar[str] = "drafts while the draft is confident"
    examples: ClassVar[tuple[str, ...]] = ("confidence:0.4",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        ("confidence:T", "draft while the draft model's own probability of its token stays above T."),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        return (
            "Draft length: stop drafting once the draft's own probability of its last token falls under the "
            "threshold T."
        )

    def __init__(self, threshold: float = 0.4, max_len: int = 16):
        self.threshold, self.max_len = threshold, max_len
        self.name, self.stop_reason = f"confidence:{threshold:g}", ""

    @classmethod
    def parse(cls, arg: str | None) -> float:
        threshold = 0.4 if arg is None else number(arg, float, "confidence:T")
        if not 0.0 <= threshold <= 1.0:
            raise SpecScopeError(f"confidence:T needs 0 <= T <= 1, got {threshold}")
        return threshold

    @classmethod
    def build(cls, threshold: float, pair: ModelPair | None = None) -> ConfidenceLength:
        return cls(threshold)

    def next_chunk(self, so_far: DraftSoFar) -> int:
        n = len(so_far.tokens)
        if n and so_far.token_probs[-1] < self.threshold:
            self.stop_reason = "confidence"
            return 0
        if n >= min(self.max_len, so_far.budget):
            self.stop_reason = "max" if n >= self.max_len else "budget"
            return 0
        return 1

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        return {"threshold": self.threshold}
