"""Speed on equal terms: each lane's measured speedup over ``ar``, and what the cost model predicts beside it.

*Measured*: tokens/s on each lane's own clock (:class:`~spec_core.types.Stats`, Σ draft_s + verify_s of its
rounds) over the tokens/s of the ``ar`` lane of the same run. Page updates happen at a steady rate between
rounds (:mod:`spec_core.live`), so whatever they cost is spread over every lane alike.

*Predicted*: the cost model of :mod:`spec_core.analysis.costs` (Leviathan et al. 2023, §3.1) — a round costs one
target forward over γ + 1 tokens, γ draft steps and the engine's own work, while ``ar`` pays one round per token —
fed with the lane's measured τ instead of the i.i.d. expectation (so it also holds for adaptive windows) and
with the forward costs measured in this very run: medians per width of the rounds' ``target_s``, the median
draft step and engine work. Medians shrug off the few rounds that a page update slowed, so the two numbers
agreeing says the measurement is clean; a gap says something competed with the models. The prediction is the
steady state: round 0 follows the prefill (it feeds the target only the drafts, and a speculative lane's round 0
also carries its drafter's first pass over the prompt, a cost ``ar`` does not have), so it is left out, while
the measured speed counts every round, as ``/generate`` does.

Runs shorter than :data:`MIN_TIMED_TOKENS` are not timed: a handful of rounds cannot give a rate.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spec_core.session import speedup
from spec_core.types import RoundEvent, Stats

MIN_TIMED_TOKENS = 16  # fewer new tokens than this: "too few tokens to time"
TOO_FEW = "too few tokens to time"


@dataclass(frozen=True)
class RunCosts:
    """Forward costs measured in one run (medians over rounds after the first, which follows the prefill)."""

    target_s: Mapping[int, float]  # tokens fed to the target in one forward → median seconds
    draft_step_s: float | None  # median seconds of drafting per drafted token (None: nothing was drafted)
    ar_round_s: float | None  # median seconds of one plain decoding round (None: no ar lane)


@dataclass(frozen=True)
class LaneSpeed:
    """What a lane's counters say about speed; a None value comes with ``note`` saying why."""

    tokens_per_s: float | None
    measured: float | None  # tokens/s over ar's tokens/s, both on their own clocks
    predicted: float | None  # the cost model's speedup at this lane's τ and draft lengths
    note: str = ""


def _propose_s(e: RoundEvent) -> float:
    """Seconds the drafter itself took this round (the round minus the target forward and the engine's work)."""
    return max(e.draft_s + e.verify_s - e.target_s - e.engine_s, 0.0)


def run_costs(lanes: Mapping[str, Sequence[RoundEvent]]) -> RunCosts:
    """Median forward costs of every lane's rounds (round 0 feeds the target only its drafts: left out)."""
    by_width: dict[int, list[float]] = {}
    steps: list[float] = []
    ar_rounds: list[float] = []
    for method, events in lanes.items():
        for e in events[1:]:
            by_width.setdefault(e.draft_len + 1, []).append(e.target_s)
            if e.draft_len:
                steps.append(_propose_s(e) / e.draft_len)
            if method == "ar":
                ar_rounds.append(e.draft_s + e.verify_s)
    return RunCosts(
        target_s={w: statistics.median(ts) for w, ts in sorted(by_width.items())},
        draft_step_s=statistics.median(steps) if steps else None,
        ar_round_s=statistics.median(ar_rounds) if ar_rounds else None,
    )


def predicted_speedup(events: Sequence[RoundEvent], costs: RunCosts) -> float | None:
    """τ · (an ``ar`` round) / (this lane's mean round: target over γ + 1 tokens, γ draft steps, engine work)."""
    rounds = events[1:]
    if not rounds or costs.ar_round_s is None or not costs.target_s:
        return None
    widths = np.array(list(costs.target_s))
    seconds = np.array(list(costs.target_s.values()))
    engine = statistics.median(e.engine_s for e in rounds)
    step = costs.draft_step_s or 0.0
    per_round = [float(np.interp(e.draft_len + 1, widths, seconds)) + e.draft_len * step + engine for e in rounds]
    tau = Stats.from_events(events).tau
    return tau * costs.ar_round_s / statistics.fmean(per_round)


def lane_speed(method: str, lanes: Mapping[str, Sequence[RoundEvent]], costs: RunCosts | None = None) -> LaneSpeed:
    """The speed a lane may honestly claim, against the ``ar`` lane of the same run when there is one."""
    stats = Stats.from_events(lanes.get(method, ()), method=method)
    if stats.new_tokens < MIN_TIMED_TOKENS:
        return LaneSpeed(None, None, None, TOO_FEW)
    if method == "ar":
        return LaneSpeed(stats.tokens_per_s, 1.0, 1.0, "the baseline")
    ar = lanes.get("ar")
    if not ar:
        return LaneSpeed(stats.tokens_per_s, None, None, "add an ar lane to compare")
    base = Stats.from_events(ar, method="ar")
    if base.new_tokens < MIN_TIMED_TOKENS:
        return LaneSpeed(stats.tokens_per_s, None, None, f"ar: {TOO_FEW}")
    costs = costs or run_costs(lanes)
    return LaneSpeed(stats.tokens_per_s, speedup(stats, base), predicted_speedup(lanes[method], costs))
