"""One method's speedup quoted by several views (spec_core/core/quotes.py): agreement within spreads, and a reason from
the numbers for every pairing of cost sources; the lane's quote and a replay's spread (spec_core/core/lane_speed.py,
spec_core/core/cost_model.py)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from scripted import scripted_round

from spec_core.core.cost_model import SOURCES, CostProfile, rounds_spread
from spec_core.core.lane_speed import lane_quote, lane_speed
from spec_core.core.quotes import Quote, compare_quotes, within_spreads
from spec_core.core.types import RoundEvent

LANE = Quote(
    view="the Live lane",
    method="fixed:4",
    value=0.80,
    low=0.75,
    high=0.85,
    source="run",
    measured=True,
    tau=2.0,  # a round: 2.0 / 0.80 = 2.50 plain steps
    about="the lane's 30 rounds",
    text="Why is the sky blue?",
    step_ms=41.0,
)


def one_sentence(text: str) -> bool:
    return text.endswith(".") and not re.search(r"[.:;]\s+[A-Z]", text[:-1])


def other(**changes) -> Quote:
    """A replay's quote that agrees with LANE's rounds and prices unless told otherwise."""
    base = Quote(
        view="the Playground",
        method="fixed:4",
        value=0.80,
        low=0.78,
        high=0.82,
        source="run",
        measured=False,
        tau=2.0,
        about="the Playground's 30 replayed rounds",
        text="Why is the sky blue?",
        step_ms=41.0,
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_quotes_whose_spreads_overlap_agree_whatever_their_sources(source):
    b = other(source=source, value=0.84, low=0.83, high=0.90, step_ms=None if source == "model" else 34.0)
    check = compare_quotes(LANE, b)
    assert check.agree and check.reason == "" and within_spreads(LANE, b)
    assert check.text.endswith("They agree within their spreads.")
    assert "0.80× (10–90%: 0.75–0.85; timed in this run's rounds)" in check.text  # each names its cost source
    assert f"0.84× (10–90%: 0.83–0.90; {SOURCES[source]})" in check.text


def test_touching_spreads_agree_and_separate_ones_do_not():
    assert compare_quotes(LANE, other(value=0.9, low=0.85, high=0.95)).agree
    assert not compare_quotes(LANE, other(value=0.9, low=0.86, high=0.95)).agree
    # judged on the numbers the page prints (two decimals): 0.854 shows as 0.85, touching the lane's 0.85
    assert compare_quotes(LANE, other(value=0.9, low=0.854, high=0.95)).agree
    assert not compare_quotes(LANE, other(value=0.9, low=0.856, high=0.95)).agree


def test_steps_under_ten_milliseconds_keep_a_decimal():
    tiny = dataclasses.replace(LANE, step_ms=3.84)
    reason = compare_quotes(tiny, other(value=0.95, low=0.94, high=0.96, step_ms=3.2)).reason
    assert "(9.6 ms a round, 3.8 ms a plain step)" in reason and "(6.7 ms, 3.2 ms)" in reason


def test_other_rounds_are_named_with_both_taus():
    """Same prices (a round 2.50 plain steps in both), τ 2.4 against 2.0: the rounds moved, and the text differs."""
    b = other(tau=2.4, value=0.96, low=0.95, high=0.97, text="training prompts", about="1,629 recorded rounds")
    check = compare_quotes(LANE, b)
    assert not check.agree
    assert check.reason == (
        "1,629 recorded rounds add 2.40 tokens a round against 2.00 in the lane's 30 rounds "
        "(another text keeps a different share of drafts)."
    )
    assert check.text.endswith("They disagree beyond their spreads. " + check.reason)
    same = compare_quotes(LANE, other(tau=2.4, value=0.96, low=0.95, high=0.97))
    assert "(the same prompt, answered in other rounds)" in same.reason
    unknown = compare_quotes(LANE, other(tau=2.4, value=0.96, low=0.95, high=0.97, text=""))
    assert unknown.reason.endswith("in the lane's 30 rounds.")


@pytest.mark.parametrize(
    ("source", "step_ms", "words"),
    [
        ("table", 34.0, "this run's steps took 41 ms against the table's 34 ms: the machine was busier than when the "
         "table was measured"),
        ("table", 50.0, "this run's steps took 41 ms against the table's 50 ms: the machine was less busy than when "
         "the table was measured"),
        ("quick", 34.0, "than when the quick timing was measured"),
        ("reference", 94.0, "this run's steps took 41 ms against the reference machine's 94 ms: the reference is "
         "another machine, slower than this one"),
    ],
)  # fmt: skip
def test_other_prices_with_other_step_times_say_whose_steps_were_slower(source, step_ms, words):
    b = other(source=source, step_ms=step_ms, value=0.95, low=0.94, high=0.96)  # a round 2.0 / 0.95 = 2.11 steps
    check = compare_quotes(LANE, b)
    assert not check.agree
    assert check.reason.startswith("A fixed:4 round costs 2.11 plain steps in the Playground's figure against 2.50 in ")
    assert words in check.reason and one_sentence(check.reason)


@pytest.mark.parametrize("source", ["table", "model"])
def test_other_prices_at_the_same_step_time_name_both_sources(source):
    b = other(source=source, step_ms=None if source == "model" else 40.0, value=0.95, low=0.94, high=0.96)
    reason = compare_quotes(LANE, b).reason
    assert f"the two are priced differently (the Playground: {SOURCES[source]}; the Live lane: " in reason
    assert "timed in this run's rounds)" in reason


def test_a_clock_against_the_same_runs_medians_says_totals_against_medians():
    b = other(value=0.95, low=0.94, high=0.96, step_ms=38.0)  # both "run": one measured, one predicted
    reason = compare_quotes(LANE, b).reason
    assert "and the Live lane's clock averages every round (102 ms a round, 41 ms a plain step)" in reason  # 2.50 steps
    assert "where the Playground prices each pass at this run's median for its width (80 ms, 38 ms)" in reason
    both_predicted = compare_quotes(dataclasses.replace(LANE, measured=False), b).reason
    assert "from different timings" in both_predicted


def test_both_factors_are_named_larger_first():
    b = other(tau=2.2, value=1.10, low=1.08, high=1.12, source="table", step_ms=34.0, text="training prompts")
    reason = compare_quotes(LANE, b).reason  # τ × 1.10, a round 2.0 plain steps: × 0.80 (the larger)
    first, second = reason.split("; and ")
    assert first.startswith("A fixed:4 round costs 2.00 plain steps") and "busier" in first
    assert second.startswith("the Playground's 30 replayed rounds add 2.20 tokens a round against 2.00")
    assert one_sentence(reason)


def test_small_factors_with_narrow_spreads_say_so():
    b = other(tau=2.08, value=0.866, low=0.86, high=0.87)  # τ × 1.04, a round × 0.96: 8% apart together
    assert not compare_quotes(LANE, b).agree
    assert "each differ by under 5%" in compare_quotes(LANE, b).reason


def test_a_quote_round_trips_through_a_dict():
    assert Quote.from_dict({**LANE.to_dict(), "later_field": 1}) == LANE
    assert LANE.round_steps == pytest.approx(2.5)


def test_a_replays_spread_brackets_its_speedup_and_is_seeded():
    rng = np.random.default_rng(0)
    tokens, ms = rng.integers(1, 5, 40).astype(float), rng.uniform(30, 60, 40)
    value = tokens.sum() * 30.0 / ms.sum()
    low, high = rounds_spread(tokens, ms, 30.0)
    assert low < value < high and (low, high) == rounds_spread(tokens, ms, 30.0)
    assert rounds_spread(np.full(10, 2.0), np.full(10, 60.0), 30.0) == pytest.approx((1.0, 1.0))  # no variation
    assert all(np.isnan(rounds_spread([], [], 30.0)))


def event(i: int, method: str, drafted: int, accepted: int, seconds: float) -> RoundEvent:
    return scripted_round(
        i, method, drafted, accepted, draft_s=seconds / 4, verify_s=3 * seconds / 4, target_s=seconds / 2
    )


def test_the_lanes_quote_is_its_measured_ratio_as_tau_over_a_rounds_cost():
    lanes = {
        "ar": [event(i, "ar", 0, 0, 0.040 + 0.004 * (i % 3)) for i in range(40)],
        "fixed:4": [event(i, "fixed:4", 4, i % 3, 0.090 + 0.01 * (i % 2)) for i in range(20)],
    }
    quote = lane_quote("fixed:4", lanes, text="p")
    speed = lane_speed("fixed:4", lanes)
    assert quote is not None and quote.value == speed.measured and (quote.low, quote.high) == speed.spread
    assert quote.source == "run" and quote.measured and quote.text == "p" and quote.about == "the lane's 20 rounds"
    assert quote.tau == pytest.approx(39 / 20)  # 0, 1, 2, 0, … kept (19 in all), plus one token each round
    assert quote.step_ms == pytest.approx(1000 * sum(e.draft_s + e.verify_s for e in lanes["ar"]) / 40)
    lane_ms = 1000 * sum(e.draft_s + e.verify_s for e in lanes["fixed:4"]) / 20
    assert quote.round_steps == pytest.approx(lane_ms / quote.step_ms)  # τ / value: a round in plain steps
    assert lane_quote("ar", lanes) is None and lane_quote("fixed:4", {"fixed:4": lanes["fixed:4"]}) is None


def test_a_profile_source_is_named_in_every_quote():
    profile = CostProfile(widths=(1, 5), target_ms=(30.0, 40.0), draft_ms=2.0, source="table")
    quote = other(source=profile.source)
    assert SOURCES["table"] in quote.said() and quote.said().startswith("the Playground predicts 0.80×")
