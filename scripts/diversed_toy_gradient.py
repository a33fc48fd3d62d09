"""Print the exact-enumeration numbers of docs/DIVERSED.md, "The policy gradient" (the toys of
tests/unit/test_diversed_gradient.py, whose enumerator this reuses): the true dE[R]/dw and the expectation of each
score the trainer offers (``--estimator decision`` / ``token``).

Usage: PYTHONPATH=. python scripts/diversed_toy_gradient.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_diversed_gradient import exact_and_estimated, head_toy, issue_toy, w_level_score  # noqa: E402

torch.set_num_threads(1)

w, rollouts, reward = issue_toy()
exact, dec = exact_and_estimated(rollouts, reward, w, w_level_score(w, "decision"))
_, tok = exact_and_estimated(rollouts, reward, w, w_level_score(w, "token"))
print(
    f"issue toy ({len(rollouts)} rollouts): dE[R]/dw_1 exact {exact[0]:+.6f}  decision {dec[0]:+.6f}  "
    f"token {tok[0]:+.6f}   (dw_2: exact {exact[1]:+.6f}, decision {dec[1]:+.6f}, token {tok[1]:+.6f})"
)
for seed in range(4):
    head, rollouts, reward, score = head_toy(seed)
    exact, dec = exact_and_estimated(rollouts, reward, head.linear.weight, score("decision"))
    _, tok = exact_and_estimated(rollouts, reward, head.linear.weight, score("token"))
    print(
        f"head toy seed {seed} ({len(rollouts)} rollouts): |exact| {exact.norm():.5f}  "
        f"max |decision − exact| {(dec - exact).abs().max():.1e}  "
        f"|token − exact| / |exact| {(tok - exact).norm() / exact.norm():.3f}"
    )
