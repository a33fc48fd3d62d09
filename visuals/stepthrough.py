"""One round replayed slowly for teaching: draft → verify → accept/reject → emit, with the numbers.

Each step is an HTML card built from the round's event alone: the drafted tokens and q(x); the target's p(x)
from its single verification pass; each draft's acceptance probability and verdict (the first rejection ends
the round); the tokens the round finally appended. The rule in force is explained by :func:`visuals.views.explain`.

A round's card holds all four steps (:func:`round_steps_html`) and the page's style sheet (:func:`step_css`) shows
the one the step radio has checked, in the browser, with no request to the server. A card redrawn by a handler
lagged its radio: right after a run the handler could wait seconds behind the figures being drawn, and during a
run it read the running frame, so the card went blank until the run and its figures were done.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from spec_core.core.types import RoundEvent
from visuals.style import TOKEN_STYLE, tint
from visuals.tokens import is_special, span_html, token_spans
from visuals.views import explain, round_notes

STEPS = ("draft", "verify", "accept", "emit")
STEP_RADIO_ID = "st-step"  # the step radio's elem_id, which step_css reads
STEP_TITLES = {
    "draft": "1 · Draft: the small model proposes tokens",
    "verify": "2 · Verify: one target forward pass scores every drafted position at once",
    "accept": "3 · Accept / reject, left to right",
    "emit": "4 · Emit: accepted drafts + the target's own token",
}


def _fmt(values: Sequence[float], i: int) -> str:
    return f"{values[i]:.3f}" if i < len(values) else "–"


def _piece(text: str) -> str:
    return html.escape(repr(text))


def _part_columns(event: RoundEvent) -> list[tuple[str, Sequence[float], int]]:
    """(header, per-token values, first step shown) for what the method's own parts computed: PACER's â while
    drafting, an ensemble verifier's w_t and ν(x) once the target has run."""
    columns = []
    if event.policy_trace.get("predicted"):
        columns.append(("â (PACER)", event.policy_trace["predicted"], 0))
    if event.verifier_trace.get("w"):
        columns.append(("w_t", event.verifier_trace["w"], 1))
        columns.append(("ν(x)", event.verifier_trace.get("nu_x", ()), 1))
    return columns


def _row_cells(event: RoundEvent, i: int, step: int) -> list[str]:
    """One drafted token's row; after the first rejection a draft is *discarded*, as in the lane's hover: its
    acceptance probability was computed (one pass scores every position) but never used, so it shows "–"."""
    cells = [str(i + 1), _piece(event.draft_pieces[i]), _fmt(event.draft_probs, i)]
    cells += [_fmt(values, i) if step >= first else "?" for _, values, first in _part_columns(event)]
    cells.append(_fmt(event.target_probs, i) if step >= 1 else "?")
    if step >= 2:
        discarded = i > event.accepted
        cells.append("–" if discarded else _fmt(event.accept_probs, i))
        if i < event.accepted:
            verdict, kind = "accepted", "accepted"
        elif i == event.accepted:
            verdict, kind = "rejected (first rejection)", "rejected"
        else:
            verdict, kind = "discarded (after the first rejection)", "rejected"
        colour = TOKEN_STYLE[kind][0]
        cells.append(f'<span style="color:{colour};font-weight:600">{verdict}</span>')
        cells.append(_replacement(event) if i == event.accepted else "")
    return cells


def _replacement(event: RoundEvent) -> str:
    """The target's own token where its first draft was rejected, set beside the rejected draft."""
    colour = TOKEN_STYLE["recovered"][0]
    return (
        f'<span class="spec-step-choice" style="border-bottom:2px dashed {colour}">{_piece(event.next_piece)}'
        "</span> (the target's own)"
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def cut_reason(event: RoundEvent) -> str:
    """Why a round appended fewer tokens than it accepted + 1, or why it ended the answer ("" if neither)."""
    n = len(event.emitted)
    pieces = [*event.draft_pieces[: event.accepted], event.next_piece]
    if n < event.accepted + 1:
        last = pieces[n - 1] if n else ""
        if is_special(last):
            return (
                f"Only {_plural(n, 'token')} appended, not {event.accepted + 1}: token {n} is the end-of-text "
                "token, so the answer stops there and the rest of the round is dropped."
            )
        return (
            f"Only {_plural(n, 'token')} appended, not {event.accepted + 1}: the answer reached its budget of new "
            "tokens (max new tokens), so the rest of the round is dropped."
        )
    if event.finished:
        return "The answer ends with this round: " + (
            "its last token is the end-of-text token."
            if is_special(pieces[-1])
            else "it reached its budget of new tokens (max new tokens)."
        )
    return ""


def step_index(step: int | str) -> int:
    """A step's index into :data:`STEPS`, from its index or its name."""
    k = STEPS.index(step) if step in STEPS else -1 if isinstance(step, str) else int(step)
    if not 0 <= k < len(STEPS):
        raise ValueError(f"step must be one of {STEPS} or in 0..{len(STEPS) - 1}, got {step!r}")
    return k


def round_step_html(event: RoundEvent, step: int | str, temperature: float = 0.0) -> str:
    """The card for one step (index into :data:`STEPS` or its name) of one round."""
    k = step_index(step)
    parts = [f'<div class="spec-step" data-step="{STEPS[k]}" data-round="{event.index}">']
    parts.append(f"<h4>Round {event.index} of {html.escape(event.method)} — {STEP_TITLES[STEPS[k]]}</h4>")
    if not event.draft_len:
        parts.append("<p>No draft this round: the target produced one token by itself.</p>")
    else:
        why = f" (stopped: {html.escape(event.stop_reason)})" if event.stop_reason else ""
        parts.append(
            f"<p>{_plural(event.draft_len, 'token')} drafted{why} after {event.context_len} tokens of context.</p>"
        )
        parts += [f'<p class="spec-note">{html.escape(text)}</p>' for text in round_notes(event)]
        head = ["#", "draft token", "q(x) draft", *(h for h, _, _ in _part_columns(event)), "p(x) target"]
        head += ["accept prob.", "verdict", "target's token in its place"] if k >= 2 else []
        rows = ["<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
        for i in range(event.draft_len):
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in _row_cells(event, i, k)) + "</tr>")
        parts.append('<table class="spec-step-table">' + "".join(rows) + "</table>")
        if k >= 2:
            if event.accepted == event.draft_len:
                every = "the one draft" if event.draft_len == 1 else f"all {event.draft_len} drafts"
                parts.append(
                    f"<p>{every[0].upper() + every[1:]} passed: the target's pass already holds the next "
                    "position's distribution, so it adds a <b>bonus</b> token for free.</p>"
                )
            else:
                rest = " and the rest is discarded" if event.accepted + 1 < event.draft_len else ""
                parts.append(
                    f"<p>{event.accepted} accepted; position {event.accepted + 1} was rejected, so the "
                    f"target's own <b>recovered</b> token {_piece(event.next_piece)} takes its place{rest}.</p>"
                )
    if k >= 3:
        n = len(event.emitted)  # cut at EOS / max_new_tokens
        spans = [s for s in token_spans([event], temperature) if s.emitted]  # with their tooltips' numbers and rule
        shown = "".join(span_html(s) for s in spans)
        parts.append(
            f"<p>Appended {_plural(n, 'token')} for one target pass:</p>"
            f'<div class="spec-tokens spec-step-emitted">{shown}</div>'
        )
        if cut := cut_reason(event):
            parts.append(f'<p class="spec-step-cut">{html.escape(cut)}</p>')
    colour = TOKEN_STYLE["bonus"][0]
    parts.append(
        f'<p class="spec-rule" style="border-left:4px solid {colour};background:{tint(colour, 0.08)};'
        f'padding:6px 10px"><b>Rule in force.</b> {html.escape(explain(event.method, temperature))}</p>'
    )
    parts.append("</div>")
    return "".join(parts)


def round_steps_html(event: RoundEvent, step: int | str, temperature: float = 0.0) -> str:
    """Every step's card of one round; ``step`` is the one shown where the browser cannot follow the radio
    itself (no ``:has()``): :func:`step_css` shows the radio's step, whatever the server last sent."""
    shown = STEPS[step_index(step)]
    cards = "".join(round_step_html(event, k, temperature) for k in range(len(STEPS)))
    return f'<div class="spec-steps" data-shown="{shown}">{cards}</div>'


def step_css(radio_id: str = STEP_RADIO_ID) -> str:
    """The style sheet that shows one step's card: the radio's checked step (``:has()``, at the click), else the
    card's own ``data-shown``. The radio's rules name its id, so they outrank the ``data-shown`` ones."""
    picked = f":root:has(#{radio_id} input:checked)"
    rules = [".spec-steps > .spec-step { display: none; }", f"{picked} .spec-steps > .spec-step {{ display: none; }}"]
    for s in STEPS:
        rules.append(f'.spec-steps[data-shown="{s}"] > .spec-step[data-step="{s}"] {{ display: block; }}')
        rules.append(
            f':root:has(#{radio_id} input[value="{s}"]:checked) .spec-steps > .spec-step[data-step="{s}"] '
            "{ display: block; }"
        )
    return "\n".join(rules) + "\n"


def frame_card(frame, lane: str | None, round_index: int | float, step: int | str) -> str:
    """The step-through card for round ``round_index`` of ``lane`` in a live frame, every step of it, ``step``
    shown (or what to do first)."""
    if frame is None or not lane or not frame.lanes.get(lane):
        return "<p>Generate something first, then pick a method and a round.</p>"
    events = frame.lanes[lane]
    return round_steps_html(events[min(int(round_index), len(events) - 1)], step, frame.temperature)
