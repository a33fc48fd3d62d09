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

import textwrap
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import torch

from spec_core.core import rules
from spec_core.core.types import RoundEvent
from spec_core.engine.methods import is_fixed_window
from spec_core.engine.replay import PolicyReplay
from visuals.baseline import kept_by_position_trace, replay_note, replay_sentence, windows
from visuals.labels import Box, Canvas, Point, bar_box, line_label
from visuals.plots import base_layout, copied_round
from visuals.style import OKABE_ITO, SCHEME_COLOURS, series_style

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
    return len(event.gold_draft_probs) >= MIN_BLOCK and not copied_round(event)


def block_rounds(events: Sequence[RoundEvent]) -> list[int]:
    """The rounds that drafted a block the lens can weigh."""
    return [e.index for e in events if weighable(e)]


def telling_block(events: Sequence[RoundEvent]) -> RoundEvent | None:
    """The lane's block the lens opens on: of its blocks of 2 or more that a model drafted, the one whose drafts the
    target kept the most (the earliest among equals; with none kept, the one whose q_1 is highest). A lane's
    first block is often a rejected one whose q_j are all near 0 (the default run's read 0.00, 0.00), where every
    schedule's weights vanish together and the lens shows nothing of D-PACE's lean."""
    blocks = [e for e in events if weighable(e)]
    if not blocks:
        return None
    if any(e.accepted for e in blocks):
        return max(blocks, key=lambda e: (e.accepted, -e.index))
    return max(blocks, key=lambda e: (e.gold_draft_probs[0], -e.index))


def telling_round(events: Sequence[RoundEvent]) -> int:
    """The round of :func:`telling_block` (0 when the lane has no block to weigh): the step-through's first."""
    block = telling_block(events)
    return block.index if block is not None else 0


def pick_block(lanes: Lanes, round_index: int | None = None) -> tuple[str, RoundEvent] | None:
    """The block to show: ``round_index`` of the first lane (the step-through's), else the lane's most telling
    block (:func:`telling_block`), in the first lane that has one, a method's before a fixed window's (the window is
    the baseline beside it); a lane whose blocks are all copied is passed over."""
    if round_index is not None:
        method, events = next(iter(lanes.items()), ("", ()))
        chosen = [e for e in events if weighable(e) and e.index == round_index]
        return (method, chosen[0]) if chosen else None
    for method, events in sorted(lanes.items(), key=lambda kv: is_fixed_window(kv[0])):
        block = telling_block(events)
        if block is not None:
            return method, block
    return None


def window_traces(lanes: Lanes, replayed: PolicyReplay | None) -> list[go.Scatter]:
    """The fixed-window baseline on the q_j axis: the share of its rounds that kept position j (a lane of the run,
    else one ``replayed`` on its text), beside the one block's q_j."""
    out = []
    for j, base in enumerate(windows(lanes, replayed)):
        colour, _, marker = series_style(j + 1)
        positions, rates, counts = base.by_position()
        out.append(
            kept_by_position_trace(
                base.name, "share kept at position j", positions, rates, counts, colour, marker, replayed=base.replayed
            )
        )
    return out


def _no_block_text(lanes: Lanes, round_index: int | None) -> str:
    """Why there is nothing to weigh: no drafted rounds, or the chosen round drafted fewer than 2 tokens (and
    which rounds did)."""
    if round_index is None or not any(lanes.values()):
        return "no drafted rounds yet"
    method, events = next(iter(lanes.items()))
    event = next((e for e in events if e.index == round_index), None)
    drafted = event.draft_len if event is not None else 0
    copied = event is not None and copied_round(event)
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


def lens_caption(lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """Which block the lens weighs (lane, round, how many such blocks the lane drafted) and what D-PACE made of it,
    then the baseline's sentence; why there is none when no lane drafted a block of 2 or more with a model."""
    picked = pick_block(lanes)
    if picked is None:
        return f"No block to weigh: {_no_block_text(lanes, None)}."
    method, event = picked
    w = {k: shares(v) for k, v in lens_weights(event.gold_draft_probs).items()}
    n = len(block_rounds(lanes[method]))
    q = ", ".join(f"{x:.2f}" for x in event.gold_draft_probs[:4]) + ("…" if len(event.gold_draft_probs) > 4 else "")
    text = (
        f"It weighs {method}'s round {event.index}, the one of its {n} blocks of {MIN_BLOCK} or more drafted by "
        f"the draft model where the target kept the most ({event.accepted} of {event.draft_len}; q_j {q}): D-PACE gives position 1 {w['dpace'][0]:.0%} of the block's weight, DFlash's "
        f"decay {w['decay'][0]:.0%}, uniform {w['uniform'][0]:.0%}."
    )
    base = windows(lanes, replayed)
    kept = [f"{b.name} kept position 1 in {b.by_position()[1][0]:.0%} of its rounds" for b in base if any(b.drafted)]
    return " ".join([text, *(f"{k}." for k in kept[:1]), replay_sentence(base)]).strip()


Y2_RANGE = (0.0, 1.05)  # q_j and the shares kept (right axis)
BAR_GROUP = 0.8  # a position's three bars span this much of the x axis (Plotly's bargap 0.2)
LENS_CANVAS_PX = 280.0  # the lens's plot area at a 420-px phone width (its 60-px margins each side): the narrowest


def share_range(fig: go.Figure) -> tuple[float, float]:
    """The left axis's range, fixed so that the label placer knows where each bar ends: the tallest share + 10%."""
    tallest = max((max(t.y) for t in fig.data if isinstance(t, go.Bar) and t.y), default=1.0)
    return 0.0, max(tallest * 1.1, 0.05)


def lens_marks(fig: go.Figure) -> tuple[Canvas, list[Point], list[Box]]:
    """The lens on the label placer's canvas: every marker (q_j, the baseline's shares: on the right axis, set on
    the left one's scale) and every bar, in pixels, at a phone's plot width."""
    (low, high), (r0, r1) = share_range(fig), Y2_RANGE
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    positions = [x for t in fig.data for x in (t.x or ())]
    canvas = Canvas((min(positions, default=1) - 0.5, max(positions, default=1) + 0.5), (low, high), LENS_CANVAS_PX)
    to_left = lambda y: low + (y - r0) / (r1 - r0) * (high - low)  # noqa: E731
    markers = [
        Point(x, to_left(y), float(t.marker.size if t.marker and t.marker.size else 8))
        for t in fig.data
        if isinstance(t, go.Scatter)
        for x, y in zip(t.x, t.y)
    ]
    width = BAR_GROUP / max(len(bars), 1)
    shapes = [
        bar_box(x - BAR_GROUP / 2 + width * (k + 0.5), width, y, canvas)
        for k, t in enumerate(bars)
        for x, y in zip(t.x, t.y)
    ]
    return canvas, markers, shapes


def rejection_label(fig: go.Figure, event: RoundEvent) -> str:
    """The dashed line at the round's first rejection, its label where the label placer finds room beside it
    (:func:`visuals.labels.line_label`: clear of every bar and marker, at a phone's width); when there is none the
    label goes to the note instead, which is returned ("" when the label is on the plot or nothing was rejected)."""
    if event.accepted >= event.draft_len:
        return ""
    x, text = event.accepted + 0.5, "first rejection"
    fig.add_vline(x=x, line={"color": OKABE_ITO["vermillion"], "dash": "dash"})
    canvas, markers, shapes = lens_marks(fig)
    spot = line_label(x, text, markers, canvas, shapes)
    if spot is None:
        return f"dashed: the first rejection (kept {event.accepted})"
    y, where = spot
    fig.add_annotation(
        x=x,
        y=y,
        text=text,
        showarrow=False,
        xanchor="left" if where.endswith("right") else "right",
        xshift=2 if where.endswith("right") else -2,
        font={"size": 10, "color": OKABE_ITO["vermillion"]},
        name="placed",  # placed by visuals.labels (tests look)
    )
    return ""


def training_lens_figure(
    lanes: Lanes, round_index: int | None = None, alpha: float = DPACE_ALPHA, replayed: PolicyReplay | None = None
) -> go.Figure:
    """Bars: each schedule's share of the block's loss weight per position; markers: q_j (right axis); dashed: the
    fixed window's share kept per position (right axis), a lane of the run or ``replayed`` on its text.

    ``round_index`` follows the round chosen in the step-through (of the first lane given); by default the
    lane's most telling block (:func:`telling_block`).
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
            empty_text="<br>".join(textwrap.wrap(_no_block_text(lanes, round_index), 60)),
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
    fig.add_traces(window_traces(lanes, replayed))
    cut = rejection_label(fig, event)
    base_layout(
        fig,
        f"Training lens: {method}, round {event.index} (B = {len(q) + 1}: anchor + {event.draft_len} drafted; "
        f"γ_w = {rules.decay_gamma(len(q) + 1):g})",
        "position in the block",
        "share of the block's loss weight",
        note=" · ".join(
            n
            for n in (
                f"rests on one block: round {event.index}'s {len(q)} drafted positions",
                cut,
                replay_note(windows(lanes, replayed)),
            )
            if n
        ),
    )
    fig.update_layout(
        barmode="group",
        yaxis={"tickformat": ".0%", "range": list(share_range(fig))},
        yaxis2={"title": "q_j · share kept", "overlaying": "y", "side": "right", "range": list(Y2_RANGE)},
        margin={"l": 60, "r": 60, "t": 58, "b": 40},
    )
    fig.update_xaxes(dtick=1)
    return fig
