"""The policy playground's figures: one recorded pass, every policy replayed at once (no model call).

:func:`playground_view` is the one function the app's sliders call: from a
:class:`~spec_core.serve.playground.TextRecord` and the slider values it draws the chosen policy's rounds
against the oracle and the best fixed window, the predicted speed of every policy, and PACER's t × ρ grid
coloured by predicted speedup with the defaults marked, plus a few sentences a student can follow.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import plotly.graph_objects as go

from spec_core.core.lane_speed import cost_source
from spec_core.core.quotes import Quote, compare_quotes
from spec_core.engine.replay import (
    DEFAULT_COSTS,
    FIXED_WINDOWS,
    ORACLE,
    PolicyReplay,
    TextRecord,
    best_fixed,
    default_costs,
    pacer_grid,
    replay_all,
)
from spec_core.policies.confidence import ConfidenceLength
from spec_core.policies.fixed import FixedLength, HeuristicLength
from spec_core.policies.pacer import PacerLength, PacerParams
from visuals.labels import row_label_top, row_label_x
from visuals.plots import base_layout, measured_lane_trace, value_labels
from visuals.style import OKABE_ITO

FAMILIES = (FixedLength.prefix, HeuristicLength.prefix, ConfidenceLength.prefix, PacerLength.prefix)  # the radio
# slider key, label, minimum, maximum, step, default (the app builds one gr.Slider per row)
SLIDERS = [
    ("k", "K (fixed:K)", 1, 16, 1, 4),
    ("conf", "T (confidence:T)", 0.0, 1.0, 0.05, 0.4),
    ("b", "b (PACER block)", 1, 8, 1, PacerParams.block),
    ("t", "t (PACER threshold)", 0.0, 1.0, 0.05, PacerParams.threshold),
    ("rho", "ρ (PACER growth)", 1.0, 2.0, 0.05, PacerParams.rho),
    ("max", "max (PACER length)", 1, 16, 1, PacerParams.max_len),
]
GRID_T = tuple(round(x, 2) for x in np.arange(0.1, 0.95, 0.1))
GRID_RHO = (1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0)
INTRO = (
    "### Policy playground\nAt temperature 0 every draft-length policy writes the same text, the target's greedy "
    "answer; a policy only changes **how many rounds** (target forward passes) it takes and how many drafts it "
    "wastes. **Record this text** answers this tab's prompt greedily and runs one pass over the answer (for each "
    "position: what the draft would propose, how sure it is, what PACER's pre-verifier predicts, and how much the "
    "target keeps); then every slider replays the policies from that record at once, with no model call."
)
__all__ = ["EMPTY", "FAMILIES", "INTRO", "SLIDERS", "playground_view"]
EMPTY = "Press **Record this text** to record the prompt above (or load a saved record)."


def chosen_policy(family: str, k, conf, b, t, rho, max_len) -> str | PacerParams:
    """The policy the sliders describe (PACER's block never exceeds its max)."""
    if family == FixedLength.prefix:
        return f"{family}:{int(k)}"
    if family == HeuristicLength.prefix:
        return family
    if family == ConfidenceLength.prefix:
        return f"{family}:{float(conf):g}"
    return PacerParams(min(int(b), int(max_len)), round(float(t), 4), round(float(rho), 4), int(max_len))


def _name(policy) -> str:
    return policy.describe() if isinstance(policy, PacerParams) else policy


def rounds_figure(record: TextRecord, chosen: PolicyReplay, oracle: PolicyReplay, best: PolicyReplay) -> go.Figure:
    """Draft length per round, placed at the token where the round starts: the chosen policy (drafted, kept),
    the oracle's drafts, the best fixed window, and under them what the target would keep from each position."""
    fig = go.Figure()
    n = len(record.tokens)
    fig.add_trace(
        go.Bar(
            x=list(range(n)),
            y=record.match.tolist(),
            name="target keeps, from this token",
            marker={"color": OKABE_ITO["grey"], "opacity": 0.35},
            hovertemplate="a round starting at token %{x} keeps %{y} drafts<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(chosen.starts),
            y=list(chosen.lengths),
            name=f"{chosen.policy} · drafted",
            mode="lines+markers",
            line={"color": OKABE_ITO["blue"], "shape": "hv", "width": 2},
            marker={"symbol": "circle-open", "size": 8},
            hovertemplate="round at token %{x}: drafted %{y}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(chosen.starts),
            y=list(chosen.kept),
            name=f"{chosen.policy} · kept",
            mode="markers",
            marker={"color": OKABE_ITO["green"], "symbol": "circle", "size": 7},
            hovertemplate="round at token %{x}: kept %{y}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(oracle.starts),
            y=list(oracle.lengths),
            name="oracle · drafts (all kept)",
            mode="markers",
            marker={"color": OKABE_ITO["orange"], "symbol": "diamond", "size": 8},
            hovertemplate="oracle round at token %{x}: drafted %{y}<extra></extra>",
        )
    )
    k = best.lengths[0] if best.lengths else 0
    fig.add_trace(
        go.Scatter(
            x=[0, n],
            y=[k, k],
            name=f"best fixed window ({best.policy})",
            mode="lines",
            line={"color": OKABE_ITO["black"], "dash": "dot"},
            hoverinfo="skip",
        )
    )
    title = (
        f"{chosen.policy}: {chosen.rounds} rounds · oracle {oracle.rounds} · {best.policy} {best.rounds}"
        if len(chosen.policy) < 24
        else f"{chosen.rounds} rounds · oracle {oracle.rounds} · {best.policy} {best.rounds}"
    )
    base_layout(
        fig,
        title,
        "token of the answer where the round starts",
        "drafts per round",
        note=f"one recorded text of {n} tokens, every round replayed on it",
    )
    fig.update_layout(barmode="overlay", height=380)
    return fig


def live_checks(record: TextRecord, replays: list[PolicyReplay]) -> list[tuple[PolicyReplay, Quote, str]]:
    """(replay, the Live lane's quote, the sentence) for each replayed policy that also ran as a lane of the Live run
    the record carries (``meta["live_quotes"]``): its measured speedup against this replay's, agreeing within their
    spreads or with the reason why not (:func:`spec_core.core.quotes.compare_quotes`)."""
    lanes = {m: Quote.from_dict(q) for m, q in (record.meta.get("live_quotes") or {}).items()}
    out = []
    for r in replays:
        mine = r.quote(record.costs.source, record.prompt) if record.costs is not None and r.policy in lanes else None
        if mine is not None:
            out.append((r, lanes[r.policy], compare_quotes(lanes[r.policy], mine).text))
    return out


def speed_figure(
    replays: list[PolicyReplay], chosen: str, checks: list[tuple[PolicyReplay, Quote, str]] = ()
) -> go.Figure:
    """Predicted speedup over ar of every policy (τ when the record has no costs) with its 10–90% spread over the
    rounds, the chosen one highlighted, and a Live lane's measured speedup (◆) beside the same policy's bar."""
    timed = all(r.predicted_speedup is not None for r in replays)
    value = [r.predicted_speedup if timed else r.tau for r in replays]
    spreads = [r.spread if timed else None for r in replays]
    colours = [
        OKABE_ITO["orange"] if r.policy == ORACLE else OKABE_ITO["blue"] if r.policy == chosen else OKABE_ITO["grey"]
        for r in replays
    ]
    texts = [f"×{v:.2f} · τ {r.tau:.2f} · {r.wasted} wasted" if timed else f"τ {v:.2f}" for v, r in zip(value, replays)]
    fig = go.Figure(
        go.Bar(
            x=value,
            y=[r.policy for r in replays],
            orientation="h",
            marker={"color": colours},
            hovertext=[f"{r.policy}: {t}" for r, t in zip(replays, texts)],
            hoverinfo="text",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [s[1] - v if s else 0.0 for s, v in zip(spreads, value)],
                "arrayminus": [v - s[0] if s else 0.0 for s, v in zip(spreads, value)],
                "color": OKABE_ITO["black"],
                "thickness": 1,
            },
        )
    )
    ends = [[v, *(s or ())] for v, s in zip(value, spreads)]  # each row's marks: the bar, its whisker, a ◆
    if checks and timed:
        fig.add_trace(
            measured_lane_trace([q for _, q, _ in checks], [r.policy for r, _, _ in checks], [t for *_, t in checks])
        )
        for r, q, _ in checks:
            ends[replays.index(r)].append(q.high)
    starts = row_label_x(ends)
    fig.add_trace(value_labels(starts, [r.policy for r in replays], texts))
    fig.update_xaxes(range=[0, row_label_top(starts, texts, 0.0)])
    base_layout(
        fig,
        "Predicted speedup over ar" if timed else "τ (tokens per round)",
        "predicted speedup" if timed else "τ",
        "",
        note=f"each bar: one policy replayed on the same {replays[0].tokens}-token text" if replays else "",
    )
    fig.update_layout(height=380, showlegend=False, margin={"l": 200, "r": 20, "t": 40, "b": 40})
    fig.update_yaxes(autorange="reversed")
    return fig


def grid_figure(
    record: TextRecord, block: int, max_len: int, t: float, rho: float, lane_t: float | None = None
) -> go.Figure:
    """PACER's predicted speedup over t × ρ at the chosen b and max, the defaults and the sliders marked."""
    grid = pacer_grid(record, GRID_T, GRID_RHO, block, max_len)
    fig = go.Figure(
        go.Heatmap(
            z=grid,
            x=list(GRID_T),
            y=[str(r) for r in GRID_RHO],
            colorscale="Viridis",
            colorbar={"title": "×"},
            hovertemplate="t %{x}, ρ %{y}: %{z:.3f}<extra></extra>",
        )
    )
    d = PacerParams()
    mark = ((d.threshold, d.rho), "shipped default", "x-thin", -30)
    if lane_t is not None:  # the t `pacer` runs with on this record's pair and precision (t=auto), as in the Live tab
        mark = ((float(lane_t), d.rho), "pacer's t here", "x-thin", -30)
    for (x, y), name, symbol, ay in [
        mark,
        ((t, rho), "sliders", "circle-open", 30),
    ]:
        row = str(min(GRID_RHO, key=lambda r: abs(r - y)))
        fig.add_trace(
            go.Scatter(
                x=[x],
                y=[row],
                mode="markers",
                name=name,
                hoverinfo="skip",
                marker={"symbol": symbol, "size": 16, "color": "black", "line": {"width": 3, "color": "black"}},
            )
        )
        fig.add_annotation(
            x=x,
            y=row,
            text=f"<b>{name}</b>",
            showarrow=True,
            arrowhead=2,
            ax=0,
            ay=ay,
            bgcolor="white",
            bordercolor="black",
            borderwidth=1,
            font={"color": "black", "size": 12},
        )
    base_layout(
        fig,
        f"PACER, b = {block}, max = {max_len}: predicted speedup",
        "t (threshold)",
        "ρ (growth)",
        note=f"each cell: PACER replayed on the recorded {len(record.tokens)}-token text",
    )
    fig.update_layout(height=380, showlegend=False)
    fig.update_yaxes(type="category")
    return fig


def empty_figure(text: str = "record a text first") -> go.Figure:
    return base_layout(go.Figure(), "", "", "", empty=True, empty_text=text)


def summary_text(record: TextRecord, chosen: PolicyReplay, oracle: PolicyReplay, best: PolicyReplay) -> str:
    """What the numbers say, in sentences."""

    def speed(r: PolicyReplay, spread: bool = False) -> str:
        if r.predicted_speedup is None:
            return f"τ {r.tau:.2f}"
        low_high = r.spread if spread else None
        return f"×{r.predicted_speedup:.2f}" + (f" (10–90%: {low_high[0]:.2f}–{low_high[1]:.2f})" if low_high else "")

    gain = ""
    if chosen.ms is not None and oracle.ms is not None and best.ms is not None and best.ms > oracle.ms:
        share = (best.ms / chosen.ms - 1) / (best.ms / oracle.ms - 1)
        gain = (
            f" It captures **{100 * share:.0f}%** of the oracle's gain over the best fixed window."
            if share >= 0
            else " It is slower than the best fixed window here."
        )
    meta = record.meta
    costs = record.costs
    where = f"costs {cost_source(costs)}" if costs is not None else "no costs: rounds and τ only"
    where += " (the Live tab's run)" if costs is not None and costs.source == "run" else ""
    return (
        f"**{chosen.policy}** takes **{chosen.rounds} rounds** for these {chosen.tokens} tokens (τ {chosen.tau:.2f}); "
        f"it drafts {chosen.drafted} tokens and the target throws away {chosen.wasted}: predicted {speed(chosen, spread=True)}. "
        f"The **oracle**, which knows what the target will keep and drafts the cheapest plan (never a wasted draft), "
        f"needs {oracle.rounds} rounds "
        f"({speed(oracle)}); the best fixed window, **{best.policy}**, {best.rounds} ({speed(best)}).{gain}\n\n"
        f"<small>Record: {meta.get('source', 'a saved record')}, {meta.get('dtype', '?')} "
        f"{meta.get('draft', '')} draft, recorded in {meta.get('record_s', float('nan')):.1f} s; speed from the "
        f"cost model, {where}; a spread resamples the replayed rounds. On a CPU every target pass is "
        f"batch-invariant, so the replay equals real runs round for round at every precision (on a GPU, outside float32, a real run may part at a near-tie).</small>"
    )


def playground_view(record: TextRecord | None, family: str, k, conf, b, t, rho, max_len):
    """(rounds figure, speed figure, t × ρ grid, markdown) for the slider values; no model call."""
    if record is None:
        return EMPTY, empty_figure(), empty_figure(), empty_figure()
    if record.costs is None:
        costs = default_costs(record.meta.get("dtype"))
        where = "default" if costs is DEFAULT_COSTS else "this machine's cached"
        record = dataclasses.replace(record, costs=costs, meta={**record.meta, "costs": where})
    policy = chosen_policy(family, k, conf, b, t, rho, max_len)
    name = _name(policy)
    policies = [*(f"fixed:{w}" for w in FIXED_WINDOWS), "heuristic", f"confidence:{float(conf):g}"]
    policies += [p for p in [name, ORACLE] if p not in policies]
    replays = replay_all(record, [policy if p == name else p for p in policies])
    chosen = next((r for r in replays if r.policy == name), None)
    oracle = next(r for r in replays if r.policy == ORACLE)
    best = best_fixed(replays)
    note = ""
    if chosen is None:  # PACER without pre-verifier scores: draw the rest, and say why PACER is missing
        chosen, note = (
            best,
            f"\n\n*{name} cannot be replayed here: this record has no pre-verifier scores (no PACER head matches its draft).*",
        )
    scored = "" in record.predicted
    grid = (
        grid_figure(record, min(int(b), int(max_len)), int(max_len), float(t), float(rho), record.meta.get("pacer_t"))
        if scored
        else (empty_figure("no pre-verifier scores in this record"))
    )
    checks = live_checks(record, replays)
    said = "".join(f"\n\n{text}" for _, _, text in checks)
    return (
        summary_text(record, chosen, oracle, best) + note + said,
        rounds_figure(record, chosen, oracle, best),
        speed_figure(replays, name, checks),
        grid,
    )
