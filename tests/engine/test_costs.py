"""`python -m spec_core costs` on a tiny pair: every draft design is timed, fused-feature drafts included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import make_tiny_pair

from spec_core.analysis.costs import acceptance_needed, expected_tau, measure_costs, window_speedup
from spec_core.model.draft_networks import FeatureDraft


def test_costs_time_the_target_and_every_draft_design():
    pair = make_tiny_pair(draft="standalone")
    fused = FeatureDraft(pair.target, num_layers=1, init_from_target=False, feature_layers=(1,)).eval()
    plain = FeatureDraft(pair.target, num_layers=1, init_from_target=False).eval()
    df = measure_costs(pair, {"standalone": pair.draft, "feature": plain, "fused": fused}, repeats=2)
    assert list(df["what"])[-3:] == ["draft step (standalone)", "draft step (feature)", "draft step (fused)"]
    assert (df["ms"] > 0).all() and df["relative_to_target_1"].iloc[0] == 1.0


def _table(verify_ms: dict[int, float], draft_ms: float) -> pd.DataFrame:
    rows = [{"what": "target forward", "tokens": n, "ms": ms} for n, ms in verify_ms.items()]
    return pd.DataFrame(rows + [{"what": "draft step (d)", "tokens": 1, "ms": draft_ms}])


def test_expected_tau_is_the_geometric_sum():
    assert expected_tau(0.0, 6) == pytest.approx(1.0)
    assert expected_tau(0.5, 2) == pytest.approx(1.75)
    assert expected_tau(0.7, 6) == pytest.approx((1 - 0.7**7) / 0.3)


def test_acceptance_needed_inverts_the_speedup_model():
    costs = _table({1: 40.0, 2: 41.0, 4: 44.0, 8: 48.0, 16: 60.0}, draft_ms=4.0)
    need = acceptance_needed(costs, "d", speedup=1.5, tau=3.0, windows=(2, 4, 6))
    for k, alpha in zip((2, 4, 6), need["alpha_for_1.5x"]):
        assert window_speedup(alpha, k, costs, "d") == pytest.approx(1.5, abs=2e-3)
    assert expected_tau(need["alpha_for_tau_3"].iloc[2], 6) == pytest.approx(3.0, abs=2e-3)
    # free drafts and free verification: a window of 2 can reach 1.5x only if α > 0.37 or so
    free = acceptance_needed(_table({1: 1.0, 4: 1.0}, 0.0), "d", windows=(2,))
    assert 0.36 < free["alpha_for_1.5x"].iloc[0] < 0.37
    # the engine's work per round is paid by plain steps too (one cost model): it dilutes the price of
    # verifying, so it lowers the bar; past what α → 1 gives, the answer is NaN
    diluted = acceptance_needed(costs, "d", speedup=1.5, tau=3.0, windows=(2, 4, 6), overhead_ms=10.0)
    assert (diluted["alpha_for_1.5x"] < need["alpha_for_1.5x"]).all()
    assert np.isnan(acceptance_needed(costs, "d", speedup=10.0)["alpha_for_10x"]).all()


def test_predicted_ms_counts_a_tree_round_by_its_nodes_and_levels():
    from types import SimpleNamespace

    from spec_core.analysis.costs import predicted_ms, round_shape

    chain = SimpleNamespace(draft_len=3, tree={})
    plain = SimpleNamespace(draft_len=0, tree={})
    tree = SimpleNamespace(draft_len=2, tree={"tokens": list(range(12)), "depths": [1] * 4 + [2] * 4 + [3] * 4})
    shapes = [(s.width, s.draft_forwards) for s in map(round_shape, (chain, plain, tree))]
    assert shapes == [(4, 3), (1, 0), (13, 3)]
    costs = _table({1: 10.0, 4: 16.0, 16: 40.0}, 2.0)
    assert predicted_ms([chain, plain, tree], costs, "d") == pytest.approx(16 + 3 * 2 + 10 + 34 + 3 * 2)
