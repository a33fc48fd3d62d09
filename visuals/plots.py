"""Plotly figures of a run's rounds, one series per method (lane), so each method sits beside its baseline.

Inputs are ``lanes``: method name → that method's :class:`RoundEvent` list, in round order. Plain decoding
(``ar``) drafts nothing and is left out of the draft plots. Every figure has titled axes with units, a legend,
colours + dashes + markers from :mod:`visuals.style`, and under its title the sample it rests on (how many
rounds, positions or tokens: :func:`base_layout`'s ``note``), so a curve drawn from three rounds says so.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from spec_core.core.quotes import Quote
from spec_core.core.types import RoundEvent
from spec_core.drafters import is_copied, source_part
from spec_core.engine.methods import is_plain
from spec_core.engine.replay import PolicyReplay
from visuals.baseline import REPLAY_HOVER, WindowRounds, replay_note, windows
from visuals.style import OKABE_ITO, series_style

Lanes = Mapping[str, Sequence[RoundEvent]]

HEIGHT = 360


def drafting_lanes(lanes: Lanes) -> dict[str, Sequence[RoundEvent]]:
    """The lanes that draft (a method whose rounds never drafted — plain decoding — has nothing to show)."""
    return {m: ev for m, ev in lanes.items() if not is_plain(m) and (not ev or any(e.draft_len for e in ev))}


def rounds_note(spec: Lanes, unit: str = "rounds") -> str:
    """``"pacer: 60 rounds · fixed:4: 42 rounds"``: what each lane's series rests on."""
    return " · ".join(f"{m}: {len(ev)} {unit if len(ev) != 1 else unit.rstrip('s')}" for m, ev in spec.items())


TITLE_CHARS, NOTE_CHARS, AXIS_CHARS = 44, 64, 30  # lines a 360-px phone plot holds at the house font sizes
LEGEND_ROW_PX = 20  # one legend entry's row on a phone, where every entry takes a row of its own


def wrapped(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters (``<br>``), so that a title, its note or an axis
    title never runs past a phone's plot; text with markup of its own is left as it is."""
    if len(text) <= width or "<" in text:
        return text
    return "<br>".join(textwrap.wrap(text, width))


def base_layout(
    fig: go.Figure,
    title: str,
    x: str,
    y: str,
    empty: bool = False,
    empty_text: str = "no drafted rounds yet",
    note: str = "",
) -> go.Figure:
    """The house layout; ``note``: the sample the figure rests on, a small line under the title.

    Built for the narrowest screen too: the title, note and y-axis title wrap (:func:`wrapped`), the mode bar stands
    on the right edge instead of over the title, and the figure grows by a row for each legend entry past two, so
    that a legend a phone stacks one entry a row never climbs into the x-axis title."""
    title_text, note_text = wrapped(title, TITLE_CHARS), wrapped(note, NOTE_CHARS) if note and not empty else ""
    text = f"{title_text}<br><sup>{note_text}</sup>" if note_text else title_text
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    top = 40 + 20 * title_text.count("<br>") + (26 + 18 * note_text.count("<br>") if note_text else 0)
    fig.update_layout(
        title={"text": text, "font": {"size": 15}},
        template="plotly_white",
        height=HEIGHT + LEGEND_ROW_PX * max(0, entries - 2) + (top - 40),
        margin={"l": 60, "r": 20, "t": top, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0},
        xaxis_title=x,
        yaxis_title=wrapped(y, AXIS_CHARS),
        hovermode="closest",
        modebar={"orientation": "v"},
    )
    if empty:
        fig.add_annotation(text=empty_text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def measured_lane_trace(values: Sequence[Quote], names: Sequence[str], hovers: Sequence[str]) -> go.Scatter:
    """The Live lanes' measured speedups (◆ with their 10–90% whiskers) beside a view's predicted bars: the same
    methods' figures from another view, so that a reader sees whether they agree (:func:`spec_core.core.quotes.
    compare_quotes` says it in ``hovers``)."""
    return go.Scatter(
        x=[q.value for q in values],
        y=list(names),
        mode="markers",
        name="Live lane, measured",
        marker={"symbol": "diamond", "size": 11, "color": OKABE_ITO["vermillion"]},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [q.high - q.value for q in values],
            "arrayminus": [q.value - q.low for q in values],
            "color": OKABE_ITO["vermillion"],
        },
        hovertext=list(hovers),
        hoverinfo="text",
    )


def value_labels(x: Sequence[float], names: Sequence[str], texts: Sequence[str]) -> go.Scatter:
    """A horizontal bar chart's value labels as their own text trace, each starting at ``x`` in its row (right of
    the row's marks: :func:`visuals.labels.row_label_x`), so that no name, whisker or ◆ runs into one."""
    return go.Scatter(
        x=list(x),
        y=list(names),
        mode="text",
        text=list(texts),
        textposition="middle right",
        textfont={"size": 10},
        cliponaxis=False,
        hoverinfo="skip",
        showlegend=False,
        name="values",
    )


def drafted_line(method: str, events: Sequence[RoundEvent], colour: str, dash: str) -> go.Scatter:
    """A lane's drafted length per round, as a step line (the draft-length plot's, and the views' that sit
    beside it)."""
    return go.Scatter(
        x=[e.index for e in events],
        y=[e.draft_len for e in events],
        name=f"{method} · drafted",
        mode="lines",
        line={"color": colour, "dash": dash, "shape": "hv", "width": 2},
        legendgroup=method,
        hovertemplate="round %{x}<br>drafted %{y} tokens<extra>" + method + "</extra>",
    )


def replayed_window_traces(base: WindowRounds, colour: str, dash: str, marker: str) -> list[go.Scatter]:
    """A replayed fixed window per round: drafted (line) and kept (markers), as a lane's (it has no timing)."""
    rounds = list(range(base.rounds))
    hover = "<br>" + REPLAY_HOVER + "<extra>" + base.name + "</extra>"
    return [
        go.Scatter(
            x=rounds,
            y=list(base.drafted),
            name=f"{base.name} · drafted",
            mode="lines",
            line={"color": colour, "dash": dash, "shape": "hv", "width": 2},
            legendgroup=base.name,
            hovertemplate="round %{x}<br>drafted %{y} tokens" + hover,
        ),
        go.Scatter(
            x=rounds,
            y=list(base.kept),
            name=f"{base.name} · accepted",
            mode="markers",
            marker={"color": colour, "symbol": marker, "size": 7},
            legendgroup=base.name,
            hovertemplate="round %{x}<br>accepted %{y} tokens" + hover,
        ),
    ]


def draft_lengths_figure(lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """Per round: how many tokens were drafted (line) and how many of them were accepted (markers); ``replayed``:
    a fixed window replayed on the run's text, drawn as the baseline when no fixed-window lane ran."""
    fig = go.Figure()
    spec = drafting_lanes(lanes)
    replays = [b for b in windows(lanes, replayed) if b.replayed]
    for i, (method, events) in enumerate(spec.items()):
        colour, dash, marker = series_style(i)
        rounds = [e.index for e in events]
        fig.add_trace(drafted_line(method, events, colour, dash))
        fig.add_trace(
            go.Scatter(
                x=rounds,
                y=[e.accepted for e in events],
                name=f"{method} · accepted",
                mode="markers",
                marker={"color": colour, "symbol": marker, "size": 7},
                legendgroup=method,
                hovertemplate="round %{x}<br>accepted %{y} tokens<extra>" + method + "</extra>",
            )
        )
    for j, base in enumerate(replays):
        fig.add_traces(replayed_window_traces(base, *series_style(len(spec) + j)))
    return per_round_layout(fig, "Draft length and accepted length per round", spec, replay_note(replays))


def kept_bars(fig: go.Figure, method: str, events: Sequence[RoundEvent], parts, split) -> None:
    """Stacked bars, one per round of ``method``: its kept drafts split by who supplied them. ``parts``: (name,
    colour) of each share; ``split(event)``: the round's count for each, in that order. A share no round has is
    left out of the legend."""
    rounds = [e.index for e in events]
    counts = [split(e) for e in events]
    for k, (name, shade) in enumerate(parts):
        values = [c[k] for c in counts]
        if any(values):
            fig.add_trace(
                go.Bar(
                    x=rounds,
                    y=values,
                    name=f"{method} · {name}",
                    marker={"color": shade, "opacity": 0.75},
                    legendgroup=method,
                    offsetgroup=method,
                    hovertemplate=f"round %{{x}}: %{{y}} {name}<extra>{method}</extra>",
                )
            )


def round_markers(method: str, points, name: str, hover: str, colour: str, marker: str, **kw) -> go.Scatter:
    """One marker per round of ``method`` at ``points`` ((round, value) pairs): ``name`` after the method in the
    legend, ``hover`` the sentence after "round N: " (``%{y}`` the value); ``kw`` goes to the trace (``yaxis``)."""
    return go.Scatter(
        x=[x for x, _ in points],
        y=[y for _, y in points],
        name=f"{method} · {name}",
        mode="markers",
        marker={"color": colour, "symbol": marker, "size": 7, "line": {"color": "white", "width": 1}},
        legendgroup=method,
        hovertemplate=f"round %{{x}}: {hover}<extra>{method}</extra>",
        **kw,
    )


def per_round_layout(fig: go.Figure, title: str, spec: Lanes, more: str = "") -> go.Figure:
    """The house layout of a figure drawn round by round: tokens against the round, both from zero; ``more``: a
    further sample for the note (a replayed baseline's rounds)."""
    note = " · ".join(n for n in (rounds_note(spec), more) if n)
    base_layout(fig, title, "round (target forward pass)", "tokens", empty=not any(spec.values()), note=note)
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(tickformat="d", rangemode="tozero")
    return fig


def acceptance_by_position(events: Sequence[RoundEvent]) -> tuple[list[int], list[float], list[int]]:
    """(positions 1..K, acceptance rate at each, rounds that drafted that far).

    The draft at position k is accepted when ``accepted >= k``; the rate counts only rounds that drafted k.
    """
    longest = max((e.draft_len for e in events), default=0)
    positions, rates, counts = [], [], []
    for k in range(1, longest + 1):
        reached = [e for e in events if e.draft_len >= k]
        positions.append(k)
        counts.append(len(reached))
        rates.append(sum(e.accepted >= k for e in reached) / len(reached))
    return positions, rates, counts


def round_source(event: RoundEvent) -> str:
    """Where a round's drafts came from (one source a round): a tag of ``RoundEvent.draft_sources``, which the
    drafter that writes it names (:func:`spec_core.drafters.source_part`); "" for an event without them (the pair's
    draft)."""
    sources = getattr(event, "draft_sources", ())
    return sources[0] if sources else ""


def source_name(source: str) -> str:
    """A round source in a legend ("copied", "draft model"), in its drafter's words."""
    return str(getattr(source_part(source), "source_name", source))


def copied_round(event: RoundEvent) -> bool:
    """Whether the round's drafts were copied from the text (no draft model ran), as their drafter says."""
    return is_copied(round_source(event))


def acceptance_by_position_figure(lanes: Lanes) -> go.Figure:
    """Acceptance rate of the draft at each position of the window (conditional on being drafted)."""
    fig = go.Figure()
    spec = drafting_lanes(lanes)
    series = []  # a lane whose rounds drew on both sources (hybrid) gets one series per source
    for method, events in spec.items():
        sources = {round_source(e) for e in events if e.draft_len}
        if len(sources) > 1:
            series += [
                (f"{method} · {source_name(s)}", [e for e in events if round_source(e) == s]) for s in sorted(sources)
            ]
        else:
            series.append((method, events))
    for i, (method, events) in enumerate(series):
        colour, dash, marker = series_style(i)
        pos, rates, counts = acceptance_by_position(events)
        fig.add_trace(
            go.Scatter(
                x=pos,
                y=rates,
                name=method,
                mode="lines+markers+text",
                text=[f"n={c}" for c in counts],  # the rounds behind each point, on the point
                textposition="top center" if i % 2 == 0 else "bottom center",  # two lanes' labels apart
                textfont={"size": 10, "color": colour},
                customdata=counts,
                line={"color": colour, "dash": dash, "width": 2},
                marker={"symbol": marker, "size": 8},
                hovertemplate="position %{x}<br>accepted in %{y:.0%} of %{customdata} rounds<extra>"
                + method
                + "</extra>",
            )
        )
    base_layout(
        fig,
        "Acceptance by position in the draft",
        "position in the draft (1 = first drafted token)",
        "acceptance rate (fraction of rounds)",
        empty=not any(spec.values()),
        note="n = rounds that drafted that far; " + rounds_note(spec),
    )
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    fig.update_xaxes(dtick=1)
    return fig


def accepted_histogram(events: Sequence[RoundEvent]) -> tuple[list[int], list[float]]:
    """(accepted length 0..max, fraction of rounds with exactly that many accepted drafts)."""
    if not events:
        return [], []
    top = max(e.draft_len for e in events)
    counts = [0] * (top + 1)
    for e in events:
        counts[e.accepted] += 1
    return list(range(top + 1)), [c / len(events) for c in counts]


def accepted_histogram_figure(lanes: Lanes) -> go.Figure:
    """How many drafts each round kept: mass at 0 = wasted drafting, mass at the window = window too short."""
    fig = go.Figure()
    spec = drafting_lanes(lanes)
    for i, (method, events) in enumerate(spec.items()):
        colour, _, _ = series_style(i)
        xs, fractions = accepted_histogram(events)
        fig.add_trace(
            go.Bar(
                x=xs,
                y=fractions,
                name=method,
                marker={"color": colour, "pattern": {"shape": ["", "/", "x", ".", "-"][i % 5]}},
                hovertemplate="%{y:.0%} of rounds accepted %{x} drafts<extra>" + method + "</extra>",
            )
        )
    base_layout(
        fig,
        "Accepted length per round (histogram)",
        "drafts accepted in a round (tokens)",
        "fraction of rounds",
        empty=not any(spec.values()),
        note=rounds_note(spec),
    )
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    fig.update_xaxes(dtick=1)
    return fig


def heuristic_window_figure(lanes: Lanes) -> go.Figure:
    """The heuristic schedule at work: the window K per round (+2 after an all-accepted round, else −1)."""
    fig = go.Figure()
    for i, (method, events) in enumerate(lanes.items()):
        colour, dash, marker = series_style(i)
        xs = [e.index for e in events]
        windows = [e.policy_trace.get("window", e.draft_len) for e in events]
        full = ["all accepted" if e.draft_len and e.accepted == e.draft_len else "some rejected" for e in events]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=windows,
                name=method,
                mode="lines+markers",
                customdata=full,
                line={"color": colour, "dash": dash, "shape": "hv"},
                marker={"symbol": marker},
                hovertemplate="round %{x}<br>window %{y}<br>%{customdata}<extra>" + method + "</extra>",
            )
        )
    base_layout(
        fig,
        "Draft window chosen by the policy",
        "round (target forward pass)",
        "window K (tokens)",
        empty=not any(lanes.values()),
        note=rounds_note(lanes),
    )
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(tickformat="d", rangemode="tozero")
    return fig


def confidence_figure(lanes: Lanes) -> go.Figure:
    """Every drafted token's own draft probability q(x) by position, against the confidence threshold."""
    fig = go.Figure()
    thresholds = set()
    for i, (method, events) in enumerate(lanes.items()):
        colour, _, marker = series_style(i)
        for kind, symbol, keep in (("accepted", marker, True), ("rejected", "x-thin-open", False)):
            xs, ys, rounds = [], [], []
            for e in events:
                for k, q in enumerate(e.draft_probs):
                    if (k < e.accepted) == keep:
                        xs.append(k + 1)
                        ys.append(q)
                        rounds.append(e.index)
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    name=f"{method} · {kind}",
                    mode="markers",
                    customdata=rounds,
                    marker={
                        "color": colour if keep else OKABE_ITO["vermillion"],
                        "symbol": symbol,
                        "size": 8,
                        "line": {"width": 1.5, "color": colour if keep else OKABE_ITO["vermillion"]},
                    },
                    hovertemplate="round %{customdata}, position %{x}<br>q(x) = %{y:.3f}<extra>" + kind + "</extra>",
                )
            )
        thresholds |= {e.policy_trace["threshold"] for e in events if "threshold" in e.policy_trace}
    for t in sorted(thresholds):
        fig.add_hline(y=t, line={"color": OKABE_ITO["black"], "dash": "dash"}, annotation_text=f"threshold {t:g}")
    base_layout(
        fig,
        "Draft confidence q(x) of each drafted token",
        "position in the draft",
        "draft probability q(x)",
        empty=not any(lanes.values()),
        note=" · ".join(
            f"{m}: {sum(e.draft_len for e in ev)} drafted tokens in {len(ev)} rounds" for m, ev in lanes.items()
        ),
    )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return fig
