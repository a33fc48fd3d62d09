"""`python -m spec_core costs` on a tiny pair: every draft design is timed, fused-feature drafts included."""

from __future__ import annotations

from conftest import make_tiny_pair

from spec_core.costs import measure_costs
from spec_core.draft_models import FeatureDraft


def test_costs_time_the_target_and_every_draft_design():
    pair = make_tiny_pair(draft="standalone")
    fused = FeatureDraft(pair.target, num_layers=1, init_from_target=False, feature_layers=(1,)).eval()
    plain = FeatureDraft(pair.target, num_layers=1, init_from_target=False).eval()
    df = measure_costs(pair, {"standalone": pair.draft, "feature": plain, "fused": fused}, repeats=2)
    assert list(df["what"])[-3:] == ["draft step (standalone)", "draft step (feature)", "draft step (fused)"]
    assert (df["ms"] > 0).all() and df["relative_to_target_1"].iloc[0] == 1.0
