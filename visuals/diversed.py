"""DIVERSED's views (arXiv 2604.07622): w_t per drafted token along the text, the relaxed rules in the
step-through, and the acceptance-vs-quality Pareto figure of ``python -m spec_core pareto``.

Registered through :mod:`visuals.views` (``register_view`` / ``register_rule``). The w_t lane reads
``RoundEvent.verifier_trace`` (``w``, ``p_x``, ``q_x``, ``nu_x``, ``accept_prob``) as the verifiers wrote it;
a lossless lane (no trace) is drawn at w = 1, its definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from spec_core.core.types import RoundEvent
from spec_core.engine.replay import PolicyReplay
from spec_core.verifiers.diversed import DiversedVerifier
from spec_core.verifiers.lenient import LenientVerifier
from spec_core.verifiers.lossless import LosslessVerifier
from spec_core.verifiers.static import StaticVerifier
from visuals.baseline import REPLAY_HOVER, WindowRounds, replay_sentence, windows
from visuals.labels import POSITIONS, Canvas, Point, place_labels
from visuals.plots import Lanes, base_layout, drafting_lanes
from visuals.style import OKABE_ITO, series_style
from visuals.views import View, register_view


def weight_points(events: Sequence[RoundEvent]) -> dict[str, list]:
    """Every drafted token of a lane: its position in the generated text, w, ν(x), p(x), q(x), kept or not.

    Positions count generated tokens from the first round (a rejected draft sits at the position it tried
    to fill). Lanes without a ``w`` trace are lossless: w = 1 and ν = p.
    """
    out: dict[str, list] = {k: [] for k in ("x", "w", "nu", "p", "q", "accept", "kept", "piece", "round")}
    if not events:
        return out
    start = events[0].context_len
    for e in events:
        tr = e.verifier_trace
        for k in range(e.draft_len):
            p = tr["p_x"][k] if "p_x" in tr else e.target_probs[k]
            out["x"].append(e.context_len - start + k)
            out["w"].append(tr["w"][k] if "w" in tr else 1.0)
            out["nu"].append(tr["nu_x"][k] if "nu_x" in tr else p)
            out["p"].append(p)
            out["q"].append(tr["q_x"][k] if "q_x" in tr else e.draft_probs[k])
            out["accept"].append(e.accept_probs[k])
            out["kept"].append(k < e.accepted)
            out["piece"].append(e.draft_pieces[k])
            out["round"].append(e.index)
    return out


def replayed_weights_trace(base: WindowRounds, colour: str, dash: str, marker: str) -> go.Scatter:
    """A replayed fixed window's drafted tokens along the text at w = 1 (lossless: the target's own rule), × where
    the target did not keep them."""
    x, kept = [], []
    for start, drafted, k in zip(base.starts, base.drafted, base.kept):
        x += [start + j for j in range(drafted)]
        kept += [j < k for j in range(drafted)]
    colours = [colour if ok else OKABE_ITO["vermillion"] for ok in kept]
    return go.Scatter(
        x=x,
        y=[1.0] * len(x),
        name=f"{base.name} · w = 1 (lossless)",
        mode="markers",
        marker={
            "symbol": [marker if ok else "x-thin-open" for ok in kept],
            "size": 7,
            "color": colours,
            "line": {"width": 1.5, "color": colours},
        },
        customdata=["kept" if ok else "not kept" for ok in kept],
        hovertemplate="token %{x}: %{customdata}<br>w = 1: a lossless check is the target's own rule<br>"
        + REPLAY_HOVER
        + "<extra>"
        + base.name
        + "</extra>",
    )


def ensemble_weights_figure(lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """w_t of every drafted token along the text, one lane per method (diversed, static, lossless at w = 1); a
    fixed window ``replayed`` on the run's text is the lossless baseline when no fixed-window lane ran."""
    fig = go.Figure()
    replays = [b for b in windows(lanes, replayed) if b.replayed]
    lanes = drafting_lanes(lanes)
    for i, (method, events) in enumerate(lanes.items()):
        colour, dash, marker = series_style(i)
        pts = weight_points(events)
        custom = list(zip(pts["piece"], pts["nu"], pts["p"], pts["q"], pts["accept"], pts["round"]))
        fig.add_trace(
            go.Scatter(
                x=pts["x"],
                y=pts["w"],
                name=method,
                mode="lines+markers",
                customdata=custom,
                line={"color": colour, "dash": dash, "width": 1.5, "shape": "hv"},
                marker={
                    "symbol": [marker if kept else "x-thin-open" for kept in pts["kept"]],
                    "size": 8,
                    "color": [colour if kept else OKABE_ITO["vermillion"] for kept in pts["kept"]],
                    "line": {
                        "width": 1.5,
                        "color": [colour if kept else OKABE_ITO["vermillion"] for kept in pts["kept"]],
                    },
                },
                hovertemplate=(
                    "%{customdata[0]|s}<br>token %{x}, round %{customdata[5]}<br>w = %{y:.3f}<br>"
                    "ν(x) = %{customdata[1]:.3f} (p(x) = %{customdata[2]:.3f}, q(x) = %{customdata[3]:.3f})<br>"
                    "accepted with probability %{customdata[4]:.3f}<extra>" + method + "</extra>"
                ),
            )
        )
    for j, base in enumerate(replays):
        fig.add_trace(replayed_weights_trace(base, *series_style(len(lanes) + j)))
    note = " · ".join(
        [f"{m}: {sum(e.draft_len for e in ev)} drafted tokens" for m, ev in lanes.items()]
        + [f"{b.name}: {sum(b.drafted)} drafted tokens" for b in replays]
    )
    base_layout(
        fig,
        "Ensemble weight w_t of each drafted token (1 = the target's rule, 0 = keep the draft)",
        "generated token position",
        "w_t (target's share of ν)",
        empty=not any(lanes.values()),
        note=note,
    )
    fig.update_yaxes(range=[-0.05, 1.05])
    return fig


def head_note(events: Sequence[RoundEvent]) -> str:
    """`` (head diversed-sampled-low, trained for temperatures 0.1–0.4)``: the ensemble head a DIVERSED lane
    verified with and the band it serves, as its rounds' traces say; "" for a lane without a head."""
    trace = next((e.verifier_trace for e in events if "head" in e.verifier_trace), None)
    if trace is None:
        return ""
    serves = trace.get("head_serves")
    return f" (head {trace['head']}" + (f", trained for {serves})" if serves else ")")


def weights_caption(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """Per lane: the mean w_t of its drafted tokens, and the rejections among them (a replayed fixed window: w = 1
    by definition, and what it did not keep)."""
    parts = []
    replays = [b for b in windows(lanes, replayed) if b.replayed]
    for b in replays:
        parts.append(f"{b.name}: w_t 1 over {sum(b.drafted)} drafted tokens, {sum(b.drafted) - sum(b.kept)} not kept")
    for method, events in drafting_lanes(lanes).items():
        pts = weight_points(events)
        if pts["w"]:
            rejected = sum(not k for k in pts["kept"])
            parts.append(
                f"{method}{head_note(events)}: mean w_t {sum(pts['w']) / len(pts['w']):.2f} over {len(pts['w'])} "
                f"drafted tokens, {rejected} of them not kept"
            )
    if not parts:
        return "No drafted rounds yet."
    return "; ".join(parts) + "." + (f" {replay_sentence(replays)}" if replays else "")


STATIC, LENIENT, DIVERSED = StaticVerifier.prefix, LenientVerifier.prefix, DiversedVerifier.prefix  # a sweep's rows
LOSSLESS = LosslessVerifier.prefix
TASK_STATIC = "task-static"  # rows of the per-task static envelope in a sweep table (pareto --summarise)


def pareto_figure(df: pd.DataFrame, title: str = "Acceptance vs quality (eval split)") -> go.Figure:
    """The rows of ``pareto`` (``method, param, acceptance_rate, quality, ...``): the static sweep as a line
    (the frontier DIVERSED must beat), lenient points, lossless and diversed markers. Every point's hover names
    it; its always-on label is drawn only where it has room (:func:`pareto_labels`)."""
    fig, df = go.Figure(), df.reset_index(drop=True)  # one label per row: row labels must be unique
    canvas = pareto_canvas(df)
    placed = pareto_labels(df, canvas)
    static = df[df["method"] == STATIC].sort_values("acceptance_rate")
    fig.add_trace(
        go.Scatter(
            x=static["acceptance_rate"],
            y=static["quality"],
            mode="lines+markers+text",
            name="static W (frontier)",
            line={"color": OKABE_ITO["blue"], "dash": "solid"},
            marker={"symbol": "circle", "size": STATIC_SIZE},
            **_labels(static, placed),
        )
    )
    mix = df[df["method"] == TASK_STATIC].sort_values("acceptance_rate")
    if not mix.empty:  # the per-task static envelope (pareto --summarise): the room a per-token weight has
        fig.add_trace(
            go.Scatter(
                x=mix["acceptance_rate"],
                y=mix["quality"],
                mode="lines+markers",
                name="static, W chosen per task",
                customdata=mix["param"].astype(str),
                line={"color": OKABE_ITO["green"], "dash": "dash", "shape": "vh"},
                marker={"symbol": "circle-open", "size": MIX_SIZE},
                hovertemplate="W per task: %{customdata}<br>acceptance %{x:.3f}<br>quality %{y:.3f}<extra></extra>",
            )
        )
    for method, (symbol, colour) in MARKS.items():
        rows = df[df["method"] == method]
        if rows.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=rows["acceptance_rate"],
                y=rows["quality"],
                mode="markers+text",
                name=method,
                marker={"symbol": symbol, "size": MARK_SIZE, "color": colour, "line": {"width": 1, "color": "white"}},
                **_labels(rows, placed),
            )
        )
    counts = pd.to_numeric(df["items"], errors="coerce").dropna() if "items" in df.columns else []
    lo, hi = (int(min(counts)), int(max(counts))) if len(counts) else (0, 0)
    items = f"{lo}" if lo == hi else f"{lo}–{hi}"
    note = f"each point: one verifier on {items} eval items" if hi else f"{len(df)} rows (no item counts in the file)"
    base_layout(
        fig,
        title,
        "acceptance rate (accepted / drafted)",
        "quality (mean task reward)",
        empty=df.empty,
        empty_text="no pareto rows",
        note=note,
    )
    fig.update_xaxes(range=list(canvas.x_range))
    if not df.empty:  # fixed, so that the labels' room was reckoned on the axes drawn
        fig.update_yaxes(range=list(canvas.y_range))
    return fig


MARKS = {  # method → (marker, colour) of the points drawn apart from the static line
    LENIENT: ("square", OKABE_ITO["orange"]),
    LOSSLESS: ("star", OKABE_ITO["black"]),
    DIVERSED: ("diamond", OKABE_ITO["purple"]),
}
STATIC_SIZE, MIX_SIZE, MARK_SIZE = 8, 6, 13  # marker diameters (px)
# the static line falls from the top left to the bottom right: above-right and below-left of a point are off it
ON_LINE = ("top right", "bottom left", "top center", "bottom center", "middle right", "middle left")


def pareto_canvas(df: pd.DataFrame) -> Canvas:
    """The axes' ranges: acceptance 0 to 1.05, quality its rows' span with a margin on each side."""
    q = pd.to_numeric(df["quality"], errors="coerce").dropna() if len(df) else pd.Series([0.0, 1.0])
    lo, hi = float(q.min()), float(q.max())
    pad = 0.08 * (hi - lo) if hi > lo else 0.05
    return Canvas((0.0, 1.05), (lo - pad, hi + pad))


def point_name(method: str, param: str) -> str:
    """What a point's hover and label call it: ``W=0.5`` on the static line, else :func:`point_label`."""
    return f"W={param}" if method == STATIC else point_label(method, param)


def pareto_labels(df: pd.DataFrame, canvas: Canvas) -> dict[object, str]:
    """Row index → ``textposition``, for the rows whose label has room (:func:`visuals.labels.place_labels`).
    Most important first: lossless and DIVERSED (the summary's subjects), the static line's ends (the draft alone,
    the target alone), the lenient points, then the rest of the static line."""
    sizes = {STATIC: STATIC_SIZE, TASK_STATIC: MIX_SIZE}
    params = df["param"].astype(str)
    static_end = (df["method"] == STATIC) & params.isin(["0", "1"])
    rank = df["method"].map({LOSSLESS: 0, DIVERSED: 1, LENIENT: 3, STATIC: 4}).where(~static_end, 2)
    order = list(rank.dropna().sort_values(kind="stable").index)

    def point(i, label: str = "") -> Point:
        method = str(df.at[i, "method"])
        size, positions = sizes.get(method, MARK_SIZE), ON_LINE if method == STATIC else POSITIONS
        return Point(float(df.at[i, "acceptance_rate"]), float(df.at[i, "quality"]), size, label, positions)

    wanted = [point(i, point_name(str(df.at[i, "method"]), params[i])) for i in order]
    where = place_labels(wanted, [point(i) for i in df.index], canvas)
    return {i: w for i, w in zip(order, where) if w is not None}


def _labels(rows: pd.DataFrame, placed: dict[object, str]) -> dict:
    """A trace's label keywords: every point named in its hover, labelled where :func:`pareto_labels` found room."""
    names = [point_name(str(m), str(p)) for m, p in zip(rows["method"], rows["param"])]
    return {
        "text": [name if i in placed else "" for i, name in zip(rows.index, names)],
        "textposition": [placed.get(i, "middle right") for i in rows.index],
        "textfont": {"size": 10},
        "customdata": names,
        "hovertemplate": "%{customdata}<br>acceptance %{x:.3f}<br>quality %{y:.3f}<extra></extra>",
    }


def point_label(method: str, param: str) -> str:
    """``lenient:0.5``; a DIVERSED row by its head (``diversed``, ``diversed-sampled``); else the method."""
    if method == LENIENT and param:
        return f"lenient:{param}"
    if method == DIVERSED and param and param != "nan":
        return param if param.startswith(DIVERSED) else f"diversed:head={param}"
    return method


ON_FRONTIER = 0.005  # quality within this of the static line counts as on it (one eval item moves quality by ~0.1)


def sweep_summary(df: pd.DataFrame) -> str:
    """A sentence a student can follow on one sweep: how far the draft alone and the target alone are apart,
    and where DIVERSED sits against the static frontier."""

    def row(method: str, param: str | None = None):
        rows = df[(df["method"] == method) & ((df["param"].astype(str) == param) if param is not None else True)]
        return rows.iloc[0] if len(rows) else None

    counts = (
        pd.to_numeric(df["items"], errors="coerce").dropna() if "items" in df.columns else pd.Series([], dtype=float)
    )
    items = f" on {int(counts.max())} eval items per configuration" if len(counts) else ""
    parts = [
        f"Each point is one verifier{items}: further right keeps more drafts (faster), higher keeps more "
        "quality. The blue line is the static ensemble ν = W·p + (1 − W)·q from W = 0 (the draft alone) to "
        "W = 1 (the target alone); a learned verifier is only worth training if it lands above that line."
    ]
    lossless, draft = row(LOSSLESS), row(STATIC, "0")
    if lossless is not None and draft is not None:
        parts.append(
            f"Target alone: quality {lossless['quality']:.3f} at acceptance {lossless['acceptance_rate']:.3f}; "
            f"draft alone: quality {draft['quality']:.3f}."
        )
    heads = df[df["method"] == DIVERSED]
    shipped = heads[heads["param"].astype(str) == DIVERSED]  # the greedy default first, then any other head
    ordered = pd.concat([shipped, heads.drop(shipped.index)]) if len(heads) else heads
    for n, (_, div) in enumerate(ordered.iterrows()):
        frontier = float(div["frontier_quality"])  # the static sweep at DIVERSED's acceptance (read_sweep)
        gap = float(div["quality"]) - frontier  # within ON_FRONTIER it sits on the line (a sweep of a few items)
        where = "above" if gap > ON_FRONTIER else "below" if gap < -ON_FRONTIER else "on"
        ratio = ""
        if lossless is not None:
            times = div["acceptance_rate"] / lossless["acceptance_rate"]
            ratio = (
                f" (it keeps {times:.2f} times as many drafts as the lossless rule: a ratio of acceptance rates, "
                "not a speedup)"
                if n == 0
                else f" ({times:.2f}× lossless)"
            )
        label = point_label(DIVERSED, str(div["param"]))
        lead = "DIVERSED" if n == 0 else "With the head"
        parts.append(
            f"{lead}{'' if n == 0 else ' ' + label}: acceptance {div['acceptance_rate']:.3f}{ratio}, quality "
            f"{div['quality']:.3f} — {where} the static frontier ({frontier:.3f} at that acceptance)"
            + (f", head {label}." if n == 0 and (len(ordered) > 1 or label != DIVERSED) else ".")
        )
        if n:
            continue
        mix = df[(df["method"] == TASK_STATIC) & (df["acceptance_rate"] >= div["acceptance_rate"])]
        if len(mix):
            parts.append(
                f"The dashed line picks one W per task, as a w_t that only knew the task could: at that "
                f"acceptance it keeps quality {mix['quality'].max():.3f}. That is the room a per-token "
                "weight has; it is an in-sample best choice, so it flatters itself a little."
            )
    return " ".join(parts)


def sweep_view(df: pd.DataFrame) -> list:
    """[the sentence, the figure] for one checked sweep (``spec_core.serve.sweeps.read_sweep``)."""
    return [sweep_summary(df), pareto_figure(df)]


register_view(
    View(
        "ensemble_weights",
        "Ensemble weight w_t along the text (DIVERSED vs static vs lossless)",
        "w_t is how much the target's opinion counts when a drafted token is checked: the check uses the mix "
        "ν = w_t·p + (1 − w_t)·q of the target's (p) and the draft's (q) probabilities, so w_t = 1 is the exact "
        "rule and w_t = 0 keeps every draft. DIVERSED sets w_t token by token, static:W is a flat line, lossless "
        "sits at 1; × marks drafts that were not kept.",
        ensemble_weights_figure,
        prefixes=(DiversedVerifier.prefix, StaticVerifier.prefix, LenientVerifier.prefix),
        describe=weights_caption,
        replayed=True,
        look_for="Look for where DIVERSED's w_t dips below the lossless line at 1: there it trusts the draft more, "
        "and keeps drafts the exact rule would reject.",
    )
)

__all__ = ["ensemble_weights_figure", "pareto_figure", "sweep_summary", "sweep_view", "weight_points"]
