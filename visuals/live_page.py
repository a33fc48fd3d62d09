"""The live tab's text and HTML, built from a :class:`~spec_core.live.LiveFrame` (no gradio: ``app.py`` wires it).

A lane is three pieces: its heading (method, family, a link to the glossary), its counters (speed measured and
predicted, τ, α) and its coloured tokens, with the first divergence from ``ar`` marked where there is one.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from spec_core.live import LiveFrame
from spec_core.types import RoundEvent
from visuals import tokens
from visuals.glossary import lane_header

INTRO = (
    "# SpecScope\nA small **draft** model proposes tokens; the **target** checks them all in one forward pass and "
    "keeps the longest prefix it agrees with, plus one token of its own. With lossless verification the output "
    "follows the target's own distribution: at temperature 0 and in float32 each lane writes exactly the text "
    "of `ar` (the target alone). In bfloat16 a pass over k tokens rounds differently from a one-token step, so "
    "a near-tie can flip and a lane part from `ar`: the page marks where, and why (◆)."
)
PRECISION_INFO = (
    "auto: the arithmetic this machine runs fastest, measured once (int8 weights where bfloat16 has no native "
    "support). Fast precisions round near-ties differently in a k-token pass and a 1-token step; float32 is "
    "exact (every lossless lane writes ar's text at temperature 0) and slower."
)
EMPTY_LANE = ("### –", "", "")


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
    body = tokens.tokens_html(
        frame.lanes.get(method, ()), show_rejected, "waiting for the first round…", frame.marks(method)
    )
    return lane_header(method), counters, body + divergence_note(frame, method)


def divergence_note(frame: LiveFrame, method: str) -> str:
    """One line under a lane that parted from ``ar`` (the full story is on the marked token's hover)."""
    d = frame.divergences.get(method)
    if d is None or not frame.done:
        return ""
    (a, pa), (b, pb) = d.best
    return (
        f'<p class="spec-diverge-note">◆ Parts from ar at new token {d.position + 1}: the target\'s two best '
        f"tokens there, {html.escape(repr(a))} ({pa:.2f}) and {html.escape(repr(b))} ({pb:.2f}), differ by "
        f"{d.logit_gap:.3f} in logit: a near-tie that {html.escape(frame.precision)} rounding flipped. "
        "Hover the marked token.</p>"
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
    return sorted(have, key=lambda m: m == "ar")


def last_round(events: Sequence[RoundEvent]) -> int:
    return max(len(events) - 1, 0)
