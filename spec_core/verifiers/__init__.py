"""Verifiers (which drafts to accept), one module per family, and their registry.

A new verifier is one class (``prefix``, ``parse``, ``build``, ``verify``; see :mod:`.base`) plus one line in
:data:`VERIFIERS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spec_core.core.types import PartSpec
from spec_core.verifiers.base import Verdict, Verifier
from spec_core.verifiers.diversed import DiversedVerifier
from spec_core.verifiers.lenient import LenientVerifier
from spec_core.verifiers.lossless import LosslessVerifier
from spec_core.verifiers.static import StaticVerifier

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

__all__ = ["VERIFIERS", "Verdict", "Verifier", "make_verifier", "parse_verifier"]

VERIFIERS: dict[str, type[Any]] = {
    cls.prefix: cls for cls in (LosslessVerifier, LenientVerifier, StaticVerifier, DiversedVerifier)
}


def parse_verifier(text: str) -> PartSpec:
    """``"lossless"`` → a validated :class:`PartSpec` (nothing is loaded)."""
    return PartSpec.parse(text, VERIFIERS, "verifier")


def make_verifier(part: PartSpec | str, pair: ModelPair | None = None) -> Verifier:
    """The verifier for one generation, built with the loaded pair (a learned verifier finds its head there)."""
    part = parse_verifier(part) if isinstance(part, str) else part
    return part.build(VERIFIERS, pair)
