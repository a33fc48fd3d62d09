"""PACER's views: the growing threshold per block, and predicted acceptance against what was kept.

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274) drafts in
blocks; after each block a small trained pre-verifier predicts each token's chance of acceptance, and the draft
stops when the block's mean falls under a threshold that grows by ρ after every block that passes. Everything
here is read from ``RoundEvent.policy_trace`` (written by :class:`spec_core.policies.pacer.PacerLength`):
``blocks`` (per block: ``start``, ``predicted``, ``mean``, ``threshold``, ``decision``) and ``predicted`` (per
drafted token). Fixed-window lanes are drawn beside PACER as the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from spec_core.core.types import RoundEvent
from spec_core.engine.methods import spec_of
from spec_core.engine.replay import PolicyReplay
from spec_core.policies.pacer import PacerLength
from visuals.baseline import REPLAY_HOVER, WindowRounds, replay_note, replay_sentence, windows
from visuals.plots import Lanes, base_layout
from visuals.style import OKABE_ITO, series_style
from visuals.views import View, register_round_note, register_view

DECISION_STYLE = {  # decision → (colour, marker, label)
    "pass": (OKABE_ITO["green"], "circle", "passed: draft the next block"),
    "stop": (OKABE_ITO["vermillion"], "x-thin-open", "stopped: mean under the threshold"),
    "max": (OKABE_ITO["grey"], "square-open", "capped at max length"),
    "budget": (OKABE_ITO["grey"], "diamond-open", "capped by the token budget"),
}


def is_pacer(method: str) -> bool:
    policy = spec_of(method).policy
    return policy is not None and policy.family == PacerLength.prefix


def block_points(events: Sequence[RoundEvent]) -> list[dict]:
    """One record per pre-verified block: round, block number (1-based), mean â, threshold, decision, and how
    many of the block's tokens the target kept."""
    out = []
    for e in events:
        for k, b in enumerate(e.policy_trace.get("blocks", ())):
            size = len(b["predicted"])
            kept = max(0, min(e.accepted - b["start"], size))
            out.append(
                {
                    "round": e.index,
                    "block": k + 1,
                    "mean": b["mean"],
                    "threshold": b["threshold"],
                    "decision": b["decision"],
                    "kept": kept,
                    "size": size,
                }
            )
    return out


def position_curves(events: Sequence[RoundEvent]) -> dict[str, list]:
    """Per position in the draft (1..): rounds that drafted it, share of them whose token there was kept, and
    (PACER lanes) the mean predicted acceptance â. A token counts as kept when every draft up to it was."""
    longest = max((e.draft_len for e in events), default=0)
    drafted, kept, predicted = [0] * longest, [0] * longest, [0.0] * longest
    for e in events:
        pred = e.policy_trace.get("predicted", ())
        for i in range(e.draft_len):
            drafted[i] += 1
            kept[i] += i < e.accepted
            predicted[i] += pred[i] if i < len(pred) else float("nan")
    return {
        "position": list(range(1, longest + 1)),
        "drafted": drafted,
        "kept": [k / d for k, d in zip(kept, drafted)],
        "predicted": [p / d for p, d in zip(predicted, drafted)],
    }


def pacer_block(lanes: Lanes) -> int:
    """The block size b of the first PACER lane (1 when none): the fixed window's blocks are counted in it."""
    for method in lanes:
        if is_pacer(method):
            policy = spec_of(method).policy
            return int(getattr(policy.params, "block", 1)) if policy is not None else 1
    return 1


def window_blocks(base: WindowRounds, b: int) -> tuple[list[int], list[float], list[int]]:
    """A fixed window's blocks of ``b`` tokens: (block k, share of the rounds that drafted all of block k whose
    block was kept whole, those rounds)."""
    positions, rates, counts = base.by_position()
    ks = [k for k in range(1, len(positions) // b + 1)]
    return ks, [rates[k * b - 1] for k in ks], [counts[k * b - 1] for k in ks]


def window_traces(lanes: Lanes, replayed: PolicyReplay | None, first_style: int) -> list[go.Scatter]:
    """The fixed-window baseline: the share of its rounds whose block k the target kept (no threshold: it drafts
    its K tokens whatever their score), on the same 0–1 scale as the predicted acceptance it would be held to."""
    b, out = pacer_block(lanes), []
    for j, base in enumerate(windows(lanes, replayed)):
        colour, dash, marker = series_style(first_style + j)
        ks, shares, counts = window_blocks(base, b)
        out.append(
            go.Scatter(
                x=ks,
                y=shares,
                name=f"{base.name} · share kept at block k (no threshold)",
                mode="lines+markers",
                line={"color": colour, "dash": "dash", "width": 1.5},
                marker={"color": colour, "symbol": marker, "size": 9},
                customdata=counts,
                hovertemplate="block %{x}: drafted in %{customdata} rounds, kept whole in %{y:.0%} of them<br>"
                + "a fixed window never stops early"
                + (f"<br>{REPLAY_HOVER}" if base.replayed else "")
                + "<extra>"
                + base.name
                + "</extra>",
            )
        )
    return out


def threshold_figure(lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """Per PACER lane: the threshold in force at each block of a round (line: t, ρ·t, ρ²·t, ...) and each
    block's mean predicted acceptance (markers by decision); beside it, the fixed window's share kept at each
    block (a lane of the run, else ``replayed`` on its text)."""
    fig = go.Figure()
    shown = False
    for i, (method, events) in enumerate(lanes.items()):
        colour, dash, _ = series_style(i)
        if is_pacer(method):
            points = block_points(events)
            if not points:
                continue
            shown = True
            by_block: dict[int, float] = {}
            for p in points:
                by_block[p["block"]] = p["threshold"]
            ks = sorted(by_block)
            fig.add_trace(
                go.Scatter(
                    x=ks,
                    y=[by_block[k] for k in ks],
                    name=f"{method} · threshold",
                    mode="lines+markers",
                    line={"color": colour, "dash": dash, "width": 2},
                    marker={"symbol": "line-ew-open", "size": 14},
                    hovertemplate="block %{x}: threshold %{y:.3f}<extra></extra>",
                )
            )
            for decision, (dcolour, symbol, label) in DECISION_STYLE.items():
                sel = [p for p in points if p["decision"] == decision]
                if not sel:
                    continue
                fig.add_trace(
                    go.Scatter(
                        x=[p["block"] + (p["round"] % 7 - 3) * 0.03 for p in sel],  # a small spread keeps rounds apart
                        y=[p["mean"] for p in sel],
                        name=f"{method} · {label}",
                        mode="markers",
                        marker={
                            "color": dcolour,
                            "symbol": symbol,
                            "size": 8,
                            "line": {"width": 1.5, "color": dcolour},
                        },
                        customdata=[[p["round"], p["threshold"], p["kept"], p["size"]] for p in sel],
                        hovertemplate="round %{customdata[0]}, block "
                        + "%{x:.0f}<br>mean predicted %{y:.3f} vs threshold "
                        "%{customdata[1]:.3f}<br>"
                        + f"{decision}; kept %{{customdata[2]}} of %{{customdata[3]}}<extra></extra>",
                    )
                )
    fig.add_traces(window_traces(lanes, replayed, len(lanes)) if shown else [])
    counts = [(m, block_points(ev), len(ev)) for m, ev in lanes.items() if is_pacer(m)]
    note = " · ".join(f"{m}: {len(pts)} blocks in {n} rounds" for m, pts, n in counts)
    note = " · ".join(n for n in (note, replay_note(windows(lanes, replayed))) if n)
    base_layout(
        fig,
        "PACER: the threshold grows after each block that passes",
        "block in the round",
        "mean predicted acceptance of the block",
        empty=not shown,
        empty_text="no PACER rounds yet",
        note=note,
    )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return fig


def predicted_vs_kept_figure(lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """By position in the draft: PACER's mean predicted acceptance (line) against the share actually kept
    (markers), with the fixed window's kept share beside it (what a window that never stops gets: a lane of the
    run, else ``replayed`` on its text)."""
    fig = go.Figure()
    shown = False
    pacer = {m: ev for m, ev in lanes.items() if is_pacer(m)}
    for i, (method, events) in enumerate(pacer.items()):
        colour, dash, marker = series_style(i)
        curves = position_curves([e for e in events if e.draft_len])
        if not curves["position"]:
            continue
        shown = True
        hover = "position %{x}: %{y:.2f} (%{customdata} rounds)<extra>" + method + "</extra>"
        fig.add_trace(
            go.Scatter(
                x=curves["position"],
                y=curves["predicted"],
                name=f"{method} · predicted â",
                mode="lines",
                line={"color": colour, "dash": "solid", "width": 2},
                customdata=curves["drafted"],
                hovertemplate=hover,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=curves["position"],
                y=curves["kept"],
                name=f"{method} · kept",
                mode="markers",
                marker={"color": colour, "symbol": marker, "size": 9},
                customdata=curves["drafted"],
                hovertemplate=hover,
            )
        )
    base = windows(lanes, replayed)
    for j, w in enumerate(base if shown else ()):
        colour, _, marker = series_style(len(pacer) + j)
        positions, rates, counts = w.by_position()
        fig.add_trace(
            go.Scatter(
                x=positions,
                y=rates,
                name=f"{w.name} · kept",
                mode="markers+lines",
                line={"color": colour, "dash": "dash", "width": 1},
                marker={"color": colour, "symbol": marker, "size": 8},
                customdata=counts,
                hovertemplate="position %{x}: kept in %{y:.0%} of the %{customdata} rounds that drafted it"
                + (f"<br>{REPLAY_HOVER}" if w.replayed else "")
                + f"<extra>{w.name}</extra>",
            )
        )
    note = "; ".join(
        f"{m}: {', '.join(map(str, position_curves([e for e in ev if e.draft_len])['drafted'][:6]))}"
        for m, ev in pacer.items()
        if any(e.draft_len for e in ev)
    )
    note += "".join(f"; {w.name}: {', '.join(map(str, w.by_position()[2][:6]))}" for w in base if shown and note)
    base_layout(
        fig,
        "Predicted acceptance against what the target kept",
        "position in the draft",
        "share of drafted tokens kept",
        empty=not shown,
        note=f"rounds that drafted position 1, 2, …: {note}" if note else "",
    )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_xaxes(dtick=1)
    return fig


def threshold_caption(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """What the blocks did in this run, per PACER lane: blocks = passed + stopped + capped (the draft reached its
    maximum or the text's remaining budget, so no decision was needed), and, when nothing ever passed, why the
    rule did not adapt, from the numbers."""
    parts = []
    for method, events in lanes.items():
        points = block_points(events) if is_pacer(method) else []
        if points:
            passed = sum(p["decision"] == "pass" for p in points)
            stopped = sum(p["decision"] == "stop" for p in points)
            capped = len(points) - passed - stopped
            note = next((e.policy_trace.get("threshold_note") for e in events if e.policy_trace), "")
            why = f" (its {note})" if note else ""
            n = len(points)
            text = f"{method}: {n} block{'' if n == 1 else 's'}: {passed} passed, {stopped} stopped the draft"
            if capped:
                text += f", {capped} reached the draft's cap (its maximum or the text's end: nothing to decide)"
            parts.append(text + why + not_adapting(events, points))
    if not parts:
        return "No PACER rounds yet."
    base = windows(lanes, replayed)
    for w in base:
        ks, shares, counts = window_blocks(w, pacer_block(lanes))
        parts.append(
            f"{w.name} drafted {len(ks)} blocks every round and kept "
            + ", ".join(f"block {k} whole in {x:.0%}" for k, x in zip(ks, shares))
            + f" of its {w.rounds} rounds"
        )
    return "; ".join(parts) + "." + (f" {replay_sentence(base)}" if replay_sentence(base) else "")


def not_adapting(events: Sequence[RoundEvent], points: list[dict]) -> str:
    """Why PACER's length never moved, when no block passed: the first block's mean score against t, and how often
    this draft's first token is kept; empty when some block passed."""
    if any(p["decision"] == "pass" for p in points):
        return ""
    first = [p for p in points if p["block"] == 1 and p["decision"] == "stop"]
    if not first:
        return ""
    mean = sum(p["mean"] for p in first) / len(first)
    top = max(p["mean"] for p in first)
    t = first[0]["threshold"]
    drafted = [e for e in events if e.draft_len]
    kept_first = sum(e.accepted >= 1 for e in drafted) / max(len(drafted), 1)
    size = first[0]["size"]
    return (
        f". It never adapted: after each first block of {size} token{'s' if size != 1 else ''} the pre-verifier's "
        f"score (mean {mean:.2f}, at most {top:.2f}) stayed under t = {t:g}, so every draft stopped there. The score "
        f"is right to be low: this draft kept {kept_first:.0%} of first tokens here. With a draft that keeps more "
        f"(prompt lookup on a text that repeats its source, e.g. the `hybrid` summary preset), or a lower t, "
        f"blocks pass and the length grows"
    )


def calibration_caption(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """Predicted against kept at the first position, where most rounds are (the points further out rest on fewer),
    and the fixed window's kept share there."""
    parts = []
    for method, events in lanes.items():
        if not is_pacer(method):
            continue
        curves = position_curves([e for e in events if e.draft_len])
        if curves["position"]:
            parts.append(
                f"{method} at position 1: predicted {curves['predicted'][0]:.2f}, kept "
                f"{curves['kept'][0]:.2f} ({curves['drafted'][0]} rounds)"
            )
    if not parts:
        return "No PACER rounds yet."
    base = windows(lanes, replayed)
    for w in base:
        _, rates, counts = w.by_position()
        if rates:
            parts.append(f"{w.name} kept {rates[0]:.2f} at position 1 ({counts[0]} rounds)")
    return "; ".join(parts) + "." + (f" {replay_sentence(base)}" if replay_sentence(base) else "")


def round_text(event: RoundEvent, outcome: bool = True) -> str:
    """One PACER round, block by block, in words (for a step-through; empty for other methods); ``outcome``
    adds what the target kept (a step-through's draft step leaves it out)."""
    blocks = event.policy_trace.get("blocks", ())
    if not blocks:
        return ""
    parts = []
    for k, b in enumerate(blocks):
        verdict = {
            "pass": "≥ threshold, so it drafted another block and raised the threshold",
            "stop": "< threshold, so it stopped and sent the draft to the target",
            "max": "— the draft reached its maximum length",
            "budget": "— no tokens left in the budget",
        }[b["decision"]]
        parts.append(f"block {k + 1}: mean predicted {b['mean']:.2f} vs threshold {b['threshold']:.2f} {verdict}")
    kept = f" The target kept {event.accepted} of {event.draft_len}." if outcome else ""
    return "; ".join(parts) + "." + kept


register_round_note(lambda e: f"PACER, block by block: {text}" if (text := round_text(e, outcome=False)) else "")
register_view(
    View(
        "pacer_threshold",
        "PACER: threshold per block",
        "Each marker is one block's average predicted acceptance (the pre-verifier's guess that the target will "
        "keep its tokens); the line is the threshold it had to clear, which climbs by ρ after every block that "
        "passes, so long drafts need ever more confident blocks.",
        threshold_figure,
        prefixes=(PacerLength.prefix,),
        describe=threshold_caption,
        replayed=True,
        look_for="Look for the line stepping up after each block that passed, and for the blocks that stopped "
        "under it, where the fixed window (dashed) drafted on regardless.",
    )
)
register_view(
    View(
        "pacer_predicted_vs_kept",
        "PACER: predicted vs kept, by position",
        "Where the line (what the pre-verifier predicted) sits on the markers (what the target kept), its guesses "
        "are calibrated; beside it, the fixed window's kept share at the positions it always drafts.",
        predicted_vs_kept_figure,
        prefixes=(PacerLength.prefix,),
        describe=calibration_caption,
        replayed=True,
    )
)
