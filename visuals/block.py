"""The block drafter's view: this run's acceptance by block position beside the loss weights it was trained with.

A parallel block drafter (DFlash, arXiv 2602.06036) proposes a whole block in one forward pass; ``block:LOSS`` names
the per-position weighting of its training loss: ``uniform``, DFlash's ``decay``, or D-PACE's (arXiv 2605.18810;
docs/ALGORITHMS.md §3), whose weight for position j is the expected accepted length it unlocks. The weights it
was trained with are read from its card (``assets/block/LOSS.json``, written by ``spec_core/train/block.py``):
``log[-1].weights_by_position`` is each position's mean share of a block's loss over the last logged window of
training steps. Beside them, from this run's rounds, the share of the rounds that drafted position j whose draft
there the target kept, and a fixed window's (a lane of the run, or replayed on its text: :mod:`visuals.baseline`).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from spec_core.core.assets import BLOCK_DIR, read_card
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent
from spec_core.drafters import BlockDraft
from spec_core.engine.methods import spec_of
from spec_core.engine.replay import PolicyReplay
from visuals.baseline import kept_by_position_trace, replay_note, replay_sentence, windows
from visuals.plots import Lanes, acceptance_by_position, base_layout
from visuals.style import series_style
from visuals.views import View, register_view

LOSS_NAMES = {"dpace": "D-PACE", "uniform": "uniform", "decay": "DFlash's decay"}


def is_block(method: str) -> bool:
    try:
        drafter = spec_of(method).drafter
    except SpecScopeError:
        return False
    return drafter is not None and drafter.family == BlockDraft.prefix


def trained_weights(method: str) -> tuple[str, list[float], int]:
    """(loss, each position's mean share of the loss weight in its last logged training window, steps in that
    window) of ``block:LOSS``'s drafter, from its card; :class:`SpecScopeError` when the card lacks them."""
    drafter = spec_of(method).drafter
    loss = str(drafter.params) if drafter is not None else ""
    card = read_card(loss, BLOCK_DIR, "block drafter", "train one with `python -m spec_core train block`")
    log = card.get("log") or []
    if not log or not log[-1].get("weights_by_position"):
        raise SpecScopeError(f"the card of block:{loss} logs no training weights by position")
    steps = log[-1]["step"] - (log[-2]["step"] if len(log) > 1 else 0)
    return loss, [float(w) for w in log[-1]["weights_by_position"]], int(steps)


def block_lanes(lanes: Lanes) -> dict[str, Sequence[RoundEvent]]:
    return {m: ev for m, ev in lanes.items() if is_block(m)}


def block_figure(lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """Bars: the trained loss weight per position (left axis); lines: the share kept per position, this run's
    block lane and the fixed window (right axis)."""
    fig = go.Figure()
    shown, missing = False, []
    for i, (method, events) in enumerate(block_lanes(lanes).items()):
        colour, dash, marker = series_style(i)
        try:
            loss, weights, steps = trained_weights(method)
        except SpecScopeError as err:
            missing.append(str(err))
            continue
        shown = True
        fig.add_trace(
            go.Bar(
                x=list(range(1, len(weights) + 1)),
                y=weights,
                name=f"{method} · trained weight ({LOSS_NAMES.get(loss, loss)}, its card)",
                marker={"color": colour, "opacity": 0.55},
                hovertemplate="position %{x}: %{y:.0%} of a block's loss weight in training<br>"
                + f"mean over its last {steps} training steps (assets/block/{loss}.json)<extra>{method}</extra>",
            )
        )
        positions, rates, counts = acceptance_by_position(events)
        fig.add_trace(
            kept_by_position_trace(
                method, "kept at position j (this run)", positions, rates, counts, colour, marker, dash, width=2, size=9
            )
        )
    base = windows(lanes, replayed) if shown else []
    for j, w in enumerate(base):
        colour, _, marker = series_style(len(block_lanes(lanes)) + j)
        positions, rates, counts = w.by_position()
        fig.add_trace(
            kept_by_position_trace(
                w.name, "kept at position j", positions, rates, counts, colour, marker, replayed=w.replayed
            )
        )
    note = " · ".join(
        [f"{m}: {len(ev)} rounds" for m, ev in block_lanes(lanes).items()] + [replay_note(base)] if shown else []
    )
    base_layout(
        fig,
        "Block drafter: what it was trained to weigh, and what was kept",
        "position in the drafted block",
        "share of a block's training loss",
        empty=not shown,
        empty_text="; ".join(missing) or "no block-drafter rounds yet",
        note=note.strip(" ·"),
    )
    fig.update_layout(
        yaxis={"tickformat": ".0%", "rangemode": "tozero"},
        yaxis2={"title": "share kept", "overlaying": "y", "side": "right", "range": [0, 1.05], "tickformat": ".0%"},
        margin={"l": 60, "r": 60, "t": 58, "b": 40},
    )
    fig.update_xaxes(dtick=1)
    return fig


def block_caption(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """Per block lane: where its training put the weight, and how far this run's target kept its drafts."""
    parts = []
    for method, events in block_lanes(lanes).items():
        try:
            loss, weights, steps = trained_weights(method)
        except SpecScopeError as err:
            parts.append(f"{method}: {err}")
            continue
        positions, rates, counts = acceptance_by_position(events)
        kept = ", ".join(f"position {p} in {r:.0%}" for p, r in zip(positions[:3], rates[:3]))
        parts.append(
            f"{method} was trained with {LOSS_NAMES.get(loss, loss)} weights: position 1 had {weights[0]:.0%} of a "
            f"block's loss and position {len(weights)} {weights[-1]:.0%} (its last {steps} training steps); this "
            f"run kept {kept or 'nothing yet'} of the rounds that drafted them ({len(events)} rounds)"
        )
    if not parts:
        return "No block-drafter rounds yet."
    base = windows(lanes, replayed)
    return "; ".join(parts) + "." + (f" {replay_sentence(base)}" if replay_sentence(base) else "")


register_view(
    View(
        "block_positions",
        "Block drafter: acceptance by position beside its training weights",
        "The bars are the share of a block's training loss each position had when this drafter was trained (read "
        "from its card), the solid line the share of this run's rounds whose draft at that position the target "
        "kept, and the dashed line a fixed window's. A position weighted heavily but rarely kept was trained for a "
        "reach the target does not grant.",
        block_figure,
        prefixes=(BlockDraft.prefix,),
        describe=block_caption,
        replayed=True,
        look_for="Look for whether the positions the drafter was trained to weigh most are the ones the target "
        "kept here.",
    )
)
