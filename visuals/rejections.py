"""The "why rejected" figure: per drafting lane, how many of its rejected drafts each cause explains.

The counts come from the run's token table (:func:`spec_core.serve.live_export.cause_counts`: lane,
rejection_cause, count, examples), so the figure and the downloaded CSV never disagree. The rule that names a
cause is :mod:`spec_core.serve.rejections` (docs/EXPORT.md); the hover quotes a few of the rejections.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from visuals.plots import base_layout
from visuals.style import series_style

TITLE = "Why drafts were rejected"


def why_rejected_figure(counts) -> go.Figure:
    """Grouped bars, one series per lane, one group per cause; ``counts`` a ``cause_counts`` table."""
    fig = go.Figure()
    lanes = list(dict.fromkeys(counts["lane"])) if len(counts) else []
    for i, lane in enumerate(lanes):
        colour, _, _ = series_style(i)
        mine = counts[counts["lane"] == lane]
        fig.add_trace(
            go.Bar(
                x=list(mine["rejection_cause"]),
                y=list(mine["count"]),
                name=lane,
                marker={"color": colour, "pattern": {"shape": ["", "/", "."][i % 3]}},  # not colour alone
                customdata=["<br>".join(map(html.escape, ex)) or "none" for ex in mine["examples"]],  # <|im_end|>
                hovertemplate="%{x}: %{y} rejections<br>%{customdata}<extra>" + lane + "</extra>",
            )
        )
    totals = " · ".join(f"{lane}: {int(counts.loc[counts['lane'] == lane, 'count'].sum())} rejected" for lane in lanes)
    fig.update_layout(barmode="group")
    return base_layout(
        fig,
        TITLE,
        "cause (docs/EXPORT.md)",
        "rejected drafts",
        empty=not lanes,
        empty_text="no rejected draft in this run",
        note=totals,
    )
