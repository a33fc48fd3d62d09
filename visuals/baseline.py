"""The fixed-window baseline of the seeds' views: a real ``fixed:K`` lane of the run, else one replayed on its text.

Each of the four views a visitor should see on the first Generate (draft length per round, PACER's threshold,
DIVERSED's w_t, the D-PACE training lens) draws its method beside a fixed window. When the run has a lossless
``fixed:K`` lane, that lane's rounds are the baseline. When it has none (the default trio: ``hybrid``,
``pacer+diversed``, ``ar``), the app replays ``fixed:2`` on the run's greedy text
(:class:`~spec_core.engine.replay.PolicyReplay`, set on :attr:`spec_core.serve.live.LiveFrame.baseline` by
``ui/live_baseline.py``): at temperature 0 the text is the target's whatever the window, and the draft's greedy
proposal at each position depends only on the verified prefix, so one recorded pass gives the window's rounds
exactly (docs/ALGORITHMS.md §4; ``spec_core/analysis/playground.py``). A replay has no timing and no per-token
probabilities, so the views draw from it only what it holds: per round, where it started, what it drafted and
what the target kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from spec_core.core.types import RoundEvent
from spec_core.engine.methods import is_fixed_window
from spec_core.engine.replay import PolicyReplay

Lanes = Mapping[str, Sequence[RoundEvent]]


@dataclass(frozen=True)
class WindowRounds:
    """A fixed window's rounds, as the views need them: a real lane's or a replay's."""

    name: str  # the legend's name: "fixed:2" (a lane) or "fixed:2 (replayed)"
    starts: tuple[int, ...]  # new tokens before each round (its first drafted token's position in the text)
    drafted: tuple[int, ...]  # tokens drafted each round
    kept: tuple[int, ...]  # drafts the target kept each round
    replayed: bool  # True: replayed on the run's text (no lane ran it)

    @property
    def rounds(self) -> int:
        return len(self.drafted)

    def by_position(self) -> tuple[list[int], list[float], list[int]]:
        """(positions 1..K, share of the rounds that drafted position k whose draft there was kept, those rounds);
        a draft counts as kept when every draft up to it was (as :func:`visuals.plots.acceptance_by_position`)."""
        longest = max(self.drafted, default=0)
        positions, rates, counts = [], [], []
        for k in range(1, longest + 1):
            reached = [kept for drafted, kept in zip(self.drafted, self.kept) if drafted >= k]
            positions.append(k)
            counts.append(len(reached))
            rates.append(sum(kept >= k for kept in reached) / len(reached))
        return positions, rates, counts


def from_events(method: str, events: Sequence[RoundEvent]) -> WindowRounds:
    starts, n = [], 0
    for e in events:
        starts.append(n)
        n += len(e.emitted)
    return WindowRounds(
        method, tuple(starts), tuple(e.draft_len for e in events), tuple(e.accepted for e in events), False
    )


def from_replay(replay: PolicyReplay) -> WindowRounds:
    return WindowRounds(f"{replay.policy} (replayed)", replay.starts, replay.lengths, replay.kept, True)


def windows(lanes: Lanes, replayed: PolicyReplay | None = None) -> list[WindowRounds]:
    """The baselines to draw: every lossless fixed-window lane with rounds, else the replay (if any)."""
    real = [from_events(m, ev) for m, ev in lanes.items() if ev and is_fixed_window(m)]
    if real:
        return real
    return [from_replay(replayed)] if replayed is not None and replayed.rounds else []


REPLAY_HOVER = (
    "replayed on this run's text: what a fixed window of this length drafts and keeps here, exactly at temperature 0"
)


def replay_note(base: Sequence[WindowRounds]) -> str:
    """``"fixed:2 (replayed): 78 rounds"`` for the figure's sample line; "" when the baseline is a real lane."""
    return " · ".join(f"{b.name}: {b.rounds} rounds" for b in base if b.replayed)


def replay_sentence(base: Sequence[WindowRounds]) -> str:
    """The caption's sentence on a replayed baseline (empty for a real lane)."""
    replays = [b for b in base if b.replayed]
    if not replays:
        return ""
    b = replays[0]
    return (
        f"The {b.name} baseline is no lane of this run: the same text replayed with a fixed window "
        f"({b.rounds} rounds, {sum(b.kept)} of {sum(b.drafted)} drafts kept), exact at temperature 0."
    )


def kept_by_position_trace(
    lane: str,
    what: str,
    positions: Sequence[int],
    rates: Sequence[float],
    counts: Sequence[int],
    colour: str,
    marker: str,
    dash: str = "dash",
    replayed: bool = False,
    width: float = 1.5,
    size: int = 8,
) -> go.Scatter:
    """A lane's share kept at each drafted position, on a view's right-hand axis (``y2``): the block view's lanes
    and the fixed-window baseline beside the block view and the training lens."""
    return go.Scatter(
        x=list(positions),
        y=list(rates),
        name=f"{lane} · {what}",
        mode="lines+markers",
        yaxis="y2",
        line={"color": colour, "dash": dash, "width": width},
        marker={"color": colour, "symbol": marker, "size": size},
        customdata=list(counts),
        hovertemplate="position %{x}: kept in %{y:.0%} of the %{customdata} rounds that drafted it"
        + (f"<br>{REPLAY_HOVER}" if replayed else "")
        + f"<extra>{lane}</extra>",
    )
