"""One speedup, several views: whether two quotes of a method's speedup over ``ar`` agree, and if not, why.

A Live page quotes a method's speedup (``fixed:4``'s, say) in several places: the Live lane measures it on this
run's clocks against the ``ar`` lane (:mod:`spec_core.core.lane_speed`); PACER's comparison replays the fixed windows on
recorded rounds (:mod:`spec_core.policies.pacer_heads`); the Playground replays a recorded text
(:mod:`spec_core.engine.replay`). Each is a :class:`Quote`: a value, its 10–90% spread (a bootstrap over rounds), where its
prices come from (:data:`spec_core.core.cost_model.SOURCES`) and which rounds it is about.

Every speedup over ``ar`` is τ / c: the tokens a round adds over what a round costs in plain steps (one-token target
passes with the engine's work; docs/ALGORITHMS.md §0). So when two quotes disagree beyond their spreads,
:func:`compare_quotes` splits the gap into those two factors and says, from the numbers, which one moved: the rounds
(another text keeps a different share of drafts) or the prices (this run's steps against the table's: a busier
machine; a clock's totals against the cost model's medians). Pure: no model, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from spec_core.core.cost_model import SOURCES

FACTOR_GAP = 0.05  # τ, or a round's cost in plain steps, this far apart (relative) is named as a reason
STEP_GAP = 0.10  # plain steps this far apart in milliseconds: the machine's load (or the machine) differed
OWNER = {  # CostProfile.source → whose prices, before a noun ("this run's steps took …")
    "run": "this run's",
    "table": "the table's",
    "quick": "the quick timing's",
    "reference": "the reference machine's",
    "model": "the accelerator model's",
}
MEASURED_AT = {"table": "the table", "quick": "the quick timing"}  # "… than when the table was measured"


@dataclass(frozen=True)
class Quote:
    """One view's figure for a method's speedup over ``ar``, and what it rests on."""

    view: str  # who quotes it: "the Live lane", "the PACER comparison", "the Playground"
    method: str  # e.g. "fixed:4"
    value: float  # the speedup over ar
    low: float  # 10th percentile of the speedup over resampled rounds
    high: float  # 90th percentile
    source: str  # where its prices come from (a SOURCES key; a lane's clock is "run")
    measured: bool  # True: a ratio of clocks; False: rounds priced by a cost profile
    tau: float  # tokens a round, in the rounds it is about
    about: str  # those rounds, as a noun phrase: "the lane's 31 rounds", "1,629 recorded rounds of training prompts"
    text: str = ""  # the text they answer (quotes of the same text compare rounds with rounds); "" when unknown
    step_ms: float | None = None  # a plain step as it measured or priced it (None: a model counted in steps)

    @property
    def round_steps(self) -> float:
        """What a round costs in plain steps: τ / speedup, the speedup's other factor."""
        return self.tau / self.value if self.value > 0 else math.inf

    def said(self) -> str:
        """The quote as the page states it: who, the value, its spread and its cost source."""
        verb = "measured" if self.measured else "predicts"
        return (
            f"{self.view} {verb} {self.value:.2f}× (10–90%: {self.low:.2f}–{self.high:.2f}; "
            f"{SOURCES.get(self.source, self.source)})"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Quote:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass(frozen=True)
class QuoteCheck:
    """Two quotes of one method's speedup, side by side."""

    agree: bool  # their 10–90% spreads overlap
    reason: str  # one sentence: why they disagree, from their numbers ("" when they agree)
    text: str  # what the page shows: both quotes, then that they agree, or the reason


def within_spreads(a: Quote, b: Quote) -> bool:
    """Whether the two spreads overlap (then neither figure rules the other out), compared as the page shows them,
    to two decimals, so that a reader can check the verdict from the numbers printed beside it."""
    low_a, high_a, low_b, high_b = (round(x, 2) for x in (a.low, a.high, b.low, b.high))
    return low_a <= high_b and low_b <= high_a


def _ms(x: float) -> str:
    """Milliseconds as the sentences print them: whole ones, tenths under 10 ms (a tiny model's steps)."""
    return f"{x:.0f} ms" if x >= 10 else f"{x:.1f} ms"


def compare_quotes(a: Quote, b: Quote) -> QuoteCheck:
    """Whether ``a`` and ``b`` agree within their spreads; if not, one sentence on why, from their numbers.

    ``a`` is the reference (the Live lane's measurement, say) and ``b`` the other view. Speedup = τ / c, so the gap
    b/a is (τ_b / τ_a) / (c_b / c_a): each factor more than :data:`FACTOR_GAP` away from 1 gets a clause, the larger
    first; a student can redo each quote as τ / c from the numbers the sentence gives.
    """
    head = f"{a.method}: {a.said()}; {b.said()}."
    if within_spreads(a, b):
        return QuoteCheck(True, "", f"{head} They agree within their spreads.")
    reason = _reason(a, b)
    return QuoteCheck(False, reason, f"{head} They disagree beyond their spreads. {reason}")


def _apart(x: float, y: float, gap: float) -> bool:
    return x > 0 and y > 0 and abs(math.log(x / y)) > math.log1p(gap)


def _reason(a: Quote, b: Quote) -> str:
    clauses: list[tuple[float, str]] = []  # (size of the factor, clause)
    if _apart(b.tau, a.tau, FACTOR_GAP):
        clauses.append((abs(math.log(b.tau / a.tau)), _rounds_clause(a, b)))
    if _apart(b.round_steps, a.round_steps, FACTOR_GAP):
        clauses.append((abs(math.log(b.round_steps / a.round_steps)), _prices_clause(a, b)))
    if not clauses:
        gap = abs(b.value / a.value - 1) if a.value else math.inf
        said = (
            f"their rounds and their prices each differ by under {FACTOR_GAP:.0%} (τ {b.tau:.2f} against "
            f"{a.tau:.2f}, a round {b.round_steps:.2f} plain steps against {a.round_steps:.2f}), which adds up to a "
            f"{gap:.0%} gap: more than spreads this narrow cover"
        )
    else:
        said = "; and ".join(text for _, text in sorted(clauses, key=lambda c: -c[0]))
    return said[0].upper() + said[1:] + "."


def _rounds_clause(a: Quote, b: Quote) -> str:
    """τ differs: the two replay or ran other rounds."""
    why = ""
    if a.text and b.text:
        why = (
            " (another text keeps a different share of drafts)"
            if a.text != b.text
            else " (the same prompt, answered in other rounds)"
        )
    return f"{b.about} add {b.tau:.2f} tokens a round against {a.tau:.2f} in {a.about}{why}"


def _prices_clause(a: Quote, b: Quote) -> str:
    """A round's cost in plain steps differs: say whose prices, and what the step times show."""
    cost = (
        f"a {b.method} round costs {b.round_steps:.2f} plain steps in {b.view}'s figure against "
        f"{a.round_steps:.2f} in {a.view}'s"
    )
    if a.source != b.source:
        if a.step_ms is not None and b.step_ms is not None and _apart(a.step_ms, b.step_ms, STEP_GAP):
            return f"{cost}, and {_load(a, b)}"
        return (
            f"{cost}, and the two are priced differently ({b.view}: {SOURCES.get(b.source, b.source)}; "
            f"{a.view}: {SOURCES.get(a.source, a.source)})"
        )
    if a.measured != b.measured and a.step_ms is not None and b.step_ms is not None:
        clock, model = (a, b) if a.measured else (b, a)
        assert clock.step_ms is not None and model.step_ms is not None  # checked above
        return (
            f"{cost}, and {clock.view}'s clock averages every round ({_ms(clock.round_steps * clock.step_ms)} a "
            f"round, {_ms(clock.step_ms)} a plain step) where {model.view} prices each pass at "
            f"{OWNER.get(model.source, 'its')} median for its width ({_ms(model.round_steps * model.step_ms)}, "
            f"{_ms(model.step_ms)}): rounds slower or faster than their median move averages only"
        )
    return f"{cost}, though both price rounds {SOURCES.get(a.source, a.source)}, but from different timings"


def _load(a: Quote, b: Quote) -> str:
    """Step times that differ between two sources: whose steps were slower, and what that says."""
    run, other = (a, b) if a.source == "run" else (b, a)
    assert run.step_ms is not None and other.step_ms is not None  # checked by the caller
    steps = (
        f"{OWNER.get(run.source, run.view)} steps took {_ms(run.step_ms)} against "
        f"{OWNER.get(other.source, other.view)} {_ms(other.step_ms)}"
    )
    slower = run.step_ms > other.step_ms
    if run.source == "run" and other.source in MEASURED_AT:
        busy = "busier" if slower else "less busy"
        return f"{steps}: the machine was {busy} than when {MEASURED_AT[other.source]} was measured"
    if other.source == "reference":
        return f"{steps}: the reference is another machine, {'faster' if slower else 'slower'} than this one"
    return f"{steps}: the two were timed under different loads"
