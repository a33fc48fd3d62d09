"""The copying draft's view: which drafts its pointer supplied, and how far its gate opened.

A feature draft trained to copy (:mod:`spec_core.drafters.copying`, a pointer-generator after See, Liu & Manning,
arXiv 1704.04368) offers, at each drafted position, the token that followed an earlier occurrence of the text's last
words; a trained gate g moves that share of q onto it. Each event carries the offers (``draft_copy_offers``: the
offered token and g per drafted token). Per round of each lane whose draft copies: the kept drafts the pointer
supplied and the kept drafts the network chose itself, the drafted length as a line, and the mean g of the round's
offers as markers on a second axis, beside the fixed-window lanes, which draft with the same draft.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from spec_core.core.types import RoundEvent
from visuals.plots import Lanes, drafted_line, drafting_lanes, kept_bars, per_round_layout, round_markers
from visuals.style import OKABE_ITO, series_style
from visuals.views import View, register_view


def offers_of(event: RoundEvent) -> list[tuple[int, float]]:
    """The round's pointer offers, one per drafted token ((−1, 0.0): none); [] for a draft that does not copy."""
    return [(int(t), float(g)) for t, g in getattr(event, "draft_copy_offers", ()) or ()]


def copied_flags(event: RoundEvent) -> list[bool]:
    """Per drafted token: whether it is the pointer's offer (the copy won in q)."""
    offers = offers_of(event)
    return [t >= 0 and t == d for (t, _), d in zip(offers, event.draft_tokens)]


def kept_split(event: RoundEvent) -> tuple[int, int]:
    """(kept drafts the pointer supplied, kept drafts the network chose itself) among those that entered the text."""
    flags = copied_flags(event)[: event.kept_drafts]
    return sum(flags), event.kept_drafts - sum(flags)


def copying_lanes(lanes: Lanes) -> dict[str, Sequence[RoundEvent]]:
    """The drafting lanes whose draft copies (some round carries pointer offers)."""
    return {m: ev for m, ev in drafting_lanes(lanes).items() if any(offers_of(e) for e in ev)}


def pointer_figure(lanes: Lanes) -> go.Figure:
    fig = go.Figure()
    spec = copying_lanes(lanes)
    for i, (method, events) in enumerate(spec.items()):
        colour, dash, marker = series_style(i)
        parts = (("pointer's copy, kept", OKABE_ITO["sky"]), ("network's own, kept", colour))
        kept_bars(fig, method, events, parts, kept_split)
        fig.add_trace(drafted_line(method, events, colour, dash))
        gates = [(e.index, [g for t, g in offers_of(e) if t >= 0]) for e in events]
        gates = [(x, sum(g) / len(g)) for x, g in gates if g]
        if gates:
            hover = "the gate moved %{y:.2f} of q onto the pointer's offers"
            fig.add_trace(round_markers(method, gates, "mean gate g of the offers", hover, colour, marker, yaxis="y2"))
    fig.update_layout(
        barmode="stack",
        yaxis2={"title": "gate g", "overlaying": "y", "side": "right", "range": [0, 1.05], "showgrid": False},
    )
    title = "What the draft copied: its pointer's offers, kept, and its gate"
    if not spec:  # what it rests on all the same: these rounds, with nothing offered
        return per_round_layout(fig, title, drafting_lanes(lanes), "no lane here drafts with a copying draft")
    return per_round_layout(fig, title, spec)


def pointer_caption(lanes: Lanes) -> str:
    """The view's sentence per lane: kept drafts the pointer supplied, and how often its offer was drafted."""
    said = []
    for method, events in copying_lanes(lanes).items():
        copied = sum(kept_split(e)[0] for e in events)
        kept = sum(e.kept_drafts for e in events)
        offered = sum(sum(t >= 0 for t, _ in offers_of(e)) for e in events)
        drafted = sum(sum(copied_flags(e)) for e in events)
        said.append(
            f"{method}: {copied} of its {kept} kept drafts were the pointer's copies; the pointer offered a token at "
            f"{offered} of {sum(e.draft_len for e in events)} drafted positions and the gate made it the draft at "
            f"{drafted}."
        )
    if not said:
        return "No lane here drafted with a copying draft (prompt lookup copies by rule: its own view says what)."
    return " ".join(said)


register_view(
    View(
        "copy_pointer",
        "The draft's copy pointer: copied or its own",
        "Bars: each round's kept drafts, the pointer's copy (sky) or the network's own choice; line: how many it "
        "drafted; markers (right axis): how far the gate opened, on average, for the round's offers. A draft of "
        "one layer cannot copy by itself; the pointer offers what followed an earlier occurrence of the last "
        "words, and the gate, trained on the target's own answers, says how much to trust it (See et al., "
        "arXiv 1704.04368).",
        pointer_figure,
        describe=pointer_caption,
        shows=lambda lanes: bool(copying_lanes(lanes)),
        look_for="Sky bars are drafts the draft copied from the text through its pointer.",
    )
)
