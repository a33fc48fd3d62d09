"""The one cost model: monotone widths, never above τ, the oracle on top, the verdict from a run's own numbers."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from spec_core.core import lane_speed as speed
from spec_core.core.cost_model import CostProfile, RoundShape, accelerator_profile, profile_from_events
from spec_core.core.types import Stats


def test_a_wider_pass_is_never_modelled_cheaper():
    noisy = CostProfile(widths=(1, 2, 4, 8), target_ms=(59.0, 101.2, 90.7, 108.1), draft_ms=2.0)
    assert noisy.target_ms == (59.0, 101.2, 101.2, 108.1)  # 4 tokens no cheaper than 2
    xs = np.arange(1, 40)
    assert (np.diff(noisy.target(xs)) >= 0).all()  # past the widest measured: the last slope, never down


@pytest.mark.parametrize("widths,ms", [((1, 2, 5), (40.0, 30.0, 20.0)), ((1, 3), (10.0, 100.0)), ((1,), (5.0,))])
def test_the_prediction_never_exceeds_tau(widths, ms):
    profile = CostProfile(widths=widths, target_ms=ms, draft_ms=0.0, engine_ms=0.0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        rounds = [
            RoundShape(int(t) + 1, int(w) + 1, int(w)) for w, t in zip(rng.integers(0, 8, 20), rng.integers(0, 8, 20))
        ]
        tau = sum(r.tokens for r in rounds) / len(rounds)
        assert profile.speedup(rounds) <= tau + 1e-9


def test_breakeven_acceptance_is_where_a_window_matches_ar():
    avx2_bf16 = CostProfile(widths=(1, 2, 4, 8, 16), target_ms=(39.2, 54.5, 89.8, 162.7, 336.5), draft_ms=3.0)
    need = avx2_bf16.breakeven_acceptance(4)
    assert 0.5 < need < 1.0
    assert avx2_bf16.window_speedup(need, 4) == pytest.approx(1.0, abs=2e-3)
    free = accelerator_profile(0.05)
    assert free.breakeven_acceptance(4) < 0.2  # verification is free: only the four draft steps need paying for
    assert math.isnan(CostProfile(widths=(1, 2), target_ms=(1.0, 10.0), draft_ms=5.0).breakeven_acceptance(1))


def test_the_accelerator_model_says_it_is_a_model():
    gpu = accelerator_profile(0.046)
    assert not gpu.measured and "model" in gpu.about and gpu.verify_ratio(33) == 1.0


def _round(i, gamma, accepted, target_s, draft_step=0.002, engine_s=0.001, method="fixed:2"):
    emitted = tuple(range(accepted + 1))
    return SimpleNamespace(
        index=i,
        method=method,
        draft_len=gamma,
        accepted=accepted,
        emitted=emitted,
        draft_s=gamma * draft_step + engine_s / 2,
        verify_s=target_s + engine_s / 2,
        target_s=target_s,
        engine_s=engine_s,
        policy_trace={},
        tree={},
        finished=False,
    )


def test_a_slow_verification_gives_a_verdict_that_says_why():
    # bf16 on an AVX2 CPU: a 5-token pass costs 2.3 one-token steps, a quarter of the drafts accepted
    ar = [_round(i, 0, 0, 0.040, method="ar") for i in range(40)]
    lane = [_round(i, 4, 1 if i % 4 == 0 else 0, 0.092) for i in range(30)]
    s = speed.lane_speed("fixed:4", {"ar": ar, "fixed:4": lane})
    assert s.measured < 1 and s.predicted <= Stats.from_events(lane).tau
    assert s.verdict.startswith("Slower than ar here")
    assert "verifying 5 tokens costs 2.3× a plain step" in s.verdict and "breaks even" in s.verdict
    assert "timed in this run's rounds" in s.verdict  # the cost source is named
    # the break-even can be redone from the sentence: ≥ (cost − 1) / drafts accepted
    cost, drafts, need = re.search(r"≥ \d+% accepted \(\(([\d.]+) − 1\) / ([\d.]+)\)", s.verdict).group(1, 2, 0)
    assert need.startswith(f"≥ {(float(cost) - 1) / float(drafts):.0%}")
    assert s.breakeven_acceptance is not None and s.breakeven_acceptance > Stats.from_events(lane).acceptance_rate
    assert s.gpu_like is not None and s.gpu_like > 1 and "GPU-like" in s.verdict
    stats = s.as_stats()
    assert stats["verdict"] and stats["predicted_speedup"] <= Stats.from_events(lane).tau


def test_a_spread_that_covers_one_reads_within_noise():
    ar = [_round(i, 0, 0, 0.040 if i % 2 else 0.060, method="ar") for i in range(40)]
    lane = [_round(i, 1, 1 if i % 2 else 0, 0.070 if i % 3 else 0.090) for i in range(30)]
    s = speed.lane_speed("fixed:1", {"ar": ar, "fixed:1": lane})
    low, high = s.spread
    assert low <= s.measured <= high
    if low <= 1.0 <= high:
        assert s.within_noise and "within noise" in s.verdict


def test_a_busy_machine_is_named_when_measured_and_predicted_disagree():
    ar = [_round(i, 0, 0, 0.040, method="ar") for i in range(40)]
    lane = [_round(i, 2, 2, 0.044) for i in range(20)]
    lane = [SimpleNamespace(**{**r.__dict__, "draft_s": r.draft_s + 0.2}) for r in lane]  # something else ran
    lanes = {"ar": ar, "fixed:2": lane}
    profile = CostProfile(widths=(1, 3), target_ms=(40.0, 44.0), draft_ms=2.0, engine_ms=1.0)
    s = speed.lane_speed("fixed:2", lanes, profile)
    assert s.busy and "machine was busy" in s.verdict


def test_profile_from_events_prices_the_head_once():
    trace = {"blocks": [1, 2], "head_ms": 3.0}
    rounds = [
        SimpleNamespace(**{**_round(i, 4, 2, 0.05, engine_s=0.004).__dict__, "policy_trace": trace}) for i in range(5)
    ]
    p = profile_from_events({"ar": [_round(i, 0, 0, 0.04, method="ar") for i in range(5)], "pacer": rounds})
    assert p.head_ms == pytest.approx(1.5)
    assert p.engine_ms <= 4.0


def test_text_distance_names_the_place_and_share():
    assert speed.text_distance([1, 2, 3], [1, 2, 3], lossy=False) == "Same text as ar ✓."
    lossy = speed.text_distance([1, 9, 9, 4], [1, 2, 3, 4], lossy=True)
    assert "token 2" in lossy and "50%" in lossy and lossy.startswith("Lossy")
    assert "near-tie" in speed.text_distance([1, 2, 5], [1, 2, 3], lossy=False)


def test_a_lane_run_alone_is_anchored_by_a_step_timed_beside_it():
    lane = [_round(i, 2, 1, 0.050) for i in range(10)]  # no ar lane: /generate runs one method
    assert profile_from_events({"lane": lane}) is None
    p = profile_from_events({"lane": lane}, one_step_ms=40.0)
    assert p.step_ms == pytest.approx(41.0) and p.draft_ms == pytest.approx(2.0)  # the drafting is priced too
    assert p.events_speedup(lane) <= Stats.from_events(lane).tau


def test_a_tree_verdict_states_acceptance_and_break_even_over_the_same_nodes():
    """Issue 45, item 2: a tree round verifies every node but keeps one path; the verdict's α and its break-even
    are both over the nodes verified ("43% of drafts accepted" over the path beside a break-even over 31 nodes was
    two bases)."""
    ar = [_round(i, 0, 0, 0.040, method="ar") for i in range(40)]
    tree = {"tokens": list(range(30)), "depths": [1, 2, 3, 4]}
    lane = [SimpleNamespace(**{**_round(i, 2, 1, 0.070, method="tree").__dict__, "tree": tree}) for i in range(30)]
    s = speed.lane_speed("tree", {"ar": ar, "tree": lane})
    assert "3% of tree nodes kept" in s.verdict and "of drafts accepted" not in s.verdict  # 1 kept of 30 nodes
    cost, nodes, need = re.search(
        r"with ([\d.]+) tree nodes a round, ≥ \d+% kept \(\(([\d.]+) − 1\) / ([\d.]+)\)", s.verdict
    ).group(2, 3, 0)
    assert float(nodes) == 30.0 and f"≥ {(float(cost) - 1) / 30:.0%} kept" in need
