"""The one cost model: what a round costs, and the speedup over plain decoding that follows.

A round costs one target forward over its verification width (γ + 1 tokens for a chain, N + 1 for a token tree of
N nodes), its draft forwards, PACER's pre-verifier calls and the engine's own work; plain decoding (``ar``) is a
round of width 1 with no draft (Leviathan et al. 2023, arXiv 2211.17192, §3.1; docs/ALGORITHMS.md §0). Every
place that predicts a speed uses :class:`CostProfile`: ``costs``, ``bench``'s verdicts, the live tab, the
Playground, the policy replay and the hardware lens.

Two guarantees hold by construction, and tests check them:

- **monotone widths.** A wider pass is never modelled cheaper: measured costs are made non-decreasing in width
  (a running maximum), so timer noise that makes a 4-token pass look cheaper than a 2-token one cannot leak in;
- **never above τ.** Each round costs at least one one-token step, so the predicted speedup
  τ · step / (mean round) is at most τ.

A profile is either *measured* (this machine, one precision) or a *model* (the memory-bound accelerator: a pass
over up to 64 tokens costs one step), and says which on screen.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

GPU_FREE_WIDTH = 64  # the accelerator model: a pass over up to this many tokens costs one step
BOOTSTRAP = 200  # resamples of the rounds behind a speedup's spread (the Live lane's and a replay's alike)
SPREAD_PERCENTILES = (10, 90)  # a spread is the 10th–90th percentile of the resampled speedups


@dataclass(frozen=True)
class RoundShape:
    """What a round did, for pricing: tokens it added, its verification width, draft forwards, head calls."""

    tokens: int
    width: int  # tokens in the target forward (1 for a plain step)
    draft_forwards: int  # draft forwards (γ for a chain, the depth for a tree)
    head_calls: int = 0  # PACER pre-verifier calls


def round_shape(event) -> RoundShape:
    """A :class:`~spec_core.core.types.RoundEvent` as a :class:`RoundShape` (chains, trees and plain steps alike)."""
    tokens = len(getattr(event, "emitted", ()))
    width = getattr(event, "verify_width", None)
    forwards = getattr(event, "draft_forwards", None)
    if width is None or forwards is None:
        tree = getattr(event, "tree", None) or {}
        nodes = tree.get("tokens", ()) if isinstance(tree, Mapping) else ()
        if len(nodes):
            width, forwards = len(nodes) + 1, max(tree.get("depths", (1,)))
        else:
            width, forwards = event.draft_len + 1, event.draft_len
    blocks = (getattr(event, "policy_trace", None) or {}).get("blocks") or ()
    return RoundShape(tokens, int(width), int(forwards), len(blocks))


SOURCES = {  # CostProfile.source → the words every view uses for it
    "run": "timed in this run's rounds",
    "table": "from this machine's cost table",
    "quick": "timed once on this pair",
    "reference": "an earlier measurement on a reference machine",
    "model": "priced by the accelerator model",
}


@dataclass(frozen=True)
class CostProfile:
    """Milliseconds of one round's parts on one machine (or in one model of a machine).

    ``widths`` / ``target_ms``: a target forward over that many new tokens (1 among them); the costs are made
    monotone on construction. ``draft_ms``: one draft forward. ``engine_ms``: the engine's own work per round
    (plain steps pay it too). ``head_ms``: one pre-verifier call.
    """

    widths: tuple[int, ...]
    target_ms: tuple[float, ...]
    draft_ms: float
    engine_ms: float = 0.0
    head_ms: float = 0.0
    name: str = "this machine"
    measured: bool = True
    about: str = ""  # what was measured, where, or the model's parameters
    unit: str = "ms"  # "ms": milliseconds (a measurement); "step": a model where one plain step costs 1 (no clock)
    source: str = "table"  # where the prices come from (SOURCES): a view names it beside every number it prices
    extra: dict = field(default_factory=dict, compare=False)  # e.g. the acceptance a precision was measured at

    def __post_init__(self):
        pairs = sorted(zip(self.widths, self.target_ms))
        if not pairs or pairs[0][0] != 1:
            raise ValueError("a cost profile needs the one-token target forward (width 1)")
        widths = tuple(int(w) for w, _ in pairs)
        monotone = tuple(float(x) for x in np.maximum.accumulate([float(ms) for _, ms in pairs]))
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "target_ms", monotone)

    # -- units --------------------------------------------------------------------------------------------------

    def in_own_unit(self, value: float, unit: str) -> float:
        """``value`` if it is in this profile's unit; a cost in another unit is refused, never added raw (a
        head call timed at 0.3 ms is not 0.3 of a step)."""
        if unit != self.unit:
            raise ValueError(f"{self.name} is priced in {self.unit}; a cost in {unit} cannot be added to it")
        return float(value)

    def with_head(self, ms: float, share: float) -> CostProfile:
        """This profile with a pre-verifier call priced in its own unit: its measured ``ms`` on a profile in
        milliseconds; on a model in steps, ``share`` (its parameters over the target's) of a step, as a draft
        forward is priced there."""
        cost = self.in_own_unit(ms, "ms") if self.unit == "ms" else self.in_own_unit(share * self.step_ms, "step")
        return replace(self, head_ms=cost)

    # -- pricing ------------------------------------------------------------------------------------------------

    def target(self, width) -> np.ndarray:
        """A target forward over ``width`` tokens (interpolated; past the widest measured, the last slope)."""
        w = np.asarray(width, dtype=float)
        xs, ys = np.asarray(self.widths, dtype=float), np.asarray(self.target_ms)
        inside = np.interp(w, xs, ys)
        if len(xs) < 2:
            return inside
        slope = max((ys[-1] - ys[-2]) / (xs[-1] - xs[-2]), 0.0)
        return np.where(w > xs[-1], ys[-1] + (w - xs[-1]) * slope, inside)

    @property
    def step_ms(self) -> float:
        """One plain decoding round: the one-token target forward and the engine's work."""
        return float(self.target_ms[0]) + self.engine_ms

    def round_ms(self, width, draft_forwards, head_calls=0) -> np.ndarray:
        return (
            self.target(width)
            + np.asarray(draft_forwards) * self.draft_ms
            + self.engine_ms
            + np.asarray(head_calls) * self.head_ms
        )

    def verify_ratio(self, width: int) -> float:
        """A pass over ``width`` tokens over a one-token pass: the price of verifying on this machine."""
        return float(self.target(width)) / float(self.target_ms[0])

    def speedup(self, rounds: Iterable[RoundShape]) -> float | None:
        """Predicted speedup over ``ar`` of these rounds: Σ tokens · step / Σ round time (≤ τ)."""
        rounds = list(rounds)
        if not rounds:
            return None
        tokens = sum(r.tokens for r in rounds)
        ms = self.round_ms(
            [r.width for r in rounds], [r.draft_forwards for r in rounds], [r.head_calls for r in rounds]
        ).sum()
        return float(tokens * self.step_ms / ms) if ms > 0 and tokens else None

    def replay(self, lengths, accepted, head_calls=0) -> dict[str, float]:
        """Recorded rounds re-decided: round r drafts ``lengths[r]`` tokens where the target would keep the first
        ``accepted[r]`` of a longer draft, so it adds min(accepted, length) + 1 tokens for one pass over length + 1
        tokens, ``lengths[r]`` draft forwards and ``head_calls[r]`` pre-verifier calls. Every replay of a
        draft-length rule (the policy replay, ``analyze preverifier``, PACER's ``t=auto``, the head comparison)
        prices its rounds here."""
        lengths = np.asarray(lengths, dtype=np.int64)
        kept = np.minimum(np.asarray(accepted, dtype=np.int64), lengths)
        round_tokens, round_ms = self.round_prices(lengths, accepted, head_calls)
        tokens, ms = int(round_tokens.sum()), float(round_ms.sum())
        return {
            "speedup": tokens * self.step_ms / ms,
            "ms_per_token": ms / tokens,
            "drafted_per_round": float(lengths.mean()),
            "tokens_per_round": tokens / len(lengths),
            "kept_share": float(kept.sum() / max(int(lengths.sum()), 1)),
        }

    def round_prices(self, lengths, accepted, head_calls=0) -> tuple[np.ndarray, np.ndarray]:
        """Per re-decided round (as :meth:`replay` prices it): the tokens it adds, min(accepted, length) + 1, and
        its time, one pass over length + 1 tokens with ``lengths`` draft forwards and ``head_calls`` calls. What a
        bootstrap over rounds or prompts resamples (:mod:`spec_core.policies.pacer_headroom`)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        kept = np.minimum(np.asarray(accepted, dtype=np.int64), lengths)
        return kept + 1, np.asarray(self.round_ms(lengths + 1, lengths, head_calls), dtype=float) * np.ones(
            len(lengths)
        )

    def events_speedup(self, events: Sequence) -> float | None:
        """:meth:`speedup` of a run's rounds (round 0 follows the prefill: left out when there are others)."""
        rounds = events[1:] if len(events) > 1 else events
        return self.speedup(round_shape(e) for e in rounds)

    # -- the i.i.d. window model (Leviathan et al. 2023, §3.1) -------------------------------------------------

    def window_speedup(self, alpha, k: int) -> np.ndarray:
        """``fixed:k`` over ``ar`` at i.i.d. per-token acceptance α: E[tokens] = (1 − α^(k+1)) / (1 − α)."""
        return expected_tau(alpha, k) * self.step_ms / self.round_ms(k + 1, k)

    def breakeven_acceptance(self, k: int) -> float:
        """The per-token acceptance at which ``fixed:k`` just matches ``ar`` (NaN: not even at α → 1)."""
        if k < 1:
            return float("nan")
        grid = np.linspace(0.0, 0.9999, 10001)
        s = self.window_speedup(grid, k)
        above = np.nonzero(s >= 1.0)[0]
        return float(grid[above[0]]) if len(above) else float("nan")

    def best_window(self, alpha: float, windows: Sequence[int] = range(1, 9)) -> tuple[int, float]:
        """(k, predicted speedup) of the fixed window this profile favours at acceptance α."""
        scores = {k: float(self.window_speedup(alpha, k)) for k in windows}
        k = max(scores, key=scores.__getitem__)
        return k, scores[k]

    # -- storage ------------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, raw: Mapping) -> CostProfile:
        """From :meth:`to_json`'s fields (a record saved before the one cost model wrote ``overhead_ms``)."""
        fields: dict[str, Any] = {
            ("engine_ms" if k == "overhead_ms" else k): tuple(v) if isinstance(v, list) else v for k, v in raw.items()
        }
        return cls(**fields)


def rounds_spread(tokens, ms, step_ms: float, seed: int = 0) -> tuple[float, float]:
    """The spread of a replay's predicted speedup Σ tokens · step / Σ ms: its 10th–90th percentile when the rounds
    (``tokens`` [R], ``ms`` [R], as :meth:`CostProfile.round_prices` gives them) are resampled with replacement, the
    Live lane's measured spread's definition (:func:`spec_core.core.lane_speed.speedup_spread`). It says how much the
    figure rests on which rounds happened to be replayed, not how far the prices themselves may be off."""
    tok, cost = np.asarray(tokens, dtype=float), np.asarray(ms, dtype=float)
    if not len(tok):
        return float("nan"), float("nan")
    pick = np.random.default_rng(seed).integers(0, len(tok), (BOOTSTRAP, len(tok)))
    speedups = tok[pick].sum(1) * step_ms / np.maximum(cost[pick].sum(1), 1e-12)
    low, high = np.percentile(speedups, SPREAD_PERCENTILES)
    return float(low), float(high)


def expected_tau(alpha, k: int) -> np.ndarray:
    """E[tokens per round] of ``fixed:k`` at i.i.d. acceptance α: Σ_{i≤k} α^i (Leviathan et al. 2023)."""
    return np.sum(np.power.outer(np.asarray(alpha, dtype=float), np.arange(k + 1)), axis=-1)


def accelerator_profile(draft_ratio: float, step_ms: float = 1.0, unit: str = "step") -> CostProfile:
    """The memory-bound accelerator *model*: a pass over up to :data:`GPU_FREE_WIDTH` tokens costs one step
    (reading the weights dominates), a draft forward costs ``draft_ratio`` (draft/target parameters) of one. Its
    unit is the step (``step_ms`` = 1) unless a caller scales it to milliseconds (``unit="ms"``)."""
    return CostProfile(
        name="GPU-like (model)",
        widths=(1, GPU_FREE_WIDTH, 2 * GPU_FREE_WIDTH),
        target_ms=(step_ms, step_ms, 2 * step_ms),
        draft_ms=draft_ratio * step_ms,
        measured=False,
        unit=unit,
        source="model",
        about=f"a model, not a measurement: a pass over ≤ {GPU_FREE_WIDTH} tokens costs one step; "
        f"a draft forward costs {draft_ratio:.3f} of a step (draft/target parameters)",
    )


def profile_from_events(
    lanes: Mapping[str, Sequence], name: str = "this run", about: str = "", one_step_ms: float | None = None
) -> CostProfile | None:
    """A profile measured in a run's own rounds: medians per verification width, per draft forward, of the engine's
    work and of a pre-verifier call (round 0 of each lane follows the prefill: left out). A plain one-token pass
    anchors it: the run's own ``ar`` rounds, or ``one_step_ms`` timed beside them (a lane run alone); None
    without either."""
    by_width: dict[int, list[float]] = {}
    drafts, engine, heads = [], [], []
    for events in lanes.values():
        for e in events[1:]:
            shape = round_shape(e)
            by_width.setdefault(shape.width, []).append(e.target_s * 1000)
            # the drafter's own time (propose and commit); the policy's head runs inside the engine's share
            propose = max(e.draft_s + e.verify_s - e.target_s - e.engine_s, 0.0) * 1000
            trace = getattr(e, "policy_trace", None) or {}
            head = float(trace.get("head_ms", 0.0)) if shape.head_calls else 0.0
            if shape.head_calls:
                heads.append(head / shape.head_calls)
            if shape.draft_forwards:
                drafts.append(propose / shape.draft_forwards)
            engine.append(max(e.engine_s * 1000 - head, 0.0))
    if one_step_ms is not None:
        by_width[1] = [one_step_ms]
    if 1 not in by_width:
        return None
    widths = sorted(by_width)
    return CostProfile(
        name=name,
        source="run",
        widths=tuple(widths),
        target_ms=tuple(statistics.median(by_width[w]) for w in widths),
        draft_ms=statistics.median(drafts) if drafts else 0.0,
        engine_ms=statistics.median(engine) if engine else 0.0,
        head_ms=statistics.median(heads) if heads else 0.0,
        about=about or "medians of this run's own rounds",
    )
