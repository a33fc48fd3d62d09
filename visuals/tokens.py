"""Generated text coloured by each token's origin, read straight from the round events (never from the text).

Per round (vLLM's vocabulary): the first ``accepted`` drafts are *accepted*; the drafts after them are
*rejected* — shown struck through where they were proposed; then comes the target's own token, *recovered*
(resampled at the first rejection) or *bonus* (every draft passed); plain decoding emits *target* tokens.
Hovering a token shows p(x), q(x), its acceptance probability and the round it came from.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from spec_core.session import LaneStats
from spec_core.types import RoundEvent
from visuals.style import TOKEN_STYLE, tint


@dataclass(frozen=True)
class TokenSpan:
    """One shown token: its text and where it came from."""

    text: str
    kind: str  # "accepted" | "rejected" | "recovered" | "bonus" | "target"
    round: int  # RoundEvent.index
    position: int  # 1-based position in the round's draft (the target's own token: draft_len + 1 or accepted + 1)
    p: float | None = None  # target probability of the token (drafted tokens only)
    q: float | None = None  # draft probability of the token (drafted tokens only)
    accept_prob: float | None = None  # probability the verifier accepted it (drafted tokens only)

    @property
    def emitted(self) -> bool:
        return self.kind != "rejected"


def _at(values: Sequence[float], i: int) -> float | None:
    return float(values[i]) if i < len(values) else None


def _draft_span(e: RoundEvent, i: int, kind: str) -> TokenSpan:
    """The i-th drafted token of round ``e`` with its p, q and acceptance probability."""
    return TokenSpan(
        e.draft_pieces[i], kind, e.index, i + 1, _at(e.target_probs, i), _at(e.draft_probs, i), _at(e.accept_probs, i)
    )


def token_spans(events: Sequence[RoundEvent]) -> list[TokenSpan]:
    """Every token to show, in order: emitted tokens plus each round's rejected drafts where they were proposed.

    A round cut short at EOS or ``max_new_tokens`` shows only what it emitted (``event.emitted``).
    """
    spans: list[TokenSpan] = []
    for e in events:
        n_emitted = len(e.emitted)
        shown_accepted = min(e.accepted, n_emitted)
        spans += [_draft_span(e, i, "accepted") for i in range(shown_accepted)]
        if n_emitted <= e.accepted:  # cut before the target's own token: nothing after it was output
            continue
        spans += [_draft_span(e, i, "rejected") for i in range(e.accepted, e.draft_len)]
        spans.append(TokenSpan(e.next_piece, e.next_kind, e.index, e.accepted + 1, e.next_prob))
    return spans


def emitted_text(events: Sequence[RoundEvent]) -> str:
    """The output text as the events tell it (pieces of emitted tokens; special tokens included)."""
    return "".join(s.text for s in token_spans(events) if s.emitted)


def _hover(span: TokenSpan) -> str:
    what = {
        "accepted": f"accepted draft (position {span.position})",
        "rejected": f"rejected draft (position {span.position})",
        "recovered": "recovered token: the target's own, drawn at the first rejection",
        "bonus": "bonus token: the target's own, every draft was accepted",
        "target": "plain decoding: the target's own token",
    }[span.kind]
    lines = [f"round {span.round} · {what}", f"token {span.text!r}"]
    if span.p is not None and span.q is not None:
        lines.append(f"p(x) = {span.p:.3f}   q(x) = {span.q:.3f}")
    elif span.p is not None:
        lines.append(f"p(x) = {span.p:.3f} (the target's probability of its own token)")
    if span.accept_prob is not None:
        lines.append(f"acceptance probability = {span.accept_prob:.3f}")
    return "\n".join(lines)


def _visible(text: str, kind: str) -> str:
    """Escape a piece; make whitespace visible where it would vanish (rejected drafts, lone newlines)."""
    if kind == "rejected":
        text = text.replace(" ", "·")
    shown = html.escape(text).replace("\n", "↵\n")
    return shown or "∅"


def span_html(span: TokenSpan, title: str | None = None) -> str:
    colour, _, underline = TOKEN_STYLE[span.kind]
    style = f"background:{tint(colour)};border-bottom:2px {underline} {colour};"
    if span.kind == "rejected":
        style = f"color:{colour};text-decoration:line-through 2px;background:{tint(colour, 0.1)};"
    title = html.escape(_hover(span) if title is None else title, quote=True)
    return (
        f'<span class="tok tok-{span.kind}" data-kind="{span.kind}" data-round="{span.round}" '
        f'title="{title}" style="{style}">{_visible(span.text, span.kind)}</span>'
    )


def tokens_html(events: Sequence[RoundEvent], show_rejected: bool = True, placeholder: str = "") -> str:
    """The coloured output of one lane, as an HTML fragment."""
    spans = [s for s in token_spans(events) if show_rejected or s.emitted]
    if not spans:
        return f'<div class="spec-tokens spec-empty">{html.escape(placeholder)}</div>'
    body = "".join(span_html(s) for s in spans)
    style = "white-space:pre-wrap;line-height:1.9;font-family:ui-monospace,monospace"
    return f'<div class="spec-tokens" style="{style}">{body}</div>'


def legend_html() -> str:
    """A one-line key of the token colours (each swatch is styled like the tokens it explains)."""
    items = []
    for kind, (_, label, _) in TOKEN_STYLE.items():
        items.append(span_html(TokenSpan(kind, kind, 0, 0), title=label) + f" {html.escape(label)}")
    return '<div class="spec-legend">' + " &nbsp; ".join(items) + "</div>"


def counters_html(stats: LaneStats, speedup: float | None, device: str = "") -> str:
    """The live counters of one lane: tokens/s, τ, α, target forward passes, speedup vs plain decoding."""
    sp = f"{speedup:.2f}×" if speedup is not None else "–"
    alpha = f"{stats.acceptance_rate:.2f}" if stats.drafted_tokens else "–"
    cells = [
        ("tokens/s", f"{stats.tokens_per_s:.1f}"),
        ("τ (tokens / target pass)", f"{stats.tau:.2f}"),
        ("α (accepted / drafted)", alpha),
        ("target passes", str(stats.target_forwards)),
        ("new tokens", str(stats.new_tokens)),
        ("speedup vs ar", sp),
    ]
    body = "".join(
        f'<div class="spec-counter"><div class="spec-counter-value">{html.escape(v)}</div>'
        f'<div class="spec-counter-label">{html.escape(k)}</div></div>'
        for k, v in cells
    )
    state = "done" if stats.finished else "running"
    return f'<div class="spec-counters" data-method="{html.escape(stats.method)}" data-state="{state}">{body}</div>'
