"""Why a token is there: the rule that decided it, in one sentence for the token's tooltip.

A token's numbers (p(x), q(x), an acceptance probability) do not say on their own why it was kept: at
temperature 0 the lossless rule never compares p with q, it keeps a draft exactly when the draft is the
target's own top token (so "acceptance probability = 1.000" beside p = 0.37 < q = 0.56 is no contradiction).

The sentence is the round's verifier's own (its registry class's ``reason``: ``lossless``, with EAGLE-2's walk on
a token tree; ``static`` and ``diversed``, an ensemble ν = w·p + (1 − w)·q, DIVERSED, arXiv 2604.07622;
``lenient``, min(1, p/(L·q))). A verifier that writes none is explained from its class's ``lossless``
(:mod:`spec_core.core.words`), so a new lossy verifier is never called lossless here.

The sentences read only the round's event: the span's kind, p, q and acceptance probability, the verifier's
trace (w, ν(x), L, the temperature-0 definition ``t0``) and the target's own token of the round (the one that
replaced a rejected draft).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spec_core.core import words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent
from spec_core.engine.methods import spec_of
from spec_core.verifiers import VERIFIERS
from spec_core.verifiers.lossless import LosslessVerifier

if TYPE_CHECKING:  # tokens imports this module
    from visuals.tokens import TokenSpan

DISCARDED = "Not checked: it came after the round's first rejection, so the text it continued was already cut."
rejected_piece = words.rejected_piece


def verifier_of(method: str) -> type[Any]:
    """The registry class of ``method``'s verifier (the lossless rule for ar and a name that does not parse)."""
    try:
        spec = spec_of(method)
    except SpecScopeError:
        return LosslessVerifier
    return VERIFIERS[spec.verifier.family] if spec.verifier is not None else LosslessVerifier


def token_reason(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    """One sentence: the rule that put ``span`` where it is (or struck it through), in its verifier's words."""
    if span.discarded:
        return DISCARDED
    return words.reason(verifier_of(event.method), span, event, temperature)


def recovered_from(method: str) -> str:
    """Where ``method``'s verifier draws a recovered token at temperature > 0, in its own words."""
    return words.recovers(verifier_of(method))


def recovered_title(method: str) -> str:
    """The tooltip's header of a recovered token, from the verifier that drew it."""
    return words.recovered_title(verifier_of(method))
