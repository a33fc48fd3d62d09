"""What each figure's data shows, in a sentence computed from the data (not what it ought to show).

A fixed caption ("acceptance falls with position") reads as a finding even above a lane whose acceptance
rises; these functions say what *this* run's rounds show, with the counts they rest on, and flag the points
that rest on too few rounds to mean much (:data:`FEW`). Each takes the lanes a view is drawn from (method →
events) and returns one or two sentences; the view's own caption then says how to read the figure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from spec_core.core.types import RoundEvent
from spec_core.engine.replay import PolicyReplay
from visuals import plots
from visuals.baseline import replay_sentence, windows

Lanes = Mapping[str, Sequence[RoundEvent]]
FEW = 5  # a point resting on fewer rounds than this is an anecdote, and the caption says so
FLAT = 0.05  # a change in acceptance smaller than this reads as "about the same"
ANALYZER_INTRO = (  # the Analyzer tab's one line
    "Run one method and ar on every prompt of a set: the summary pools all prompts, the table has one row per "
    "prompt (pick a row to replay it token by token), and the per-category table is Spec-Bench's."
)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _rounds(n: int) -> str:
    return f"{n} round{'' if n == 1 else 's'}"


def draft_lengths(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    parts = []
    for method, events in plots.drafting_lanes(lanes).items():
        if events:
            drafted = sum(e.draft_len for e in events) / len(events)
            kept = sum(e.accepted for e in events) / len(events)
            parts.append(f"{method} drafted {drafted:.1f} tokens a round and kept {kept:.1f} ({_rounds(len(events))})")
    replays = [b for b in windows(lanes, replayed) if b.replayed]
    for b in replays:
        parts.append(
            f"{b.name} drafted {sum(b.drafted) / b.rounds:.1f} a round and kept {sum(b.kept) / b.rounds:.1f} "
            f"({_rounds(b.rounds)})"
        )
    if not parts:
        return "No drafted rounds yet."
    return "; ".join(parts) + "." + (f" {replay_sentence(replays)}" if replays else "")


def _trend(first: float, last: float) -> str:
    if last < first - FLAT:
        return "falls"
    if last > first + FLAT:
        return "rises"
    return "stays about the same"


def acceptance_by_position(lanes: Lanes) -> str:
    parts = []
    for method, events in plots.drafting_lanes(lanes).items():
        pos, rates, counts = plots.acceptance_by_position(events)
        if not pos:
            continue
        solid = [k for k, c in enumerate(counts) if c >= FEW] or [0]
        a, b = solid[0], solid[-1]
        if a == b:
            text = f"{method}: {_pct(rates[a])} at position {pos[a]} ({_rounds(counts[a])})"
        else:
            text = (
                f"{method}: acceptance {_trend(rates[a], rates[b])} from {_pct(rates[a])} at position {pos[a]} "
                f"({_rounds(counts[a])}) to {_pct(rates[b])} at position {pos[b]} ({_rounds(counts[b])})"
            )
        thin = [p for p, c in zip(pos, counts) if c < FEW]
        if thin:
            text += (
                f"; positions {thin[0]}+ rest on fewer than {FEW} rounds each"
                if len(thin) > 1
                else (f"; position {thin[0]} rests on fewer than {FEW} rounds")
            )
        parts.append(text)
    return ("; ".join(parts) + ".") if parts else "No drafted rounds yet."


def accepted_histogram(lanes: Lanes) -> str:
    parts = []
    for method, events in plots.drafting_lanes(lanes).items():
        if not events:
            continue
        none = sum(e.accepted == 0 for e in events if e.draft_len) / max(1, sum(1 for e in events if e.draft_len))
        full = sum(e.draft_len > 0 and e.accepted == e.draft_len for e in events) / len(events)
        parts.append(
            f"{method} kept no draft in {_pct(none)} of its drafting rounds and every draft in "
            f"{_pct(full)} ({_rounds(len(events))})"
        )
    return ("; ".join(parts) + ".") if parts else "No drafted rounds yet."


def heuristic_window(lanes: Lanes) -> str:
    parts = []
    for method, events in lanes.items():
        windows = [e.policy_trace.get("window", e.draft_len) for e in events]
        if windows:
            parts.append(f"{method}'s window ranged from {min(windows)} to {max(windows)} over {_rounds(len(windows))}")
    return ("; ".join(parts) + ".") if parts else "No rounds yet."


def confidence(lanes: Lanes) -> str:
    parts = []
    for method, events in lanes.items():
        kept = [q for e in events for k, q in enumerate(e.draft_probs) if k < e.accepted]
        lost = [q for e in events for k, q in enumerate(e.draft_probs) if k >= e.accepted]
        if kept or lost:
            mean = lambda xs: f"{sum(xs) / len(xs):.2f}" if xs else "–"  # noqa: E731
            parts.append(
                f"{method}: kept drafts had mean q(x) {mean(kept)} ({len(kept)} tokens), rejected or "
                f"discarded ones {mean(lost)} ({len(lost)} tokens)"
            )
    return ("; ".join(parts) + ".") if parts else "No drafted rounds yet."


TRAINING_LENS = (
    "One real drafted block at a time (the step-through's round picks which). A block drafter learns every position "
    "of a block at once; the bars say how much each position's mistakes would count in its training: equally "
    "(uniform), less the further out (DFlash's decay, fixed in advance), or by how likely the target's check is to "
    "get that far (D-PACE, from this block's own q_j: the draft's probability of the token the target wanted at "
    "position j, the dotted line)."
)


CAPTION_WORDS = 60  # a figure's caption shows at most this many words; the rest folds behind "more"
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+")


def folded(text: str, limit: int = CAPTION_WORDS) -> str:
    """A caption of at most ``limit`` words, the rest behind a "more" link (an HTML ``<details>``, which opens in
    place). It is cut after the last whole sentence that fits (mid-sentence, after ``limit`` words, when the first
    does not), so no word is lost: the visible part and the folded one read as the whole text."""
    text = text.strip()
    words = text.split()
    if len(words) <= limit:
        return text
    ends = [m.start() for m in _SENTENCE_END.finditer(text) if len(text[: m.start()].split()) <= limit]
    if ends:  # the original spacing (a paragraph break) kept on both sides of the cut
        head, rest = text[: ends[-1]], text[ends[-1] :].strip()
    else:
        head, rest = " ".join(words[:limit]) + " …", "… " + " ".join(words[limit:])
    return f"{head}\n\n<details><summary>more</summary>\n\n{rest}\n\n</details>"
