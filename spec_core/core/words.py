"""A part's words, read from its class: the rule in force, a token's reason, the glossary's line, the lane's phrase.

Each drafter, draft-length policy and verifier class carries its own words (docs/ARCHITECTURE.md, "The three
protocols"), so the views (``visuals/``) never guess what a method means from its name:

- ``about``: a phrase for the lane's header (already the method list's);
- ``glossary``: ``(term, definition)`` rows for the glossary (a part may leave it out: it then gets one row
  written from ``about`` and, for a verifier, whether it is ``lossless``);
- ``rule(temperature) -> str`` (a classmethod): the step-through's "Rule in force" sentence for its part;
- a verifier's ``reason(span, event, temperature) -> str`` (a classmethod): why a token it decided is where it
  is, in the token's tooltip (accepted, rejected, recovered, bonus or the target's own); the lossless rule's
  (Leviathan et al. 2023, arXiv 2211.17192) and the lossy fallback's are here, beside the pieces they share.

A verifier that writes none of these is still explained by what its class says of itself: ``lossless = False``
makes it "lossy" in the tooltip, the header and the glossary (``tests/unit/test_part_words.py`` registers such a
toy). Pure text: nothing here imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from spec_core.core.types import RoundEvent


class TokenFacts(Protocol):
    """What a reason reads of one shown token (``visuals.tokens.TokenSpan`` is one)."""

    kind: str  # "accepted" | "rejected" | "recovered" | "bonus" | "target"
    position: int  # 1-based position in the round's draft
    p: float | None
    q: float | None
    accept_prob: float | None


TARGET_TOP = "the target's own most likely token"
LOSSLESS_RECOVERS = (  # where the lossless rule draws a recovered token at temperature > 0
    "norm(max(0, p − q)), the part of the target's distribution the draft had under-covered, which keeps the "
    "output exactly the target's"
)
LOSSLESS_RECOVERED_TITLE = "recovered token: the target's own, at the first rejection"


def num(x: float | None) -> str:
    """A probability in a sentence: three decimals, two significant digits below 0.0005, ``?`` when unknown."""
    if x is None:
        return "?"
    return f"{x:.3f}" if x == 0 or x >= 0.0005 else f"{x:.1e}"


def piece(text: str) -> str:
    return repr(text)


def trace_at(event: RoundEvent, key: str, i: int) -> float | None:
    """The verifier's per-draft trace value ``key`` at draft ``i`` (None when the trace has none)."""
    values = event.verifier_trace.get(key, ())
    return float(values[i]) if i < len(values) else None


def rejected_piece(event: RoundEvent) -> str | None:
    """The text of the draft a recovered token replaced: the chain's first draft the verifier did not keep (None for
    a tree, whose rejected nodes are the view's, or a round that rejected nothing)."""
    if event.tree is not None or event.accepted >= event.draft_len:
        return None
    return event.draft_pieces[event.accepted]


def is_lossless(cls: type[Any]) -> bool:
    return bool(getattr(cls, "lossless", True))


def prefix_of(cls: type[Any]) -> str:
    return str(getattr(cls, "prefix", cls.__name__))


def recovers(cls: type[Any]) -> str:
    """Where verifier ``cls`` draws a recovered token at temperature > 0, in its own words (one that says nothing:
    the lossless rule's words only if it is lossless)."""
    said = getattr(cls, "recovers", "")
    if said:
        return str(said)
    return LOSSLESS_RECOVERS if is_lossless(cls) else f"the {prefix_of(cls)} verifier's own rule (lossy)"


def recovered_title(cls: type[Any]) -> str:
    """The tooltip's header of a token verifier ``cls`` recovered."""
    said = getattr(cls, "recovered_title", "")
    if said:
        return str(said)
    return LOSSLESS_RECOVERED_TITLE if is_lossless(cls) else "recovered token: at the first rejection (lossy)"


def target_tokens(span: TokenFacts, event: RoundEvent, temperature: float, top: str, cls: type[Any]) -> str:
    """Recovered, bonus and plain tokens: chosen by ``top`` at temperature 0; a recovered one sampled from where
    verifier ``cls`` says (:func:`recovers`)."""
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
    which = f"The draft {piece(replaced)} at this position" if replaced is not None else "The draft at this position"
    return (
        f"{which} was rejected; this is {top} there."
        if greedy
        else f"{which} was rejected; this token is drawn from {recovers(cls)}."
    )


def lossless_reason(span: TokenFacts, event: RoundEvent, temperature: float, cls: type[Any]) -> str:
    """The lossless rule's sentence (greedy: accept iff the target's top token; sampled: min(1, p(x)/q(x)))."""
    if span.kind in ("target", "bonus", "recovered"):
        return target_tokens(span, event, temperature, TARGET_TOP, cls)
    a = span.accept_prob
    if temperature == 0:
        if span.kind == "accepted":
            return (
                "Accepted by the greedy rule (temperature 0): it is the target's own most likely token here, so "
                "the target alone would have written it too. The rule does not compare p(x) with q(x)."
            )
        return (
            f"Rejected by the greedy rule: the target's most likely token here is {piece(event.next_piece)}, "
            "which replaces it."
        )
    rule = f"min(1, p(x)/q(x)) = min(1, {num(span.p)}/{num(span.q)}) = {num(a)}"
    if span.kind == "accepted":
        return f"Accepted with probability {rule}, and the random draw fell under it."
    return (
        f"Rejected: it was kept only with probability {rule}, and the random draw fell above it; "
        f"{piece(event.next_piece)} was drawn in its place."
    )


def lossy_reason(span: TokenFacts, event: RoundEvent, temperature: float, cls: type[Any]) -> str:
    """The sentence of a lossy verifier that writes none of its own: its rule decided, and it is not the target's."""
    name = prefix_of(cls)
    if span.kind in ("target", "bonus", "recovered"):
        return ("Lossy verifier: " if span.kind == "recovered" else "") + target_tokens(
            span, event, temperature, TARGET_TOP, cls
        )
    chance = f" (acceptance probability {num(span.accept_prob)})" if span.accept_prob is not None else ""
    if span.kind == "accepted":
        return (
            f"Kept by the {name} verifier's own rule{chance}; lossy: it may keep drafts the target alone would not "
            "have written."
        )
    return f"Rejected by the {name} verifier's own rule (lossy){chance}; {piece(event.next_piece)} replaces it."


def reason(cls: type[Any], span: TokenFacts, event: RoundEvent, temperature: float) -> str:
    """Why verifier ``cls`` put ``span`` where it is: its own ``reason``, else the lossless or the lossy fallback."""
    own = getattr(cls, "reason", None)
    if own is not None:
        return str(own(span, event, temperature))
    fallback = lossless_reason if is_lossless(cls) else lossy_reason
    return fallback(span, event, temperature, cls)


def rule(cls: type[Any], temperature: float) -> str:
    """The part's "Rule in force" sentence ("" for a part with nothing of its own to say, e.g. the pair's draft);
    a verifier that writes none says whether it is lossy."""
    own = getattr(cls, "rule", None)
    if own is not None:
        return str(own(temperature))
    if hasattr(cls, "lossless"):  # a verifier
        kept = (
            "the output keeps the target's distribution"
            if is_lossless(cls)
            else "lossy: the output is not the target's"
        )
        return f"Verification: the {prefix_of(cls)} verifier's own rule ({kept})."
    return ""


def about(cls: type[Any]) -> str:
    """The lane header's phrase for the part; a verifier that writes none says whether it is lossy."""
    said = getattr(cls, "about", "")
    if said:
        return str(said)
    if hasattr(cls, "lossless"):
        return f"{'lossless' if is_lossless(cls) else 'lossy'}: the {prefix_of(cls)} verifier"
    return ""


def glossary(cls: type[Any]) -> tuple[tuple[str, str], ...]:
    """The part's glossary rows: its own, else one written from :func:`about` (and whether a verifier is lossy)."""
    own = getattr(cls, "glossary", None)
    if own is not None:
        return tuple(own)
    what = about(cls)
    if hasattr(cls, "lossless") and not is_lossless(cls) and "lossy" not in what:
        what = f"lossy: {what}" if what else "a lossy verifier"
    return ((prefix_of(cls), what),) if what else ()
