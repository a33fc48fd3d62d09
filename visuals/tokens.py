"""Generated text coloured by each token's origin, read straight from the round events (never from the text).

Per round (vLLM's vocabulary): the first ``accepted`` drafts are *accepted*; the draft at the first rejection
is *rejected*, and the drafts after it are *discarded* (never checked on their own: their prefix was already
rejected) — both shown struck through where they were proposed; then comes the target's own token, *recovered*
(resampled at the first rejection) or *bonus* (every draft passed); plain decoding emits *target* tokens.
Hovering a token (or tapping it: tokens take focus) opens a styled tooltip, a hidden child shown by the
style sheet on ``:hover`` / ``:focus-within`` (Gradio's HTML strips scripts, and a native ``title`` is slow,
unstyled, absent on touch screens and in screenshots): what the token is, the rule that decided it
(:mod:`visuals.reasons`), p(x), q(x), its acceptance probability and the round it came from. Colours live in
the page's style sheet (:func:`visuals.style.token_css`). Special tokens (``<|im_end|>``) show as a small
end-of-text marker.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spec_core.core.lane_speed import TOO_FEW, LaneSpeed
from spec_core.core.types import RoundEvent, Stats
from spec_core.drafters import is_copied, source_part
from spec_core.drafters.lookup import LookupDraft
from visuals.reasons import recovered_title, token_reason
from visuals.style import TOKEN_STYLE

RUNNING = "…"  # a speed counter's placeholder while its lane runs with too few tokens to time
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
    why: str = ""  # the rule that decided it, in a sentence (visuals.reasons); "" when the temperature is unknown
    source: str = ""  # a draft's origin: "model" (a draft network) or "lookup" (copied from the text); "" otherwise
    title: str = ""  # the tooltip's header when the kind's own (KIND_TITLES) would misstate it: a lossy recovery

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
        notes.append(
            f"w_t = {prob_text(w)} (the target's weight in ν = w·p + (1 − w)·q)"
            + (f"   ν(x) = {prob_text(nu)}" if nu is not None else "")
        )
    offers = getattr(e, "draft_copy_offers", ())  # a copying draft's pointer (spec_core/drafters/copying.py)
    if i < len(offers) and offers[i][0] >= 0:
        token, g = offers[i]
        if token == e.draft_tokens[i]:
            notes.append(
                f"copied: the draft's pointer offered this token (it followed an earlier occurrence of the last "
                f"words) and its gate moved g = {prob_text(g)} of q onto it"
            )
        else:
            notes.append(f"the draft's pointer offered another token (gate g = {prob_text(g)}); the draft's own won")
    return tuple(notes)


def _source(e: RoundEvent, i: int) -> str:
    sources = getattr(e, "draft_sources", ())  # an event read from an older file has none: a draft model's
    return sources[i] if i < len(sources) else "model"


def _with_reason(span: TokenSpan, e: RoundEvent, temperature: float | None) -> TokenSpan:
    if temperature is None:
        return span
    return dataclasses.replace(span, why=token_reason(span, e, temperature))


def _draft_span(e: RoundEvent, i: int, kind: str, temperature: float | None = None) -> TokenSpan:
    """The i-th drafted token of round ``e`` with its p, q, (up to the first rejection) acceptance probability,
    what the method's own parts said of it and (the temperature known) the rule that decided it."""
    discarded = i > e.accepted
    accept = None if discarded else _at(e.accept_probs, i)
    span = TokenSpan(
        e.draft_pieces[i],
        kind,
        e.index,
        i + 1,
        _at(e.target_probs, i),
        _at(e.draft_probs, i),
        accept,
        discarded,
        _part_notes(e, i),
        source=_source(e, i),
    )
    return _with_reason(span, e, temperature)


def token_spans(events: Sequence[RoundEvent], temperature: float | None = None) -> list[TokenSpan]:
    """Every token to show, in order: emitted tokens plus each round's rejected drafts where they were proposed.

    A round cut short at EOS or ``max_new_tokens`` shows only what it emitted (``event.emitted``). With the run's
    ``temperature`` each span also says which rule decided it (``TokenSpan.why``).
    """
    spans: list[TokenSpan] = []
    for e in events:
        n_emitted = len(e.emitted)
        shown_accepted = min(e.accepted, n_emitted)
        spans += [_draft_span(e, i, "accepted", temperature) for i in range(shown_accepted)]
        if n_emitted <= e.accepted:  # cut before the target's own token: nothing after it was output
            continue
        spans += [_draft_span(e, i, "rejected", temperature) for i in range(e.accepted, e.draft_len)]
        title = recovered_title(e.method) if e.next_kind == "recovered" else ""
        own = TokenSpan(e.next_piece, e.next_kind, e.index, e.accepted + 1, e.next_prob, title=title)
        spans.append(_with_reason(own, e, temperature))
    return spans


def emitted_text(events: Sequence[RoundEvent]) -> str:
    """The output text as the events tell it (pieces of emitted tokens; special tokens included)."""
    return "".join(s.text for s in token_spans(events) if s.emitted)


def is_special(piece: str) -> bool:
    return bool(SPECIAL_PIECE.match(piece))


KIND_TITLES = {
    "accepted": "accepted draft",
    "rejected": "rejected draft (the round's first rejection)",
    "recovered": "recovered token: the target's own, at the first rejection",
    "bonus": "bonus token: the target's own, every draft was accepted",
    "target": "plain decoding: the target's own token",
}


def hover_lines(span: TokenSpan) -> list[tuple[str, str]]:
    """The tooltip's lines as (role, text): what the token is (``head``), why it is there (``why``), its
    numbers and what the method's parts said (``""``)."""
    what = span.title or KIND_TITLES[span.kind]
    if span.discarded:
        what = "discarded draft: it came after the round's first rejection"
    where = f"round {span.round}" + (f", position {span.position}" if span.kind in ("accepted", "rejected") else "")
    lines = [("head", f"{what} · {where}"), ("", f"token {span.text!r}")]
    if span.why:
        lines.append(("why", span.why))
    if is_copied(span.source):  # its drafter's words (prompt lookup's: it followed the same words earlier)
        lines.append(("", str(getattr(source_part(span.source), "source_note", "copied from the text"))))
        if span.p is not None:
            lines.append(("", f"p(x) = {prob_text(span.p)} (target) · q(x) = 1 (a copied token is certain)"))
    elif span.p is not None and span.q is not None:
        lines.append(("", f"p(x) = {prob_text(span.p)} (target) · q(x) = {prob_text(span.q)} (draft)"))
    elif span.p is not None:
        lines.append(("", f"p(x) = {prob_text(span.p)} (the target's probability of its own token)"))
    if span.accept_prob is not None:
        lines.append(("", f"acceptance probability = {prob_text(span.accept_prob)}"))
    lines += [("", note) for note in span.notes]
    if is_special(span.text):
        lines.append(("", "a special token: the model's end of text"))
    return lines


def hover_text(span: TokenSpan) -> str:
    """The tooltip as plain text, one line per line."""
    return "\n".join(text for _, text in hover_lines(span))


def tip_html(lines: Sequence[tuple[str, str]], lead: Sequence[str] = ()) -> str:
    """The tooltip element: hidden until its token is hovered or focused (the page's style sheet shows it).
    ``lead``: lines set apart above the token's own (a divergence note)."""
    parts = [f'<span class="tip-line tip-note">{html.escape(line)}</span>' for line in lead if line]
    parts += [
        f'<span class="tip-line{f" tip-{role}" if role else ""}">{html.escape(text)}</span>' for role, text in lines
    ]
    return f'<span class="tip" role="tooltip">{"".join(parts)}</span>'


def _visible(text: str, kind: str) -> str:
    """Escape a piece; make whitespace visible where it would vanish (rejected drafts, lone newlines)."""
    if is_special(text):
        return "⏎ end"
    if kind == "rejected":
        text = text.replace(" ", "·")
    shown = html.escape(text).replace("\n", "↵\n")
    return shown or "∅"


def span_html(span: TokenSpan, tip: str | None = None, extra_class: str = "", attrs: str = "") -> str:
    """One token; its colours come from the ``tok-KIND`` class of :func:`visuals.style.token_css`.

    ``tip``: the tooltip element (default: the span's own lines); ``""`` for none (the legend's swatches). A
    token with a tooltip takes focus on a click or a tap (``tabindex="-1"``), which opens it and keeps it open
    while it is read; -1 keeps hundreds of tokens out of the page's Tab order.
    """
    tip = tip_html(hover_lines(span)) if tip is None else tip
    classes = f"tok tok-{span.kind}" + (" tok-special" if is_special(span.text) else "") + extra_class
    classes += " tok-copied" if is_copied(span.source) else ""
    focus = ' tabindex="-1"' if tip else ""
    return (
        f'<span class="{classes}" data-kind="{span.kind}" data-round="{span.round}"{attrs}{focus}>'
        f'<span class="tok-text">{_visible(span.text, span.kind)}</span>{tip}</span>'
    )


def _marked(span: TokenSpan, note: str) -> str:
    """A token where a lane parts from ``ar``: a diamond marker, and the note (the target's view) in its tooltip."""
    tip = tip_html(hover_lines(span), lead=note.split("\n"))
    return span_html(span, tip, extra_class=" tok-diverge", attrs=' data-diverge="1"')


def tokens_html(
    events: Sequence[RoundEvent],
    show_rejected: bool = False,
    placeholder: str = "",
    marks: Mapping[int, str] | None = None,
    temperature: float | None = None,
) -> str:
    """The coloured output of one lane, as an HTML fragment; ``marks``: emitted-token index → hover note;
    ``temperature``: the run's, so that each tooltip can say which rule decided its token."""
    marks = marks or {}
    parts, emitted = [], 0
    for s in token_spans(events, temperature):
        if s.emitted:
            parts.append(_marked(s, marks[emitted]) if emitted in marks else span_html(s))
            emitted += 1
        elif show_rejected:  # a break opportunity on each side: a struck run ("a·b·c", no spaces) wraps in its lane
            parts.append(f"<wbr>{span_html(s)}<wbr>")
    if not parts:
        return f'<div class="spec-tokens spec-empty">{html.escape(placeholder)}</div>'
    return f'<div class="spec-tokens">{"".join(parts)}</div>'


def legend_html() -> str:
    """A one-line key of the token colours (each swatch is styled like the tokens it explains)."""
    items = []
    for kind, (_, label, _) in TOKEN_STYLE.items():
        items.append(span_html(TokenSpan(kind, kind, 0, 0), tip="") + f" {html.escape(label)}")
    copied = span_html(TokenSpan("copied", "accepted", 0, 0, source=LookupDraft.source), tip="")
    items.append(copied + " a draft copied from the text (prompt lookup), not drafted by the model")
    diverge = span_html(TokenSpan("first divergence", "target", 0, 0), tip="", extra_class=" tok-diverge")
    items.append(diverge + " where a lane first parts from ar (hover it)")
    return '<div class="spec-legend">' + " &nbsp; ".join(items) + "</div>"


def _cell(label: str, value: str, key: str, hover: str = "") -> str:
    """One counter; a value that is no number (a note, "…") is drawn as a quiet placeholder."""
    title = f' title="{html.escape(hover, quote=True)}"' if hover else ""
    quiet = "" if value[:1].isdigit() else " spec-counter-quiet"
    return (
        f'<div class="spec-counter{quiet}" data-counter="{key}"{title}><div class="spec-counter-value">{html.escape(value)}'
        f'</div><div class="spec-counter-label">{html.escape(label)}</div></div>'
    )


def _ratio(value: float | None, note: str) -> str:
    return f"{value:.2f}×" if value is not None else (note or "–")


def counters_html(stats: Stats, speed: LaneSpeed) -> str:
    """The counters of one lane: tokens/s, speedup vs ar (measured, and the cost model's), τ, α, passes, tokens.

    The numbers also sit in ``data-*`` attributes, for tests and for anyone scraping the page.
    """
    alpha = f"{stats.acceptance_rate:.2f}" if stats.drafted_tokens else "–"
    if speed.note == TOO_FEW and not stats.finished:  # still running: a placeholder until there is a rate
        speed = dataclasses.replace(speed, note=RUNNING)
    rate = f"{speed.tokens_per_s:.1f}" if speed.tokens_per_s is not None else speed.note
    spread = speed.measured is not None and speed.spread is not None
    cells = [
        _cell("tokens/s (own clock)", rate, "tokens_per_s", "new tokens / the seconds of this lane's own rounds"),
        _cell(
            "speedup vs ar, measured" + (f" (10–90%: {speed.spread[0]:.2f}–{speed.spread[1]:.2f})" if spread else ""),
            _ratio(speed.measured, speed.note),
            "measured",
            "tokens/s over ar's tokens/s, each lane on its own clock in the same run; the 10–90% spread resamples "
            "both lanes' rounds",
        ),
        _cell(
            "predicted by the cost model",
            _ratio(speed.predicted, speed.note),
            "predicted",
            "τ × (an ar round) / (this lane's mean round: target over γ+1 tokens + γ draft steps + engine "
            "work), with the median forward costs of this run; round 0 (after the prefill) left out",
        ),
        _cell("τ (tokens / target pass)", f"{stats.tau:.2f}", "tau"),
        _cell("α (accepted / drafted)", alpha, "alpha"),
        _cell("target passes · new tokens", f"{stats.target_forwards} · {stats.new_tokens}", "passes"),
    ]
    state = "done" if stats.finished else "running"
    data = "".join(
        f' data-{k}="{v:.4f}"'
        for k, v in (
            ("speedup", speed.measured),
            ("predicted", speed.predicted),
            ("spread-low", speed.spread[0] if speed.spread else None),
            ("spread-high", speed.spread[1] if speed.spread else None),
        )
        if v is not None
    )
    return (
        f'<div class="spec-counters" data-method="{html.escape(stats.method)}" data-state="{state}"{data}>'
        + "".join(cells)
        + "</div>"
    )
