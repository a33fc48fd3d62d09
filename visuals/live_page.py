"""The live tab's text and HTML, built from a :class:`~spec_core.serve.live.LiveFrame` (no gradio: ``app.py`` wires it).

A lane is three pieces: its heading (method, family, a link to the glossary), its counters (speed measured and
predicted, τ, α) and its coloured tokens, with the first divergence from ``ar`` marked where there is one.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from spec_core.core.types import RoundEvent
from spec_core.engine.methods import is_lossy, is_plain
from spec_core.serve.live import LiveFrame
from visuals import tokens
from visuals.glossary import lane_header
from visuals.lossy import lossy_note

PRECISION_INFO = (
    "auto: the arithmetic this machine runs fastest, measured once (int8 weights where bfloat16 has no native "
    "support). On a CPU every target pass is batch-invariant, so at temperature 0 every lossless lane writes ar's "
    "text at every precision; on a GPU a k-token pass may round a near-tie differently from a 1-token step. "
    "float32 is exact arithmetic, and slower."
)
EMPTY_LANE = ("### –", "", "")

# Run in the browser at Generate's click (before the server answers): the status line and the lanes come into view,
# so the first second shows the run starting (the Examples table pushes them below the fold at 1400×900).
SCROLL_TO_STATUS = (
    "() => { const s = document.getElementById('status');"
    " if (s) window.scrollTo({top: s.getBoundingClientRect().top + window.scrollY - 120}); }"
)


def verdict_html(speed, done: bool) -> str:
    """The lane's verdict sentence, under its counters once the run is done (quiet while it runs)."""
    if not done or not speed.verdict:
        return ""
    cls = "spec-verdict" + (" spec-verdict-slow" if (speed.measured or 1) < 1 and not speed.within_noise else "")
    return f'<div class="{cls}" data-testid="verdict">{html.escape(speed.verdict)}</div>'


def lane_parts(frame: LiveFrame, method: str, show_rejected: bool = False) -> tuple[str, str, str]:
    """(heading markdown, counters HTML, tokens HTML) of one lane."""
    if method in frame.errors:
        return lane_header(method), "", f'<div class="spec-error">{html.escape(frame.errors[method])}</div>'
    speed = frame.speeds[method]
    counters = tokens.counters_html(frame.stats(method), speed) + verdict_html(speed, frame.done)
    events = frame.lanes.get(method, ())
    marks = {at: note + lane_pass_line(events, method, at) for at, note in frame.marks(method).items()}
    body = tokens.tokens_html(events, show_rejected, "waiting for the first round…", marks, frame.temperature)
    notes = divergence_note(frame, method) + lossy_note(method, frame.lanes, frame.temperature, frame.done)
    return lane_header(method), counters, body + notes


def emitted_span(events: Sequence[RoundEvent], position: int) -> tokens.TokenSpan | None:
    """The ``position``-th emitted token of a lane (0 = its first new token)."""
    emitted = [s for s in tokens.token_spans(events) if s.emitted]
    return emitted[position] if 0 <= position < len(emitted) else None


def lane_pass_line(events: Sequence[RoundEvent], method: str, position: int) -> str:
    """For a lane's own marked token: the p(x) its own verification pass gave (its tooltip's number), which the
    note's numbers (ar's 1-token step) need not equal: that difference is the rounding the note is about."""
    span = emitted_span(events, position) if not is_plain(method) else None
    if span is None or span.p is None or is_lossy(method):  # a lossy lane parts by its rule, not by rounding
        return ""
    return (
        f"\nIn {method}'s own verification pass the target gave {span.text!r} p={span.p:.3f} (the p(x) below): "
        "the same target, rounded differently."
    )


def divergence_note(frame: LiveFrame, method: str) -> str:
    """One line under a lane that parted from ``ar`` (the full story is in the marked token's tooltip). The
    target's two best tokens come from ar's 1-token step; the lane's own token has the p(x) its own pass gave."""
    d = frame.divergences.get(method)
    if d is None or not frame.done:
        return ""
    (a, pa), (b, pb) = d.best
    span = emitted_span(frame.lanes.get(method, ()), d.position)
    own = (
        f" In {html.escape(method)}'s {d.verify_width}-token verification pass the target gave "
        f"{html.escape(repr(span.text))} p = {span.p:.3f} instead."
        if span is not None and span.p is not None
        else ""
    )
    return (
        f'<p class="spec-diverge-note">◆ Parts from ar at new token {d.position + 1}. In ar\'s 1-token step the '
        f"target's two best tokens there are {html.escape(repr(a))} (p = {pa:.3f}) and {html.escape(repr(b))} "
        f"(p = {pb:.3f}), {d.logit_gap:.3f} apart in logit.{own} A near-tie that {html.escape(frame.arithmetic or frame.precision)} "
        "rounding flipped; hover or tap the marked token.</p>"
    )


def lanes_parts(frame: LiveFrame, slots: int, show_rejected: bool = False) -> list[str]:
    """Every lane slot's three pieces, flattened; slots beyond the frame's methods are empty."""
    out: list[str] = []
    for i in range(slots):
        out += lane_parts(frame, frame.methods[i], show_rejected) if i < len(frame.methods) else EMPTY_LANE
    return out


def step_lanes(frame: LiveFrame | None) -> list[str]:
    """The lanes the step-through offers: those with rounds, drafting ones first."""
    if frame is None:
        return []
    have = [m for m in frame.methods if frame.lanes.get(m)]
    return sorted(have, key=is_plain)


def last_round(events: Sequence[RoundEvent]) -> int:
    return max(len(events) - 1, 0)
