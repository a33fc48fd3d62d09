"""Draft-length policies (how many tokens to draft), one module per family, and their registry.

A new policy is one class (``prefix``, ``parse``, ``build``, and the :class:`~.base.DraftLengthPolicy`
methods) plus one line in :data:`POLICIES`.
"""

from __future__ import annotations

from spec_core.errors import SpecScopeError
from spec_core.policies.base import DraftLengthPolicy, DraftSoFar
from spec_core.policies.confidence import ConfidenceLength
from spec_core.policies.fixed import FixedLength, HeuristicLength
from spec_core.policies.pacer import PacerLength
from spec_core.types import PartSpec

__all__ = ["POLICIES", "DraftLengthPolicy", "DraftSoFar", "make_policy", "parse_policy"]

POLICIES: dict[str, type] = {cls.prefix: cls for cls in (FixedLength, HeuristicLength, ConfidenceLength, PacerLength)}


def parse_policy(text: str) -> PartSpec:
    """``"fixed:4"`` → a validated :class:`PartSpec` (nothing is loaded)."""
    head, _, arg = text.partition(":")
    if head not in POLICIES:
        raise SpecScopeError(f"unknown draft-length policy {head!r}; known: {sorted(POLICIES)}")
    return PartSpec(text, head, POLICIES[head].parse(arg or None))


def make_policy(part: PartSpec | str, pair=None) -> DraftLengthPolicy:
    """A fresh policy for one generation (policies keep per-generation state), built with the loaded pair."""
    part = parse_policy(part) if isinstance(part, str) else part
    return POLICIES[part.family].build(part.params, pair)
