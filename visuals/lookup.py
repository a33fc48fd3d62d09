"""Prompt lookup's view: on a recorded text, what a longer or shorter copy would have paid (no model call).

The Playground's record holds the prompt and the target's greedy answer, which is all a lookup draft depends on
(:mod:`spec_core.lookup_replay`). Bars: the predicted speedup over ``ar`` of copying up to k tokens a round for
several k (transformers' and vLLM's usual 10 among them), of ``lookup`` as it runs (its length from this
machine's costs and the copy's own evidence), and of the oracle that knows what the target keeps; each priced by
the record's cost profile, named in the caption. Beside them, what the copies offer: how often a copy was there
at all, and how much of it the answer bore out.
"""

from __future__ import annotations

import plotly.graph_objects as go

from spec_core.lookup_replay import COPY_WINDOWS, copies, copy_replays
from spec_core.replay import TextRecord, default_costs
from visuals.plots import base_layout
from visuals.style import OKABE_ITO

INTRO = (
    "**Prompt lookup on this text.** A lookup draft copies what followed the text's last words earlier in the "
    "prompt or the answer, so on a recorded answer every copy is known. The bars replay copying up to k tokens a "
    "round, `lookup`'s own choice, and an oracle that knows what the target keeps."
)


def copy_view(record: TextRecord | None) -> tuple[go.Figure, str]:
    """(bars of predicted speedup per way of choosing the copy's length, a caption in numbers)."""
    fig = go.Figure()
    if record is None:
        base_layout(fig, "Prompt lookup on this text", "", "", empty=True, empty_text="Record a text first")
        return fig, INTRO
    profile = record.costs or default_costs(record.meta.get("dtype"))
    rows = copy_replays(record.prompt_ids, record.tokens, profile, record.max_new_tokens)
    colours = [OKABE_ITO["grey"]] * len(COPY_WINDOWS) + [OKABE_ITO["blue"], OKABE_ITO["black"]]
    fig.add_trace(
        go.Bar(
            x=[r.policy for r in rows],
            y=[r.speedup for r in rows],
            marker={"color": colours, "pattern": {"shape": [""] * (len(rows) - 1) + ["/"]}},
            customdata=[[r.tau, len(r.lengths), sum(r.lengths), sum(r.kept)] for r in rows],
            text=[f"{r.speedup:.2f}×" for r in rows],
            textposition="outside",
            hovertemplate="%{x}: predicted %{y:.2f}× ar<br>τ %{customdata[0]:.2f} over %{customdata[1]} rounds"
            "<br>copied %{customdata[2]} tokens, kept %{customdata[3]}<extra></extra>",
            showlegend=False,
        )
    )
    fig.add_hline(y=1.0, line={"color": OKABE_ITO["grey"], "dash": "dot"}, annotation_text="ar")
    base_layout(
        fig,
        "Prompt lookup: what each copy length would have paid",
        "how the copy's length is chosen (k: up to k tokens a round)",
        "predicted speedup over ar",
        note=f"{len(record.tokens)} tokens of one recorded answer · priced by {profile.name}",
    )
    fig.update_yaxes(rangemode="tozero")
    return fig, copy_caption(record, rows, profile.name)


def copy_caption(record: TextRecord, rows, costs_name: str) -> str:
    """The view's sentence, from its own numbers."""
    at = copies(record.prompt_ids, record.tokens)
    offered = sum(1 for c in at if c.tokens)
    borne = sum(1 for c in at if c.match)
    by = {r.policy: r for r in rows}
    windows = [by[f"k={k}"] for k in COPY_WINDOWS]
    best = max(windows, key=lambda r: r.speedup)
    own, oracle, peers = by["lookup (cost)"], by["oracle"], by["k=10"]
    return (
        f"{INTRO}\n\nOn this answer a copy was on offer at {offered} of {len(at)} positions and its first token "
        f"was right at {borne}. Priced by **{costs_name}**: `lookup` as it runs is predicted "
        f"**{own.speedup:.2f}×** `ar` (τ {own.tau:.2f}); the best fixed length, {best.policy}, "
        f"{best.speedup:.2f}×; the peers' k=10, {peers.speedup:.2f}×; the oracle {oracle.speedup:.2f}×. "
        "A long copy pays only where passes over many tokens are cheap or the text repeats itself: on a CPU a "
        "pass over 8 tokens costs far more than one step, so a wrong long copy costs more than it saves."
    )
