"""How much of a perfect pre-verifier's headroom a predictor captures, with a bootstrap interval.

PACER (arXiv 2602.01274) stops drafting when a learned pre-verifier's score falls under a threshold. On a draft
whose kept length varies little, even a *perfect* pre-verifier (â = the verifier's outcome) beats the best fixed
window by only a few per cent, so "≥ 1.05× the best window" can be out of any head's reach (docs/PACER.md). The
fair question is the share of that headroom a predictor captures:

    H = (S − S_best_fixed) / (S_perfect − S_best_fixed)

with S the speedup over ``ar`` that the one cost model predicts for the rule on the same recorded rounds
(:meth:`spec_core.core.cost_model.CostProfile.round_prices`). H = 1 is the perfect pre-verifier, 0 the best fixed
window, < 0 worse than it. The interval resamples groups of rounds with replacement (prompts when the rounds
carry them, else rounds) and recomputes every S, the best fixed window included, on each resample.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_SAMPLES = 1000
LEVEL = 0.90  # the interval's coverage


@dataclass(frozen=True)
class Headroom:
    value: float  # H on all the rounds (NaN when the perfect rule does not beat the best fixed window)
    low: float  # the interval's ends
    high: float
    groups: int  # prompts (or rounds) resampled
    level: float = LEVEL

    def text(self) -> str:
        if not np.isfinite(self.value):
            return "no headroom to capture (a perfect pre-verifier does not beat the best fixed window)"
        return (
            f"H = {self.value:.2f} ({self.level:.0%} interval {self.low:.2f} … {self.high:.2f}, {self.groups} groups)"
        )


@functools.lru_cache(maxsize=4)
def resample_weights(n_groups: int, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> np.ndarray:
    """[1 + samples, n_groups]: row 0 takes every group once, each further row how often one bootstrap resample
    draws each group. No price enters it, so a process draws it once per shape (every Live run's comparison
    resamples the same recorded rounds)."""
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(rng.integers(0, n_groups, n_groups), minlength=n_groups) for _ in range(samples)])
    weights = np.vstack([np.ones((1, n_groups)), counts])
    weights.setflags(write=False)
    return weights


def headroom(
    priced: Mapping[str, tuple[np.ndarray, np.ndarray]],
    fixed: Sequence[str],
    perfect: str,
    groups: np.ndarray | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> dict[str, Headroom]:
    """H of every row of ``priced`` (name → (tokens [R], ms [R]) per round, from ``round_prices``) against the
    best of the ``fixed`` rows and the ``perfect`` row, all on the same R rounds; ``groups`` [R] (e.g. the prompt
    of each round; None: each round its own group) is what the bootstrap resamples."""
    names = list(priced)
    rounds = len(next(iter(priced.values()))[0])
    ids = np.arange(rounds) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    n_groups = int(ids.max()) + 1 if rounds else 0
    tokens = np.stack([np.bincount(ids, weights=priced[k][0], minlength=n_groups) for k in names])  # [rows, G]
    ms = np.stack([np.bincount(ids, weights=priced[k][1], minlength=n_groups) for k in names])
    weights = resample_weights(n_groups, samples, seed)
    speed = (weights @ tokens.T) / (weights @ ms.T)  # [1 + samples, rows]; ∝ speedup (one step's ms cancels in H)
    col = {k: i for i, k in enumerate(names)}
    best_fixed = speed[:, [col[k] for k in fixed]].max(axis=1)
    gap = speed[:, col[perfect]] - best_fixed
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(gap[:, None] > 0, (speed - best_fixed[:, None]) / gap[:, None], np.nan)
    tail = (1 - LEVEL) / 2
    out = {}
    for k in names:
        boot = h[1:, col[k]]
        boot = boot[np.isfinite(boot)]
        low, high = np.quantile(boot, [tail, 1 - tail]) if len(boot) else (np.nan, np.nan)
        out[k] = Headroom(float(h[0, col[k]]), float(low), float(high), n_groups)
    return out
