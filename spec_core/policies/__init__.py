"""Draft-length policies (how many tokens to draft), one module per family, and their registry.

A new policy is one class (``prefix``, ``parse``, ``build``, and the :class:`~.base.DraftLengthPolicy`
methods) plus one line in :data:`POLICIES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spec_core.core.cost_model import CostProfile
from spec_core.core.types import PartSpec
from spec_core.policies.base import DraftLengthPolicy, DraftSoFar
from spec_core.policies.confidence import ConfidenceLength
from spec_core.policies.cost import CostLength
from spec_core.policies.fixed import FixedLength, HeuristicLength, own_length
from spec_core.policies.pacer import PacerLength

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

__all__ = ["POLICIES", "DraftLengthPolicy", "DraftSoFar", "make_policy", "own_length", "parse_policy"]

POLICIES: dict[str, type[Any]] = {
    cls.prefix: cls for cls in (FixedLength, HeuristicLength, ConfidenceLength, PacerLength, CostLength)
}


def parse_policy(text: str) -> PartSpec:
    """``"fixed:4"`` → a validated :class:`PartSpec` (nothing is loaded)."""
    return PartSpec.parse(text, POLICIES, "draft-length policy")


def make_policy(
    part: PartSpec | str, pair: ModelPair | None = None, costs: CostProfile | None = None
) -> DraftLengthPolicy:
    """A fresh policy for one generation (policies keep per-generation state), built with the loaded pair and
    the run's cost profile (for a policy that prices its length: ``cost``, ``pacer`` with t=auto)."""
    part = parse_policy(part) if isinstance(part, str) else part
    return part.build(POLICIES, pair, costs)
