"""PACER's head comparison: which pre-verifier, and how far a perfect one could go, beside the fixed windows.

PACER (arXiv 2602.01274) is only as good as its pre-verifier. This view draws
:func:`spec_core.policies.pacer_heads.shipped_comparison`: the same stop rule driven by the paper head (what
``pacer`` runs), the hybrid head, the draft's own Π q and a perfect pre-verifier, replayed on the shipped recorded
rounds, beside the fixed windows and the oracle. The lane's own head is marked.

Its prices are the ones the Live lanes' predictions use, the run's own rounds (:func:`spec_core.engine.replay.costs_from_events`),
when the run had an ``ar`` lane to anchor them; else this machine's cost table for the lane's precision; else the
accelerator model; the note and the caption name which (:data:`spec_core.core.cost_model.SOURCES`). Each bar carries its
10–90% spread over the recorded rounds, and a fixed window that also ran as a Live lane gets that lane's measured
speedup beside its bar, with one sentence (:func:`spec_core.core.quotes.compare_quotes`): the two agree within their
spreads, or why not.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from spec_core.core.cost_model import CostProfile
from spec_core.core.cost_tables import recorded_costs, table_for
from spec_core.core.lane_speed import cost_source, lane_quote, lane_speeds
from spec_core.core.quotes import Quote, compare_quotes
from spec_core.engine.methods import is_fixed_window
from spec_core.engine.replay import costs_from_events
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_heads import (
    HeadRow,
    load_calibration,
    recorded_heads,
    recorded_rounds,
    shipped_comparison,
)
from visuals.labels import row_label_top, row_label_x
from visuals.pacer import is_pacer
from visuals.plots import Lanes, base_layout, measured_lane_trace, value_labels
from visuals.style import OKABE_ITO
from visuals.views import View, register_view

KIND_COLOUR = {
    "head": OKABE_ITO["blue"],
    "probability": OKABE_ITO["orange"],
    "perfect": OKABE_ITO["green"],
    "fixed": OKABE_ITO["grey"],
    "oracle": "#CCCCCC",
}
KIND_PATTERN = {"perfect": "/", "oracle": "x"}  # the two rows no real rule reaches: hatched, not only pale
ROW_LABEL = {
    "head": "{name} ({method})",
    "probability": "draft's own Π q (same rule)",
    "perfect": "perfect pre-verifier",
    "fixed": "{name}",
    "oracle": "oracle (knows before drafting)",
}


def lane_setting(lanes: Lanes) -> dict | None:
    """The first PACER lane's trace (the head, b, ρ, max and precision it ran with), or None."""
    for method, events in lanes.items():
        if is_pacer(method):
            for e in events:
                if (e.policy_trace or {}).get("blocks"):
                    return e.policy_trace
    return None


def comparison_costs(lanes: Lanes, precision: str | None) -> CostProfile:
    """The prices the comparison replays under: the run's own rounds (the profile the Live lanes' predictions use)
    when the run had an ``ar`` lane to anchor them; else the profile the run was priced with (recorded in its
    first event); else the cost table in force for ``precision``."""
    return costs_from_events(lanes) or recorded_costs(lanes) or table_for("cpu").profile(precision)


def comparison_for(lanes: Lanes) -> tuple[list[HeadRow], CostProfile, dict] | None:
    """The comparison under :func:`comparison_costs`, at the lane's b, ρ and max."""
    trace = lane_setting(lanes)
    if trace is None or trace.get("head") not in recorded_heads():
        return None  # no PACER rounds, or a head the shipped rounds were not scored by (another draft's)
    costs = comparison_costs(lanes, trace.get("precision") or None)
    params = PacerParams(
        block=int(trace.get("block", 1)), rho=float(trace.get("rho", 1.1)), max_len=int(trace.get("max", 8))
    )
    rows = list(shipped_comparison(costs, params))
    return (rows, costs, trace) if rows else None


def lane_checks(lanes: Lanes, rows: list[HeadRow], costs: CostProfile) -> list[tuple[HeadRow, Quote, str]]:
    """(row, the Live lane's quote, the sentence) for each fixed window that ran as a Live lane beside ``ar``: its
    measured speedup against the comparison's replay of the same window (:func:`spec_core.core.quotes.compare_quotes`)."""
    fixed = {r.method: r for r in rows if is_fixed_window(r.method)}
    shown = [m for m in lanes if m in fixed]
    if not shown:
        return []
    speeds = lane_speeds(lanes, shown)
    out = []
    for method in shown:
        mine = lane_quote(method, lanes, speeds[method], text="this run's prompt")
        if mine is not None:
            row = fixed[method]
            out.append((row, mine, compare_quotes(mine, row.quote(costs, recorded_rounds())).text))
    return out


def label(row: HeadRow) -> str:
    return ROW_LABEL[row.kind].format(name=row.name, method=row.method)


def hover(row: HeadRow) -> str:
    parts = [f"<b>{label(row)}</b>", f"reads: {row.inputs}", f"predicted {row.speedup:.3f}× ar"]
    if row.threshold is not None and row.kind != "perfect":
        parts.append(f"t = {row.threshold:g} (tuned for it, as t=auto does)")
    if row.auc is not None:
        parts.append(f"AUC {row.auc:.3f} (first drafted token {row.auc_first:.3f}) · ECE {row.ece:.3f}")
    parts.append(f"drafts {row.drafted_per_round:.2f} a round, adds {row.tokens_per_round:.2f} tokens")
    if row.spread is not None:
        parts.append(f"10–90% over the recorded rounds: {row.spread[0]:.3f}–{row.spread[1]:.3f}×")
    if row.headroom is not None and row.kind in ("head", "probability"):
        parts.append(f"captures {row.headroom.text()} of a perfect pre-verifier's gain over the best window")
    return "<br>".join(parts)


def heads_figure(lanes: Lanes) -> go.Figure:
    """Horizontal bars from 1× (plain decoding) to each rule's predicted speedup over ``ar`` on the same recorded
    rounds; a line at the best fixed window; the lane's own head marked."""
    fig = go.Figure()
    found = comparison_for(lanes)
    if found is None:
        empty = "no PACER rounds yet" if lane_setting(lanes) is None else "no recorded rounds for this lane's head"
        return base_layout(fig, "Which pre-verifier?", "", "", empty=True, empty_text=empty)
    rows, costs, trace = found
    rows = rows[::-1]  # plotly draws the first category at the bottom
    names = [label(r) + ("  ◀ this lane" if r.head and r.head == trace.get("head") else "") for r in rows]
    fig.add_trace(
        go.Bar(
            x=[r.speedup - 1.0 for r in rows],  # drawn from plain decoding (1×): a bar's length is its gain or loss
            base=1.0,
            y=names,
            orientation="h",
            marker={
                "color": [KIND_COLOUR[r.kind] for r in rows],
                "pattern": {"shape": [KIND_PATTERN.get(r.kind, "") for r in rows]},
            },
            hovertext=[hover(r) for r in rows],
            hoverinfo="text",
            showlegend=False,
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [r.spread[1] - r.speedup if r.spread else 0.0 for r in rows],
                "arrayminus": [r.speedup - r.spread[0] if r.spread else 0.0 for r in rows],
                "color": OKABE_ITO["black"],
                "thickness": 1,
            },
        )
    )
    checks = lane_checks(lanes, rows, costs)
    if checks:  # the Live lanes' measured speedups of the same windows, beside their bars
        fig.add_trace(
            measured_lane_trace([q for _, q, _ in checks], [label(r) for r, _, _ in checks], [t for *_, t in checks])
        )
    ends = [[1.0, r.speedup, *(r.spread or ())] for r in rows]  # each row's marks: the bar (from 1×), whisker, ◆
    for r, q, _ in checks:
        ends[next(i for i, n in enumerate(names) if n.startswith(label(r)))].append(q.high)
    texts = [f"{r.speedup:.2f}×" + (f" · AUC {r.auc:.2f}" if r.auc is not None else "") for r in rows]
    starts = row_label_x(ends)
    fig.add_trace(value_labels(starts, names, texts))
    best = max((r for r in rows if is_fixed_window(r.method)), key=lambda r: r.speedup)
    # the dashed line is named in the note: a label on the line's top would sit on the note's own line
    fig.add_vline(x=best.speedup, line={"color": OKABE_ITO["black"], "dash": "dash", "width": 1})
    fig.add_vline(x=1.0, line={"color": OKABE_ITO["grey"], "width": 1})
    base_layout(
        fig,
        "Which pre-verifier? The same stop rule, one predictor at a time",
        "predicted speedup over plain decoding",
        "",
        note=f"{recorded_rounds():,} recorded rounds · costs {cost_source(costs)} · b = {trace.get('block', 1)} · "
        f"dashed: the best fixed window ({best.name})",
    )
    low = min([r.speedup for r in rows] + [r.spread[0] for r in rows if r.spread] + [q.low for _, q, _ in checks])
    low = min(0.9, low - 0.05)
    fig.update_xaxes(range=[low, row_label_top(starts, texts, low)])
    fig.update_layout(margin={"l": 230})
    return fig


def describe(lanes: Lanes) -> str:
    """What the comparison says for this lane's setting, with its numbers."""
    found = comparison_for(lanes)
    if found is None:
        return ""
    rows, costs, trace = found
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r.kind, []).append(r)
    best = max((r for r in rows if is_fixed_window(r.method)), key=lambda r: r.speedup)
    mine = next((r for r in by_kind.get("head", []) if r.head == trace.get("head")), None)
    perfect, oracle = by_kind["perfect"][0], by_kind["oracle"][0]
    parts = [f"Replayed on {recorded_rounds():,} recorded rounds, with costs {cost_source(costs)}:"]
    if mine is not None:
        parts.append(
            f"this lane's {mine.name} is predicted {mine.speedup:.2f}× `ar`, {mine.speedup / best.speedup:.3f}× the "
            f"best fixed window ({best.name}); it ranks kept tokens with AUC {mine.auc:.2f}, "
            f"{mine.auc_first:.2f} at the first drafted token."
        )
    probs = by_kind.get("probability")
    if probs:
        parts.append(f"The draft's own Π q driving the same rule: {probs[0].speedup:.2f}×.")
    parts.append(headroom_lesson(mine, probs[0] if probs else None))
    parts.append(calibration_lesson(load_calibration()))
    parts.append(
        f"A perfect pre-verifier, which stops right after the first token the target will reject, would reach "
        f"{perfect.speedup:.2f}× ({perfect.speedup / best.speedup:.3f}× the best window); it still drafts a block "
        f"before it judges it. The oracle, which may draft nothing, {oracle.speedup:.2f}×."
    )
    return " ".join(parts)


def lanes_note(lanes: Lanes) -> str:
    """Under the caption: each fixed window that also ran as a Live lane, its measured speedup against the
    comparison's, agreeing within their spreads or with the reason why not (one paragraph each)."""
    found = comparison_for(lanes)
    if found is None:
        return ""
    rows, costs, _ = found
    return "\n\n".join(text for _, _, text in lane_checks(lanes, rows, costs))


def headroom_lesson(head: HeadRow | None, probs: HeadRow | None) -> str:
    """The lesson of the comparison, judged by headroom captured (H: 0 = the best fixed window, 1 = a perfect
    pre-verifier): whether the learned layer, which reads no probability, beats the draft's own confidence."""
    if head is None or probs is None or head.headroom is None or probs.headroom is None:
        return ""
    h, q = head.headroom, probs.headroom
    if not np.isfinite(h.value):
        return f"Headroom: {h.text()}."
    says = (
        f"Of what a perfect pre-verifier gains over the best fixed window, the {head.name} captures "
        f"{h.value:.2f} ({h.low:.2f} … {h.high:.2f}) and the draft's own Π q {q.value:.2f} ({q.low:.2f} … {q.high:.2f})"
        f" ({h.level:.0%} intervals over the {h.groups:,} recorded rounds)."
    )
    if h.low > q.high:
        return says + " Here a learned pre-verifier beats the draft's own confidence: PACER's premise holds."
    if h.high < q.low:
        return says + (
            " Here the draft's own confidence beats the learned pre-verifier: this draft is not overconfident "
            "(PACER's premise), so the probabilities it already has say more than the layer learned."
        )
    return says + " The two are within each other's intervals: on these rounds neither beats the other."


def _cell(c: dict) -> str:
    return (
        f"{c['draft']} at T = {c['temperature']:g} (mean Π q {c['mean_predicted']:.2f} against {c['kept_rate']:.2f} "
        f"kept, ECE {c['ece']:.3f})"
    )


def _first_token_note(cells: list[dict]) -> str:
    """The largest overconfidence at the first drafted token (the decision that matters most), where its ECE is
    beyond what sampling alone gives; "" when none is."""
    firsts = [
        c
        for c in cells
        if "mean_predicted_first" in c and c.get("ece_first", 0) > c.get("ece_first_noise", 1) and c["ece_first"] > 0.05
    ]
    over = [c for c in firsts if c["mean_predicted_first"] > c["kept_first"]]
    if not over:
        return ""
    c = max(over, key=lambda c: c["mean_predicted_first"] - c["kept_first"])
    return (
        f" The largest miss is at the first drafted token of {c['draft']} at T = {c['temperature']:g}: q says "
        f"{c['mean_predicted_first']:.2f}, {c['kept_first']:.2f} are kept (ECE {c['ece_first']:.3f}; a calibrated "
        f"draft would show {c['ece_first_noise']:.3f} on as few tokens)."
    )


def calibration_lesson(summary: dict | None) -> str:
    """Where PACER's premise (the draft's confidence is overconfident) holds, per shipped draft and temperature,
    with the numbers of the shipped summary (``analyze calibration --json``; :func:`load_calibration`)."""
    if not summary or not summary.get("cells"):
        return ""
    cells, settings = summary["cells"], summary.get("settings", {})
    where = (
        f"(`analyze calibration`, {summary.get('date', '?')}, commit {summary.get('commit', '?')}: "
        f"{cells[0].get('prompts', '?')} held-out prompts × {settings.get('max_new_tokens', '?')} tokens per cell)"
    )
    over = [c for c in cells if c["verdict"] == "overconfident"]
    off = [c for c in cells if c["verdict"] not in ("calibrated", "overconfident")]
    fine = [c for c in cells if c["verdict"] == "calibrated"]
    eces = [c["ece"] for c in cells]
    if not over and not off:
        gap = max(abs(c["gap"]) for c in cells)
        return (
            "Is the draft overconfident, as PACER assumes? On these drafts the draft's confidence is already "
            f"calibrated, so a learned pre-verifier has little to correct: ECE {min(eces):.3f} … {max(eces):.3f} "
            f"over {len(cells)} drafts × temperatures, mean Π q within {gap:.2f} of the share kept {where}."
            + _first_token_note(cells)
        )
    parts = []
    trained = summary.get("trained") or []
    if over:
        beats = [h for h in trained if h.get("head_auc", 0) > h.get("pi_q_auc", 1)]
        says = "; ".join(_cell(c) for c in over)
        if beats:
            h = beats[0]
            parts.append(
                f"A learned pre-verifier beats the draft's own confidence when the draft is overconfident: "
                f"{says}. There a paper head trained on its rounds ranks with AUC {h['head_auc']:.3f} against Π q's "
                f"{h['pi_q_auc']:.3f} ({h['draft']}, held out)."
            )
        else:
            parts.append(
                f"PACER's premise holds where the draft is overconfident, so a learned pre-verifier has something "
                f"to correct: {says}."
            )
    if off:
        parts.append(
            "Miscalibrated, but not overconfident: " + "; ".join(f"{_cell(c)}, {c['verdict']}" for c in off) + "."
        )
    if fine:
        listed = ", ".join(f"{c['draft']} at T = {c['temperature']:g} ({c['ece']:.3f})" for c in fine)
        parts.append(f"Calibrated (ECE ≤ 0.05), where Π q already is what a head would learn: {listed}.")
    return " ".join(parts) + f" {where}"


register_view(
    View(
        "pacer_heads",
        "PACER: which pre-verifier?",
        "Each bar is one rule re-deciding the same recorded rounds (training prompts no head saw), priced as the "
        "note says: PACER's stop rule driven by each pre-verifier, t tuned for each, beside the fixed windows; its "
        "whisker is the 10–90% spread over the rounds, and a ◆ is a Live lane's measured speedup of that window. The hatched bars are out of any real rule's reach: a perfect pre-verifier (it knows "
        "whether each drafted token will be kept) and the oracle (it knows before drafting). Hover a bar for what it reads "
        "and how well it ranks (AUC: 0.5 a coin, 1 perfect).",
        heads_figure,
        prefixes=("pacer",),
        with_baselines=False,
        describe=describe,
        whole_run=True,
        footnote=lanes_note,
    )
)
