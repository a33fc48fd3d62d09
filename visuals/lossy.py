"""Lossy lanes, said so: a badge in the heading and how far the lane's text is from ``ar``'s.

A lossy verifier (``static:W``, ``lenient:L``, ``diversed``; arXiv 2604.07622) keeps more drafts by giving up the
target's exact output, so its speedup is not comparable with a lossless lane's without saying what it cost. At
temperature 0 ``ar``'s text is the target's own answer; the note under a lossy lane gives the first new token
where the two part and the share of the lane's tokens that are not in ``ar``'s text (aligned with
:class:`difflib.SequenceMatcher` on token ids, so one inserted word does not count the whole tail as different).
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence
from dataclasses import dataclass

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent
from spec_core.engine.methods import is_lossy

BADGE = '<span class="spec-badge spec-badge-lossy">lossy</span>'


@dataclass(frozen=True)
class Distance:
    """How far a lane's new tokens are from ``ar``'s."""

    first: int | None  # index of the first new token that differs (None: no difference in the shorter text)
    differing: int  # the lane's tokens outside the longest common blocks with ar's tokens
    total: int  # the lane's new tokens
    lane_piece: str = ""  # the lane's token at ``first``
    ar_piece: str = ""  # ar's token there

    @property
    def share(self) -> float:
        return self.differing / self.total if self.total else 0.0


def _emitted(events: Sequence[RoundEvent]) -> tuple[list[int], list[str]]:
    """(token ids, pieces) of a lane's emitted tokens, in order."""
    from visuals.tokens import token_spans

    ids = [t for e in events for t in e.emitted]
    pieces = [s.text for s in token_spans(events) if s.emitted]
    return ids, pieces


def distance(lane: Sequence[RoundEvent], ar: Sequence[RoundEvent]) -> Distance:
    """The first differing new token and the share of the lane's tokens not matched in ``ar``'s."""
    mine, my_pieces = _emitted(lane)
    base, base_pieces = _emitted(ar)
    n = min(len(mine), len(base))
    first = next((k for k in range(n) if mine[k] != base[k]), None)  # a prefix (a run cut short) has not parted
    matched = sum(b.size for b in difflib.SequenceMatcher(None, mine, base, autojunk=False).get_matching_blocks())
    at = lambda pieces: pieces[first] if first is not None and first < len(pieces) else "(end)"  # noqa: E731
    return Distance(first, len(mine) - matched, len(mine), at(my_pieces), at(base_pieces))


def lossy_note(method: str, lanes, temperature: float, done: bool) -> str:
    """One paragraph under a lossy lane: its text is not the target's, and (temperature 0, an ``ar`` lane) how far."""
    try:
        if not is_lossy(method):
            return ""
    except SpecScopeError:  # a lane whose name does not parse (its error shows once the run has looked): no note
        return ""
    lead = "<b>Lossy</b>: this verifier keeps drafts the target alone would not have written, so its text is not ar's"
    ar = lanes.get("ar")
    if not ar:
        return (
            f'<p class="spec-lossy-note">{lead}; add an ar lane to see how far it is from the target\'s own answer.</p>'
        )
    if temperature != 0:  # each lane draws its own sample: a distance from ar's would measure chance, not the verifier
        return (
            f'<p class="spec-lossy-note">{lead}. At temperature {temperature:g} every lane samples its own text, so '
            "its distance from ar's sample is not reported; at temperature 0 it is.</p>"
        )
    if not done:
        return f'<p class="spec-lossy-note">{lead}; how far it is from ar shows when both finish.</p>'
    d = distance(lanes.get(method, ()), ar)
    if d.first is None:
        same = f"all {d.total} tokens equal ar's" if not d.differing else "its tokens equal ar's as far as both go"
        return f'<p class="spec-lossy-note">{lead}, but this time {same}.</p>'
    return (
        f'<p class="spec-lossy-note" data-first="{d.first}" data-differing="{d.differing}">{lead}: it first parts '
        f"from ar at new token {d.first + 1} ({html.escape(repr(d.lane_piece))} where ar wrote "
        f"{html.escape(repr(d.ar_piece))}), and {d.differing} of its {d.total} tokens ({100 * d.share:.0f}%) are "
        "not in ar's text.</p>"
    )
