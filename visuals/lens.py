"""The training lens: how three training schedules would weight the positions of a real drafted block.

For a block the draft just proposed, q_j is the draft's probability of the *target's* token at position j
(``RoundEvent.gold_draft_probs``, temperature-1 softmax). A block drafter is trained with a per-position
cross-entropy −log q_j; the schedules differ in the weight each position's loss gets:

- uniform — every position the same;
- DFlash's decay, w_k = exp(−(k − 1)/γ_w) (DFlash, arXiv 2602.06036; γ_w = 4 for B ≤ 8, 7 for B ≥ 16, linear
  between: :func:`spec_core.core.rules.decay_gamma`);
- D-PACE, w_j = Σ_{k≥j} Π_{i≤k} q̃_i with q̃ = (1 − α)q + α (arXiv 2605.18810; docs/ALGORITHMS.md §3):
  positions the verifier is likely to reach, and whose acceptance would unlock a long continuation, weigh most.

The weights come from :mod:`spec_core.core.rules` (the same functions training uses); the figure shows each schedule
as a share of its block's total weight so that the three are comparable (D-PACE's own weights are not
normalised; their raw values are in the hover).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import torch

from spec_core.core import rules
from spec_core.core.types import RoundEvent
from visuals.plots import base_layout, round_source
from visuals.style import OKABE_ITO, SCHEME_COLOURS

Lanes = Mapping[str, Sequence[RoundEvent]]

DPACE_ALPHA = 0.5  # D-PACE's smoothing; stable for α in [0.3, 0.7], α = 0 collapses (docs/ALGORITHMS.md §3)
SCHEME_LABELS = {"uniform": "uniform", "decay": "DFlash's decay (fixed)", "dpace": "D-PACE (from q_j)"}


def lens_weights(gold_probs: Sequence[float], alpha: float = DPACE_ALPHA) -> dict[str, list[float]]:
    """Raw per-position weights of the three schedules for one block's q_1..q_γ."""
    q = torch.tensor(list(gold_probs), dtype=torch.float64)  # [γ]
    gamma_w = rules.decay_gamma(len(gold_probs) + 1)
    return {
        "uniform": rules.uniform_weights(q).tolist(),
        "decay": rules.decay_weights(q, gamma_w).tolist(),
        "dpace": rules.dpace_weights(q, alpha).tolist(),
    }


def shares(weights: Sequence[float]) -> list[float]:
    total = sum(weights)
    return [w / total for w in weights] if total > 0 else [0.0 for _ in weights]


MIN_BLOCK = 2  # a "block" of one token has nothing to weigh against


def weighable(event: RoundEvent) -> bool:
    """A round the lens can weigh: 2 drafted tokens or more, drafted by a model (a copied run has no q to train)."""
    return len(event.gold_draft_probs) >= MIN_BLOCK and round_source(event) != "lookup"


def block_rounds(events: Sequence[RoundEvent]) -> list[int]:
    """The rounds that drafted a block the lens can weigh."""
    return [e.index for e in events if weighable(e)]


def pick_block(lanes: Lanes, round_index: int | None = None) -> tuple[str, RoundEvent] | None:
    """The block to show: ``round_index`` of the first drafting lane, else its first block of 2 or more (the
    round the step-through opens on)."""
    for method, events in lanes.items():
        blocks = [e for e in events if weighable(e)]
        if not blocks:
            continue
        if round_index is not None:
            chosen = [e for e in blocks if e.index == round_index]
            if chosen:
                return method, chosen[0]
            continue
        return method, blocks[0]
    return None


def _no_block_text(lanes: Lanes, round_index: int | None) -> str:
    """Why there is nothing to weigh: no drafted rounds, or the chosen round drafted fewer than 2 tokens (and
    which rounds did)."""
    if round_index is None or not any(lanes.values()):
        return "no drafted rounds yet"
    method, events = next(iter(lanes.items()))
    event = next((e for e in events if e.index == round_index), None)
    drafted = event.draft_len if event is not None else 0
    copied = event is not None and round_source(event) == "lookup"
    others = block_rounds(events)
    where = (
        f"; rounds {', '.join(map(str, others[:6]))}{'…' if len(others) > 6 else ''} have one"
        if others
        else "; no round of this lane has one"
    )
    what = f"{drafted} token{'' if drafted == 1 else 's'}" + (" copied from the text" if copied and drafted else "")
    return (
        f"round {round_index} of {method} drafted {what}: the lens weighs a block of {MIN_BLOCK} or more that a "
        f"draft model drafted (a copy has no q to train){where}"
    )


def training_lens_figure(lanes: Lanes, round_index: int | None = None, alpha: float = DPACE_ALPHA) -> go.Figure:
    """Bars: each schedule's share of the block's loss weight per position; markers: q_j (right axis).

    ``round_index`` follows the round chosen in the step-through (of the first lane given); by default the
    first block of 2 or more.
    """
    fig = go.Figure()
    picked = pick_block(lanes, round_index)
    if picked is None:
        return base_layout(
            fig,
            "Training lens: loss weight per block position",
            "position in the block",
            "share of the block's loss weight",
            empty=True,
            empty_text=_no_block_text(lanes, round_index),
        )
    method, event = picked
    q = event.gold_draft_probs
    positions = list(range(1, len(q) + 1))
    labels = [f"{k}: {piece!r}" for k, piece in zip(positions, event.draft_pieces)]
    patterns = {"uniform": "", "decay": "/", "dpace": "x"}
    for scheme, raw in lens_weights(q, alpha).items():
        fig.add_trace(
            go.Bar(
                x=positions,
                y=shares(raw),
                name=SCHEME_LABELS[scheme],
                customdata=list(zip(raw, labels)),
                marker={"color": SCHEME_COLOURS[scheme], "pattern": {"shape": patterns[scheme]}},
                hovertemplate="%{customdata[1]}<br>share %{y:.0%} (raw weight %{customdata[0]:.3f})<extra>"
                + SCHEME_LABELS[scheme]
                + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=list(q),
            name="q_j: the draft's probability of the target's token",
            mode="lines+markers",
            yaxis="y2",
            line={"color": OKABE_ITO["black"], "dash": "dot"},
            marker={"symbol": "diamond"},
            hovertemplate="position %{x}<br>q_j = %{y:.3f}<extra></extra>",
        )
    )
    if event.accepted < event.draft_len:
        fig.add_vline(
            x=event.accepted + 0.5,
            line={"color": OKABE_ITO["vermillion"], "dash": "dash"},
            annotation_text=f"first rejection (kept {event.accepted})",
        )
    base_layout(
        fig,
        f"Training lens: {method}, round {event.index} (B = {len(q) + 1}: anchor + {event.draft_len} drafted; "
        f"γ_w = {rules.decay_gamma(len(q) + 1):g})",
        "position in the block",
        "share of the block's loss weight",
        note=f"rests on one block: round {event.index}'s {len(q)} drafted positions",
    )
    fig.update_layout(
        barmode="group",
        yaxis={"tickformat": ".0%", "rangemode": "tozero"},
        yaxis2={"title": "q_j (probability)", "overlaying": "y", "side": "right", "range": [0, 1.05]},
        margin={"l": 60, "r": 60, "t": 58, "b": 40},
    )
    fig.update_xaxes(dtick=1)
    return fig
