"""Why a token is there: the rule that decided it, in one sentence for the token's tooltip.

A token's numbers (p(x), q(x), an acceptance probability) do not say on their own why it was kept: at
temperature 0 the lossless rule never compares p with q, it keeps a draft exactly when the draft is the
target's own top token (so "acceptance probability = 1.000" beside p = 0.37 < q = 0.56 is no contradiction).
Each verifier family has one function here, keyed like :mod:`visuals.views` by the head of a method part:
``lossless`` (the default), ``static`` and ``diversed`` (an ensemble ν = w·p + (1 − w)·q, DIVERSED,
arXiv 2604.07622), ``lenient`` (min(1, p/(L·q))) and ``tree`` (EAGLE-2's walk down a token tree). A new
verifier adds its sentence with :func:`register_reason`.

The functions read only the round's event: the span's kind, p, q and acceptance probability, the verifier's
trace (w, ν(x), L, the temperature-0 definition ``t0``) and the target's own token of the round (the one that
replaced a rejected draft).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent
from spec_core.engine.methods import spec_of
from spec_core.verifiers import VERIFIERS
from spec_core.verifiers.lossless import LosslessVerifier

if TYPE_CHECKING:  # tokens imports this module
    from visuals.tokens import TokenSpan

Reason = Callable[["TokenSpan", RoundEvent, float], str]
REASONS: dict[str, Reason] = {}
DISCARDED = "Not checked: it came after the round's first rejection, so the text it continued was already cut."


def register_reason(head: str, reason: Reason) -> None:
    """The sentence-maker for tokens decided by verifier ``head`` (a method part's head, e.g. ``"static"``)."""
    REASONS[head] = reason


def _n(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:.3f}" if x == 0 or x >= 0.0005 else f"{x:.1e}"


def _piece(text: str) -> str:
    return repr(text)


def verifier_head(method: str) -> str:
    """The part of ``method`` whose rule decides tokens: ``ar``, a registered verifier, ``tree``, else lossless."""
    heads = spec_of(method).heads
    if "ar" in heads:
        return "ar"
    return next((h for h in heads if h in REASONS and h != "lossless"), "lossless")


def token_reason(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    """One sentence: the rule that put ``span`` where it is (or struck it through)."""
    if span.discarded:
        return DISCARDED
    return REASONS[verifier_head(event.method)](span, event, temperature)


def verifier_of(method: str) -> type[Any]:
    """The registry class of ``method``'s verifier (the lossless rule for ar and a name that does not parse)."""
    try:
        spec = spec_of(method)
    except SpecScopeError:
        return LosslessVerifier
    return VERIFIERS[spec.verifier.family] if spec.verifier is not None else LosslessVerifier


def recovered_from(method: str) -> str:
    """Where ``method``'s verifier draws a recovered token at temperature > 0, in its own words (a verifier that
    says nothing: the lossless rule's words only if it is lossless)."""
    cls = verifier_of(method)
    if getattr(cls, "recovers", ""):
        return cls.recovers
    return LosslessVerifier.recovers if cls.lossless else f"the {cls.prefix} verifier's own rule (lossy)"


def recovered_title(method: str) -> str:
    """The tooltip's header of a recovered token, from the verifier that drew it."""
    cls = verifier_of(method)
    if getattr(cls, "recovered_title", ""):
        return cls.recovered_title
    return LosslessVerifier.recovered_title if cls.lossless else "recovered token: at the first rejection (lossy)"


def _target_tokens(span: TokenSpan, event: RoundEvent, temperature: float, top: str) -> str:
    """Recovered, bonus and plain tokens: chosen by ``top`` at temperature 0; a recovered one sampled from where
    the round's verifier says (:func:`recovered_from`)."""
    greedy = temperature == 0
    if span.kind == "target":
        return (
            "Greedy decoding (temperature 0): the target's most likely next token."
            if greedy
            else f"Sampled from the target's distribution p at temperature {temperature:g}."
        )
    if span.kind == "bonus":
        return "Every draft passed, so the target's verification pass already held the next position: " + (
            "its most likely token there, for free." if greedy else "a token sampled from p there, for free."
        )
    replaced = rejected_piece(event)
    which = f"The draft {_piece(replaced)} at this position" if replaced is not None else "The draft at this position"
    return (
        f"{which} was rejected; this is {top} there."
        if greedy
        else f"{which} was rejected; this token is drawn from {recovered_from(event.method)}."
    )


def rejected_piece(event: RoundEvent) -> str | None:
    """The text of the draft a recovered token replaced: the chain's first draft the verifier did not keep (None for
    a tree, whose rejected nodes are the view's, or a round that rejected nothing)."""
    if event.tree is not None or event.accepted >= event.draft_len:
        return None
    return event.draft_pieces[event.accepted]


def _lossless(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    if span.kind in ("target", "bonus", "recovered"):
        return _target_tokens(span, event, temperature, "the target's own most likely token")
    a = span.accept_prob
    if temperature == 0:
        if span.kind == "accepted":
            return (
                "Accepted by the greedy rule (temperature 0): it is the target's own most likely token here, so "
                "the target alone would have written it too. The rule does not compare p(x) with q(x)."
            )
        return (
            f"Rejected by the greedy rule: the target's most likely token here is {_piece(event.next_piece)}, "
            "which replaces it."
        )
    rule = f"min(1, p(x)/q(x)) = min(1, {_n(span.p)}/{_n(span.q)}) = {_n(a)}"
    if span.kind == "accepted":
        return f"Accepted with probability {rule}, and the random draw fell under it."
    return (
        f"Rejected: it was kept only with probability {rule}, and the random draw fell above it; "
        f"{_piece(event.next_piece)} was drawn in its place."
    )


def _ar(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    return _target_tokens(span, event, temperature, "the target's own most likely token")


def _trace_at(event: RoundEvent, key: str, i: int) -> float | None:
    values = event.verifier_trace.get(key, ())
    return float(values[i]) if i < len(values) else None


def _ensemble(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    """``static:W`` and ``diversed``: the drafts are checked against ν = w·p + (1 − w)·q instead of p."""
    if span.kind in ("target", "bonus", "recovered"):
        top = "the most likely token of ν = w·p + (1 − w)·q" if span.kind == "recovered" else ""
        return ("Lossy verifier: " if span.kind == "recovered" else "") + _target_tokens(
            span, event, temperature, top or "the target's own most likely token"
        )
    i = span.position - 1
    w, nu = _trace_at(event, "w", i), _trace_at(event, "nu_x", i)
    mix = f"ν = w·p + (1 − w)·q with w = {_n(w)} (ν(x) = {_n(nu)})"
    onehot = event.verifier_trace.get("t0") == "onehot"
    if temperature == 0 and onehot:
        if span.kind == "accepted":
            return (
                f"Lossy rule (temperature 0, t0=onehot): kept because it is the target's top token, or else by a "
                f"coin that keeps a draft with probability 1 − w = {_n(None if w is None else 1 - w)}."
            )
        return "Lossy rule (t0=onehot): not the target's top token, and the coin (keep with 1 − w) said no."
    if temperature == 0:
        if span.kind == "accepted":
            return (
                f"Lossy rule (temperature 0): kept because it is the most likely token of the mix {mix}; the "
                "target alone might have chosen another."
            )
        return f"Lossy rule: the mix {mix} prefers {_piece(event.next_piece)} here, which replaces it."
    rule = f"min(1, ν(x)/q(x)) = min(1, {_n(nu)}/{_n(span.q)}) = {_n(span.accept_prob)}"
    verdict = "the random draw fell under it" if span.kind == "accepted" else "the random draw fell above it"
    return f"Lossy rule: checked against the mix {mix}, accepted with probability {rule}; {verdict}."


def _lenient(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    if span.kind in ("target", "bonus", "recovered"):
        return ("Lossy verifier: " if span.kind == "recovered" else "") + _target_tokens(
            span, event, temperature, "the target's own most likely token"
        )
    L = event.verifier_trace.get("leniency")
    lenient = f"{L:g}" if isinstance(L, (int, float)) else "L"
    if temperature == 0 and event.verifier_trace.get("t0") == "onehot":
        return _lossless(span, event, temperature)
    if temperature == 0:
        if span.kind == "accepted":
            return (
                f"Lenient rule (temperature 0): kept because p(x) ≥ L·q(x) ({_n(span.p)} ≥ {lenient} × "
                f"{_n(span.q)}) or it is the target's top token; lossy."
            )
        return f"Lenient rule: p(x) < L·q(x) and not the target's top token; {_piece(event.next_piece)} replaces it."
    rule = f"min(1, p(x)/(L·q(x))) = min(1, {_n(span.p)}/({lenient} × {_n(span.q)})) = {_n(span.accept_prob)}"
    verdict = "the random draw fell under it" if span.kind == "accepted" else "the random draw fell above it"
    return f"Lenient (lossy) rule: accepted with probability {rule}; {verdict}."


def _tree(span: TokenSpan, event: RoundEvent, temperature: float) -> str:
    if span.kind in ("target", "bonus", "recovered"):
        return _target_tokens(span, event, temperature, "the target's own most likely token after the accepted path")
    if temperature == 0:
        if span.kind == "accepted":
            return (
                "On the tree's accepted path: at its parent this candidate equals the target's most likely token "
                "(greedy walk down the tree)."
            )
        return f"A candidate the target tried and rejected: its most likely token here is {_piece(event.next_piece)}."
    if span.kind == "accepted":
        return (
            f"On the tree's accepted path: tried at its node and accepted with probability {_n(span.accept_prob)} "
            "(the target's p′(x), renormalised after any sibling it rejected)."
        )
    return f"Tried at its node and rejected (it was accepted with probability {_n(span.accept_prob)})."


register_reason("lossless", _lossless)
register_reason("ar", _ar)
register_reason("static", _ensemble)
register_reason("diversed", _ensemble)
register_reason("lenient", _lenient)
register_reason("tree", _tree)
