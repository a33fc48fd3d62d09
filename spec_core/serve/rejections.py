"""Why a draft was rejected: one of three causes, read from both models' top tokens at the rejection.

A rejected draft x (the round's first draft the verifier did not keep) is compared with the *target's token* t,
the target's most likely token there (the recovered token at temperature 0), using the event's
:class:`~spec_core.core.types.Rejection` (both models' top-5, temperature-1 softmax). The rule, in this order:

1. ``tokenization split`` — x and t spell the same text, split into tokens differently: their pieces are equal
   up to leading spaces (``' bees'`` / ``'bees'``), or one is a prefix of the other and the side that wrote the
   shorter one went on to spell the longer (``'Ray'`` then ``'leigh'`` against ``'Rayleigh'``: the draft's later
   drafts, or the text the lane wrote after the target's token). Without that evidence a prefix is no split: in a
   real run the draft's ``' a'`` (its last draft) against the target's ``' and'`` was a different word. A draft
   equal to t (a rejection of the target's own choice, possible when sampling) is no split.
2. ``near-tie`` — the target itself hesitated: x is among its top-5 and p(t) − p(x) < :data:`NEAR_TIE_MARGIN`
   (so the gap between the target's two best tokens is under the margin too).
3. ``real disagreement`` — otherwise: the target wanted something else. When sampling, the draft can also be
   rejected on the target's own token (the draft was surer of it than the target, q(x) > p(x)): the two
   distributions disagree, and it counts here.

Pure functions of pieces and probabilities: no model, no tokenizer.
"""

from __future__ import annotations

from typing import Literal

Cause = Literal["tokenization split", "near-tie", "real disagreement"]
CAUSES: tuple[Cause, ...] = ("tokenization split", "near-tie", "real disagreement")

NEAR_TIE_MARGIN = 0.1
"""A rejection is a near-tie when the target's probability of its own token exceeds its probability of the draft's
token by less than this (temperature-1 softmax, probability units): the target was nearly undecided between the
two, e.g. 0.42 against 0.35. One tenth keeps a tie to what a small change of context or of rounding (a bfloat16
verification pass, docs/LOG.md) can flip."""


def _text(piece: str, after: str = "") -> str:
    """The text from a token on, its leading spaces dropped (a word-initial space is where tokenizers differ)."""
    return (piece + after).lstrip(" ")


def is_split(draft_piece: str, target_piece: str, draft_after: str = "", target_after: str = "") -> bool:
    """Whether two different tokens spell the same text split differently: pieces equal up to leading spaces, or
    one piece a prefix of the other that its side's next text (``*_after``: what each model wrote after its
    token, "" when unknown) completes into the longer one."""
    a, b = _text(draft_piece), _text(target_piece)
    if not a or not b:
        return False
    if a == b:
        return True
    if not (a.startswith(b) or b.startswith(a)):
        return False
    longer = max(len(a), len(b))  # both texts must reach past the longer piece, and agree up to it
    a, b = _text(draft_piece, draft_after), _text(target_piece, target_after)
    return len(a) >= longer and len(b) >= longer and a[:longer] == b[:longer]


def cause(
    draft_token: int,
    draft_piece: str,
    target_ids: tuple[int, ...],
    target_pieces: tuple[str, ...],
    target_probs: tuple[float, ...],
    draft_after: str = "",
    target_after: str = "",
) -> Cause:
    """The cause of one rejection: the rejected draft (token, piece), the target's top tokens there (ids, pieces,
    p; most likely first) and, when known, the text each model wrote after the rejected position."""
    target = target_ids[0]
    if draft_token != target and is_split(draft_piece, target_pieces[0], draft_after, target_after):
        return "tokenization split"
    if draft_token != target and draft_token in target_ids:
        p_draft = target_probs[target_ids.index(draft_token)]
        if target_probs[0] - p_draft < NEAR_TIE_MARGIN:
            return "near-tie"
    return "real disagreement"
