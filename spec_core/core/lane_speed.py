"""Speed on equal terms, and a verdict a student can read under every lane.

*Measured*: tokens/s on each lane's own clock (:class:`~spec_core.core.types.Stats`, Σ draft_s + verify_s of its rounds)
over the tokens/s of the ``ar`` lane of the same run, with its spread: the 10th–90th percentile of that ratio when
both lanes' rounds are resampled (a bootstrap over rounds), so a lane whose spread covers 1.0 reads "within noise".

*Predicted*: :class:`~spec_core.core.cost_model.CostProfile` built from this run's own rounds (medians per
verification width, made monotone), priced over the lane's rounds: never above τ (docs/ALGORITHMS.md §0). When
the measured ratio falls outside its spread's reach of the prediction, the machine was busy: something competed
with the models.

*Verdict*: one sentence from the run's own numbers — faster or slower than ``ar``, and why (acceptance against the
price of verifying on this machine, and the acceptance needed to break even); for a lossy method, that it is lossy
and how far its text is from ``ar``'s; and what the same rounds would give on a GPU-like machine (a model).

Runs shorter than :data:`MIN_TIMED_TOKENS` are not timed: a handful of rounds cannot give a rate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spec_core.core.cost_model import (
    BOOTSTRAP,
    SOURCES,
    SPREAD_PERCENTILES,
    CostProfile,
    accelerator_profile,
    profile_from_events,
    round_shape,
)
from spec_core.core.quotes import Quote
from spec_core.core.types import RoundEvent, Stats, written_drafts

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

MIN_TIMED_TOKENS = 16  # fewer new tokens than this: "too few tokens to time"
TOO_FEW = "too few tokens to time"
BUSY_GAP = 0.15  # measured this far outside its spread from the prediction: the machine was busy
DEFAULT_DRAFT_RATIO = 0.05  # draft/target parameters when the pair does not say (the embedded pair: ≈ 0.046)


@dataclass(frozen=True)
class LaneSpeed:
    """What a lane's counters say about speed; a None value comes with ``note`` saying why."""

    tokens_per_s: float | None
    measured: float | None  # tokens/s over ar's tokens/s, both on their own clocks
    predicted: float | None  # the cost model's speedup over this lane's rounds (≤ τ)
    note: str = ""
    spread: tuple[float, float] | None = None  # 10th–90th percentile of the measured ratio (bootstrap over rounds)
    verdict: str = ""  # one plain sentence: faster or slower than ar, and why
    breakeven_acceptance: float | None = None  # the acceptance a window of this lane's length needs to match ar
    breakeven_tau: float | None = None  # a mean round of this lane in plain steps: the τ that matches ar
    gpu_like: float | None = None  # the same rounds priced by the accelerator model

    @property
    def within_noise(self) -> bool:
        return self.spread is not None and self.spread[0] <= 1.0 <= self.spread[1]

    @property
    def busy(self) -> bool:
        """Measured and predicted disagree beyond the spread: something else ran on the machine."""
        if self.measured is None or self.predicted is None or self.spread is None:
            return False
        low, high = self.spread
        return self.predicted < low * (1 - BUSY_GAP) or self.predicted > high * (1 + BUSY_GAP)

    def as_stats(self) -> dict:
        """The fields ``/generate``'s final stats carry."""
        return {
            "verdict": self.verdict,
            "predicted_speedup": self.predicted,
            "measured_speedup": self.measured,
            "speedup_spread": list(self.spread) if self.spread else None,
            "breakeven_acceptance": self.breakeven_acceptance,
            "gpu_like_speedup": self.gpu_like,
        }


def _busy_s(events: Sequence[RoundEvent]) -> np.ndarray:
    return np.array([e.draft_s + e.verify_s for e in events], dtype=float)


def speedup_spread(events: Sequence[RoundEvent], ar: Sequence[RoundEvent], seed: int = 0) -> tuple[float, float]:
    """10th–90th percentile of (tokens/s of ``events``) / (tokens/s of ``ar``), both resampled round by round."""
    rng = np.random.default_rng(seed)
    tok_a, s_a = np.array([len(e.emitted) for e in events], float), _busy_s(events)
    tok_b, s_b = np.array([len(e.emitted) for e in ar], float), _busy_s(ar)
    ia = rng.integers(0, len(tok_a), (BOOTSTRAP, len(tok_a)))
    ib = rng.integers(0, len(tok_b), (BOOTSTRAP, len(tok_b)))
    rate_a = tok_a[ia].sum(1) / np.maximum(s_a[ia].sum(1), 1e-12)
    rate_b = tok_b[ib].sum(1) / np.maximum(s_b[ib].sum(1), 1e-12)
    ratio = rate_a / np.maximum(rate_b, 1e-12)
    low, high = np.percentile(ratio, SPREAD_PERCENTILES)
    return float(low), float(high)


def breakeven(events: Sequence[RoundEvent], profile: CostProfile) -> tuple[float, float]:
    """(τ, acceptance) these rounds would need to match ``ar`` at their own widths and draft lengths.

    The mean round over one plain step is the τ that breaks even; with τ = 1 + α · (drafts per round), the
    acceptance α = accepted / drafted that gives it. No i.i.d. assumption: the lane's own rounds are priced.
    """
    rounds = [round_shape(e) for e in (events[1:] or events)]
    mean_ms = float(
        np.mean(
            profile.round_ms(
                [r.width for r in rounds], [r.draft_forwards for r in rounds], [r.head_calls for r in rounds]
            )
        )
    )
    tau = mean_ms / profile.step_ms
    drafted = float(np.mean([r.width - 1 for r in rounds]))
    return tau, ((tau - 1) / drafted if drafted else float("nan"))


def mean_draft_len(events: Sequence[RoundEvent]) -> float:
    shapes = [round_shape(e) for e in events]
    return float(np.mean([s.width - 1 for s in shapes])) if shapes else 0.0


def cost_source(profile: CostProfile) -> str:
    """Where a profile's prices come from, in the words every view uses (:data:`spec_core.core.cost_model.SOURCES`)."""
    return SOURCES.get(profile.source, profile.source)


def verdict_text(
    stats: Stats, speed: LaneSpeed, profile: CostProfile | None, events: Sequence[RoundEvent], lossy_note: str = ""
) -> str:
    """One plain sentence (two for a lossy lane) from this run's own numbers."""
    if speed.measured is None and speed.predicted is None:
        return ""
    m = speed.measured if speed.measured is not None else speed.predicted
    assert m is not None  # one of them (checked above)
    if speed.measured is None:
        head = f"predicted {'faster' if m >= 1 else 'slower'} than ar on this machine ({m:.2f}×, its measured costs)"
    elif speed.within_noise and speed.spread is not None:
        low, high = speed.spread
        head = f"about as fast as ar here ({m:.2f}×, within noise: its 10–90% spread {low:.2f}–{high:.2f}× covers 1×)"
    elif m >= 1:
        head = f"faster than ar here ({m:.2f}×)"
    else:
        head = f"slower than ar here ({m:.2f}×)"
    why = ""
    if profile is not None and stats.drafted_tokens and speed.breakeven_tau is not None:
        width = max(2, round(mean_draft_len(events) + 1))
        price = profile.verify_ratio(width)
        alpha = stats.acceptance_rate
        shapes = [round_shape(e) for e in events if e.draft_len]  # draft forwards as the cost model counts them
        forwards = sum(s.draft_forwards for s in shapes) / max(len(shapes), 1)
        drafting = forwards * profile.draft_ms / profile.step_ms  # a copied (lookup) draft takes no forward
        priced = [e for e in events[1:] or events]  # the rounds the break-even is priced on (breakeven)
        drafted = mean_draft_len(priced)  # the verified drafts a round: a tree's every node, not its path
        word, kept = "drafts", "accepted"
        if any(getattr(e, "tree", None) for e in priced):  # α on the break-even's basis: kept / nodes verified
            nodes = sum(round_shape(e).width - 1 for e in priced)
            alpha = sum(written_drafts(e) for e in priced) / nodes if nodes else 0.0
            word, kept = "tree nodes", "kept"
        cost, drafted = round(speed.breakeven_tau, 2), round(drafted, 1)  # shown: a reader redoes the sum from them
        need_text = (
            f"it must add {cost:.2f} tokens a round: with {drafted:.1f} {word} a round, ≥ "
            f"{(cost - 1) / drafted:.0%} {kept} (({cost:.2f} − 1) / {drafted:.1f}) breaks even"
            if drafted and (cost - 1) / drafted <= 1
            else f"even keeping every one of its {word} would not break even at this length"
        )
        verb = "but" if m < 1 else "and"
        why = (
            f": {alpha:.0%} of {word} {kept} (τ {stats.tau:.2f}), {verb} a round costs {cost:.2f} plain steps "
            f"({cost_source(profile)}: verifying {width} tokens costs {price:.1f}× a plain step, drafting them "
            f"{drafting:.1f}× more, the engine the rest), so {need_text}"
        )
    busy = " The machine was busy: measured and predicted disagree (" + (
        f"predicted {speed.predicted:.2f}×)." if speed.predicted is not None else "no prediction)."
    )
    gpu = f" On a GPU-like machine (a model) these rounds would give ≈ {speed.gpu_like:.1f}×." if speed.gpu_like else ""
    copied = ""
    if stats.copied_tokens:
        copied = (
            f" {stats.copied_tokens} of its {stats.accepted_tokens} kept drafts were copied from the prompt or the "
            f"text so far (prompt lookup); the draft model drafted the rest."
            if stats.copied_tokens < stats.accepted_tokens
            else f" All {stats.accepted_tokens} kept drafts were copied from the prompt or the text (prompt lookup)."
        )
    text = head[0].upper() + head[1:] + why + "." + copied + (busy if speed.busy else "") + gpu
    return f"{lossy_note} {text}".strip() if lossy_note else text


def lane_speed(
    method: str,
    lanes: Mapping[str, Sequence[RoundEvent]],
    profile: CostProfile | None = None,
    draft_ratio: float = DEFAULT_DRAFT_RATIO,
    lossy_note: str = "",
    full: bool = True,
) -> LaneSpeed:
    """The speed a lane may honestly claim, against the ``ar`` lane of the same run when there is one.

    ``profile``: the run's costs (default: :func:`~spec_core.core.cost_model.profile_from_events` of ``lanes``).
    ``lossy_note``: for a lossy lane, how far its text is from ``ar``'s (it leads the verdict). ``full=False`` (a
    frame of a run still going) leaves out the spread, the verdict and the accelerator model: nothing shows them yet.
    """
    events = lanes.get(method, ())
    stats = Stats.from_events(events, method=method)
    if stats.new_tokens < MIN_TIMED_TOKENS:
        return LaneSpeed(None, None, None, TOO_FEW)
    if method == "ar":
        return LaneSpeed(
            stats.tokens_per_s, 1.0, 1.0, "the baseline", verdict="The baseline: one target step per token."
        )
    ar = lanes.get("ar")
    if not ar:
        return LaneSpeed(stats.tokens_per_s, None, None, "add an ar lane to compare")
    base = Stats.from_events(ar, method="ar")
    if base.new_tokens < MIN_TIMED_TOKENS:
        return LaneSpeed(stats.tokens_per_s, None, None, f"ar: {TOO_FEW}")
    profile = profile or profile_from_events(lanes)
    measured = stats.tokens_per_s / base.tokens_per_s
    if not full:
        return LaneSpeed(stats.tokens_per_s, measured, profile.events_speedup(events) if profile else None)
    return _priced(stats, events, profile, draft_ratio, measured, speedup_spread(events, ar), lossy_note)


def _priced(
    stats: Stats,
    events: Sequence[RoundEvent],
    profile: CostProfile | None,
    draft_ratio: float,
    measured: float | None = None,
    spread: tuple[float, float] | None = None,
    lossy_note: str = "",
) -> LaneSpeed:
    """A lane's prediction, break-even, accelerator figure and verdict under ``profile`` (with ``ar``'s measured
    ratio and its spread when the run had an ``ar`` lane)."""
    predicted = profile.events_speedup(events) if profile is not None else None
    tau_need, need = breakeven(events, profile) if profile is not None and stats.drafted_tokens else (None, None)
    need = need if need is not None and np.isfinite(need) else None
    gpu = accelerator_profile(draft_ratio).events_speedup(events) if stats.drafted_tokens else None
    speed = LaneSpeed(
        stats.tokens_per_s,
        measured,
        predicted,
        spread=spread,
        breakeven_acceptance=need,
        breakeven_tau=tau_need,
        gpu_like=gpu,
    )
    return dataclasses.replace(speed, verdict=verdict_text(stats, speed, profile, events, lossy_note))


def run_verdict(
    events: Sequence[RoundEvent],
    probe: Callable[[], CostProfile | None],
    draft_ratio: float | None = None,
) -> LaneSpeed:
    """The verdict of a lane run alone (``/generate``): predicted, from its own rounds and a plain step timed
    beside them (``probe``: :func:`spec_core.model.pass_timing.probe_profile`, called only when the lane drafted);
    no measured ratio (no ``ar`` ran)."""
    stats = Stats.from_events(events)
    if not events or not stats.drafted_tokens:
        return LaneSpeed(
            stats.tokens_per_s,
            None,
            1.0 if events else None,
            "plain decoding",
            verdict="Plain decoding: one target step per token (the baseline).",
        )
    profile = probe()
    return _priced(stats, events, profile, draft_ratio if draft_ratio is not None else DEFAULT_DRAFT_RATIO)


def draft_ratio(pair: ModelPair) -> float | None:
    """Parameters a draft forward reads over the target's: the accelerator model's price of a draft step."""
    if pair.draft is None:
        return None
    target = sum(p.numel() for p in pair.parts_target.parameters())
    own = sum(p.numel() for p in pair.draft.parameters())
    own += sum(  # an int8 draft (spec_core.model.int8) keeps its linears' weights as int8 buffers
        b.numel() for n, b in pair.draft.named_buffers() if n.endswith("weight_int8") and not n.startswith("head_proj")
    )
    head = getattr(pair.draft, "vocab_subset", None)  # a feature draft reads its trimmed head rows too
    shared = int(head.numel()) * int(pair.target.config.hidden_size) if head is not None and head.numel() else 0
    return (own + shared) / target if target else None


def text_distance(tokens: Sequence[int], ar: Sequence[int], lossy: bool, greedy: bool = True) -> str:
    """How far a lane's text is from ``ar``'s, in words, at temperature 0 only: a sampled lane (lossless or lossy)
    parts from ar's sample by chance, so a distance from it would say nothing of the verifier. When one text is a
    prefix of the other (a run cut by Stop), the lane has not parted from ar: it wrote ar's text so far."""
    if not greedy:
        return ""
    n = min(len(tokens), len(ar))
    first = next((i for i in range(n) if tokens[i] != ar[i]), None)
    if first is None:
        same = "same text as ar" if len(tokens) == len(ar) else f"same text as ar over the first {n} tokens"
        return f"Lossy, yet {same} here ✓." if lossy else f"{same[0].upper()}{same[1:]} ✓."
    differ = sum(a != b for a, b in zip(tokens, ar)) + abs(len(tokens) - len(ar))
    share = differ / max(len(tokens), len(ar), 1)
    if lossy:
        return (
            f"Lossy: its text parts from ar's at token {first + 1} ({share:.0%} of its tokens differ from ar's there)."
        )
    return f"Parts from ar at token {first + 1} (a near-tie: see the ◆ mark)."


def lane_quote(
    method: str, lanes: Mapping[str, Sequence[RoundEvent]], speed: LaneSpeed | None = None, text: str = ""
) -> Quote | None:
    """The Live lane's measured speedup as a :class:`~spec_core.core.quotes.Quote`, for other views to set theirs beside
    it; None without a measured ratio (no ``ar`` lane, too few tokens). τ is its tokens over its rounds and a plain
    step is ``ar``'s time per token, so τ / (the lane's mean round in plain steps) is the measured ratio exactly.
    ``text``: the prompt the run answered, when the caller knows it."""
    events, ar = lanes.get(method, ()), lanes.get("ar", ())
    if method == "ar" or not events or not ar:
        return None
    speed = speed or lane_speed(method, lanes)
    if speed.measured is None or speed.spread is None:
        return None
    stats, base = Stats.from_events(events), Stats.from_events(ar)
    return Quote(
        view="the Live lane",
        method=method,
        value=speed.measured,
        low=speed.spread[0],
        high=speed.spread[1],
        source="run",
        measured=True,
        tau=stats.new_tokens / len(events),
        about=f"the lane's {len(events)} rounds",
        text=text,
        step_ms=1000 * base.busy_s / max(base.new_tokens, 1),
    )


def lane_quotes(lanes: Mapping[str, Sequence[RoundEvent]], text: str = "") -> dict[str, Quote]:
    """Every lane's :func:`lane_quote` that exists (method → quote), priced as :func:`lane_speeds` prices them."""
    speeds = lane_speeds(lanes)
    quotes = {m: lane_quote(m, lanes, speeds[m], text) for m in lanes}
    return {m: q for m, q in quotes.items() if q is not None}


def lane_speeds(
    lanes: Mapping[str, Sequence[RoundEvent]],
    methods: Sequence[str] | None = None,
    lossy_notes: Mapping[str, str] | None = None,
    draft_ratio: float = DEFAULT_DRAFT_RATIO,
    full: bool = True,
) -> dict[str, LaneSpeed]:
    """Every lane's :class:`LaneSpeed`, priced with one profile measured in the run's own rounds."""
    profile = profile_from_events(lanes)
    notes = lossy_notes or {}
    return {m: lane_speed(m, lanes, profile, draft_ratio, notes.get(m, ""), full) for m in (methods or list(lanes))}
