"""Generated text coloured by each token's origin, read straight from the round events (never from the text).

Per round (vLLM's vocabulary): the first ``accepted`` drafts are *accepted*; the draft at the first rejection
is *rejected*, and the drafts after it are *discarded* (never checked on their own: their prefix was already
rejected) — both shown struck through where they were proposed; then comes the target's own token, *recovered*
(resampled at the first rejection) or *bonus* (every draft passed); plain decoding emits *target* tokens.
Hovering a token shows p(x), q(x), its acceptance probability and the round it came from. Colours live in
the page's style sheet (:func:`visuals.style.token_css`), so a token costs its text and its hover, no more.
Special tokens (``<|im_end|>``) show as a small end-of-text marker.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spec_core.lane_speed import LaneSpeed
from spec_core.types import RoundEvent, Stats
from visuals.style import TOKEN_STYLE

SPECIAL_PIECE = re.compile(r"^(<\|[^|<>]+\|>|</?s>)$")  # ChatML's <|im_end|>, <|endoftext|>; Llama's <s>, </s>


@dataclass(frozen=True)
class TokenSpan:
    """One shown token: its text and where it came from."""

    text: str
    kind: str  # "accepted" | "rejected" | "recovered" | "bonus" | "target"
    round: int  # RoundEvent.index
    position: int  # 1-based position in the round's draft (the target's own token: draft_len + 1 or accepted + 1)
    p: float | None = None  # target probability of the token (drafted tokens only)
    q: float | None = None  # draft probability of the token (drafted tokens only)
    accept_prob: float | None = None  # probability the verifier accepted it (up to the first rejection only)
    discarded: bool = False  # a draft after the round's first rejection: never checked on its own
    notes: tuple[str, ...] = ()  # what a method's own parts said of this token (PACER's â, DIVERSED's w_t, ν(x))

    @property
    def emitted(self) -> bool:
        return self.kind != "rejected"


def prob_text(x: float) -> str:
    """A probability for a hover: three decimals, or two significant digits below 0.001 (never a bare 0.000)."""
    return f"{x:.3f}" if x == 0 or x >= 0.0005 else f"{x:.1e}"


def _at(values: Sequence[float], i: int) -> float | None:
    return float(values[i]) if i < len(values) else None


def _part_notes(e: RoundEvent, i: int) -> tuple[str, ...]:
    """Hover lines from the round's policy and verifier traces for drafted token ``i``, where they carry one."""
    notes = []
    predicted = _at(e.policy_trace.get("predicted", ()), i)
    if predicted is not None:  # PACER's pre-verifier (arXiv 2602.01274)
        notes.append(f"PACER's pre-verifier predicted acceptance â = {prob_text(predicted)}")
    w, nu = _at(e.verifier_trace.get("w", ()), i), _at(e.verifier_trace.get("nu_x", ()), i)
    if w is not None:  # an ensemble verifier (static:W, DIVERSED's trained w_t, arXiv 2604.07622)
        notes.append(f"w_t = {prob_text(w)} (the target's weight in ν = w·p + (1 − w)·q)"
                     + (f"   ν(x) = {prob_text(nu)}" if nu is not None else ""))  # fmt: skip
    return tuple(notes)


def _draft_span(e: RoundEvent, i: int, kind: str) -> TokenSpan:
    """The i-th drafted token of round ``e`` with its p, q, (up to the first rejection) acceptance probability and
    what the method's own parts said of it."""
    discarded = i > e.accepted
    accept = None if discarded else _at(e.accept_probs, i)
    return TokenSpan(e.draft_pieces[i], kind, e.index, i + 1, _at(e.target_probs, i), _at(e.draft_probs, i), accept,
                     discarded, _part_notes(e, i))  # fmt: skip


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


def is_special(piece: str) -> bool:
    return bool(SPECIAL_PIECE.match(piece))


def _hover(span: TokenSpan) -> str:
    what = {
        "accepted": f"accepted draft (position {span.position})",
        "rejected": f"rejected draft (position {span.position}, the round's first rejection)",
        "recovered": "recovered token: the target's own, drawn at the first rejection",
        "bonus": "bonus token: the target's own, every draft was accepted",
        "target": "plain decoding: the target's own token",
    }[span.kind]
    if span.discarded:
        what = f"discarded draft (position {span.position}): it came after the round's first rejection"
    lines = [f"round {span.round} · {what}", f"token {span.text!r}"]
    if span.p is not None and span.q is not None:
        lines.append(f"p(x) = {prob_text(span.p)}   q(x) = {prob_text(span.q)}")
    elif span.p is not None:
        lines.append(f"p(x) = {prob_text(span.p)} (the target's probability of its own token)")
    if span.accept_prob is not None:
        lines.append(f"acceptance probability = {prob_text(span.accept_prob)}")
    lines += span.notes
    if is_special(span.text):
        lines.append("a special token: the model's end of text")
    return "\n".join(lines)


def _visible(text: str, kind: str) -> str:
    """Escape a piece; make whitespace visible where it would vanish (rejected drafts, lone newlines)."""
    if is_special(text):
        return "⏎ end"
    if kind == "rejected":
        text = text.replace(" ", "·")
    shown = html.escape(text).replace("\n", "↵\n")
    return shown or "∅"


def span_html(span: TokenSpan, title: str | None = None, extra_class: str = "") -> str:
    """One token; its colours come from the ``tok-KIND`` class of :func:`visuals.style.token_css`."""
    title = html.escape(_hover(span) if title is None else title, quote=True)
    classes = f"tok tok-{span.kind}" + (" tok-special" if is_special(span.text) else "") + extra_class
    return (
        f'<span class="{classes}" data-kind="{span.kind}" data-round="{span.round}" '
        f'title="{title}">{_visible(span.text, span.kind)}</span>'
    )


def _marked(span: TokenSpan, note: str) -> str:
    """A token where a lane parts from ``ar``: a diamond marker, and the note (the target's view) on hover."""
    return span_html(span, title=f"{note}\n\n{_hover(span)}", extra_class=" tok-diverge").replace(
        "<span ", '<span data-diverge="1" ', 1
    )


def tokens_html(
    events: Sequence[RoundEvent],
    show_rejected: bool = False,
    placeholder: str = "",
    marks: Mapping[int, str] | None = None,
) -> str:
    """The coloured output of one lane, as an HTML fragment; ``marks``: emitted-token index → hover note."""
    marks = marks or {}
    parts, emitted = [], 0
    for s in token_spans(events):
        if s.emitted:
            parts.append(_marked(s, marks[emitted]) if emitted in marks else span_html(s))
            emitted += 1
        elif show_rejected:
            parts.append(span_html(s))
    if not parts:
        return f'<div class="spec-tokens spec-empty">{html.escape(placeholder)}</div>'
    return f'<div class="spec-tokens">{"".join(parts)}</div>'


def legend_html() -> str:
    """A one-line key of the token colours (each swatch is styled like the tokens it explains)."""
    items = []
    for kind, (_, label, _) in TOKEN_STYLE.items():
        items.append(span_html(TokenSpan(kind, kind, 0, 0), title=label) + f" {html.escape(label)}")
    diverge = span_html(TokenSpan("first divergence", "target", 0, 0), title="", extra_class=" tok-diverge")
    items.append(diverge + " where a lane first parts from ar (hover it)")
    return '<div class="spec-legend">' + " &nbsp; ".join(items) + "</div>"


def _cell(label: str, value: str, key: str, hover: str = "") -> str:
    title = f' title="{html.escape(hover, quote=True)}"' if hover else ""
    return (
        f'<div class="spec-counter" data-counter="{key}"{title}><div class="spec-counter-value">{html.escape(value)}'
        f'</div><div class="spec-counter-label">{html.escape(label)}</div></div>'
    )


def _ratio(value: float | None, note: str) -> str:
    return f"{value:.2f}×" if value is not None else (note or "–")


def counters_html(stats: Stats, speed: LaneSpeed) -> str:
    """The counters of one lane: tokens/s, speedup vs ar (measured, and the cost model's), τ, α, passes, tokens.

    The numbers also sit in ``data-*`` attributes, for tests and for anyone scraping the page.
    """
    alpha = f"{stats.acceptance_rate:.2f}" if stats.drafted_tokens else "–"
    rate = f"{speed.tokens_per_s:.1f}" if speed.tokens_per_s is not None else speed.note
    cells = [
        _cell("tokens/s (own clock)", rate, "tokens_per_s", "new tokens / the seconds of this lane's own rounds"),
        _cell("speedup vs ar, measured", _ratio(speed.measured, speed.note), "measured",
              "tokens/s over ar's tokens/s, each lane on its own clock in the same run"),
        _cell("predicted by the cost model", _ratio(speed.predicted, speed.note), "predicted",
              "τ × (an ar round) / (this lane's mean round: target over γ+1 tokens + γ draft steps + engine "
              "work), with the median forward costs of this run; round 0 (after the prefill) left out"),
        _cell("τ (tokens / target pass)", f"{stats.tau:.2f}", "tau"),
        _cell("α (accepted / drafted)", alpha, "alpha"),
        _cell("target passes · new tokens", f"{stats.target_forwards} · {stats.new_tokens}", "passes"),
    ]  # fmt: skip
    state = "done" if stats.finished else "running"
    data = "".join(
        f' data-{k}="{v:.4f}"'
        for k, v in (("speedup", speed.measured), ("predicted", speed.predicted))
        if v is not None
    )
    return (
        f'<div class="spec-counters" data-method="{html.escape(stats.method)}" data-state="{state}"{data}>'
        + "".join(cells)
        + "</div>"
    )
