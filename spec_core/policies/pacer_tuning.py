"""PACER's threshold tuned to this machine's costs: what ``pacer`` (``t=auto``) drafts with.

PACER (arXiv 2602.01274) stops drafting when a block's mean predicted acceptance falls under a threshold t that
grows by ρ after each block. Which t is best depends on what a drafted token costs against what an accepted one
saves, and that is the machine's arithmetic: where a pass over 4 tokens costs 1.1 plain steps (bf16 on a CPU
with bf16 units) drafting on is cheap and a low t wins; where it costs 2.2 steps (bf16 without them) a high t
does. So ``pacer`` replays its own stop rule on rounds recorded once with the shipped pre-verifier (the
asset ``assets/results/pacer-rounds-<draft>``: each round's drafted tokens' â and how many the target kept,
on training prompts, never the benchmark's) under this machine's cost table for the pair's precision
(``spec_core.core.precision``; never measured here, a build must not wait) and keeps the t predicted fastest.
When either is missing — no table yet, another draft, a head retrained since the rounds were recorded — it
keeps the t the head shipped with (:data:`SHIPPED_THRESHOLD`) and says why.

The asset is written by :mod:`spec_core.analysis.pacer_rounds` (``python -m spec_core.analysis.pacer_rounds
runs/pacer_tune/feature``, shards from ``python -m spec_core train pacer --simulate-only``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from safetensors.torch import load_file

from spec_core.core.assets import ASSETS_DIR, HEADS_DIR, file_sha256
from spec_core.core.cost_model import CostProfile
from spec_core.policies.pacer_rule import PacerParams, replay_length

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

RESULTS_DIR = ASSETS_DIR / "results"
SHIPPED_THRESHOLD = PacerParams.threshold  # t when nothing can be tuned (chosen on int8 costs, docs/PACER.md)
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 … 0.95
TUNED_KEY = "pacer-threshold"  # pair.learned kind of a tuned t


def rounds_name(draft_design: str) -> str:
    return f"pacer-rounds-{draft_design}"


def prediction_key(head_name: str, block: int) -> str:
    """The rounds asset's key of one head's â at one block size (a paper head's scores depend on b)."""
    return f"{head_name}@b{block}"


@dataclass(frozen=True)
class TuningRounds:
    """Recorded rounds: R rounds drafted with a long window, N drafted tokens laid end to end."""

    gamma: torch.Tensor  # [R] tokens drafted
    accepted: torch.Tensor  # [R] tokens the target kept
    predicted: dict[str, torch.Tensor]  # prediction_key → [N] â
    card: dict

    def per_round(self, key: str) -> list[torch.Tensor]:
        return list(torch.split(self.predicted[key].float(), self.gamma.tolist()))


def load_rounds(draft_design: str, directory: Path = RESULTS_DIR) -> TuningRounds | None:
    """The shipped rounds for a draft design, or None."""

    path = directory / f"{rounds_name(draft_design)}.safetensors"
    card_path = path.with_suffix(".json")
    if not path.exists() or not card_path.exists():
        return None
    tensors = load_file(str(path))
    predicted = {k.removeprefix("predicted/"): v for k, v in tensors.items() if k.startswith("predicted/")}
    card = json.loads(card_path.read_text(encoding="utf-8"))
    return TuningRounds(tensors["gamma"].long(), tensors["accepted"].long(), predicted, card)


def replay_rule(per_round, gamma, accepted, params: PacerParams, costs: CostProfile) -> dict[str, float]:
    """PACER's stop rule on recorded rounds (each round's â per drafted token, how many were drafted and kept),
    priced by the one cost model (:meth:`CostProfile.replay`): speedup over ``ar``, drafts and tokens per round."""
    lengths, calls = rule_lengths(per_round, gamma, params)
    return costs.replay(lengths, np.asarray(accepted), calls)


def rule_lengths(per_round, gamma, params: PacerParams) -> tuple[np.ndarray, np.ndarray]:
    """(draft length [R], pre-verifier calls [R]) PACER's stop rule picks in each recorded round from its â."""
    lengths = np.array([replay_length(p, params, budget=int(g)) for p, g in zip(per_round, gamma)], dtype=np.int64)
    return lengths, (lengths + params.block - 1) // params.block


def replayed_speedup(rounds: TuningRounds, key: str, params: PacerParams, costs: CostProfile) -> float:
    """The cost model's speedup over ``ar`` of PACER's stop rule on the recorded rounds (one ``ar`` step per token
    against the rounds' drafting, verification and pre-verifier calls)."""
    return replay_rule(rounds.per_round(key), rounds.gamma, rounds.accepted, params, costs)["speedup"]


def best_threshold(per_round, gamma, accepted, params: PacerParams, costs: CostProfile) -> tuple[float, dict]:
    """(t, :func:`replay_rule`'s result at t): the grid's fastest threshold for ``params``' b, ρ and max under
    ``costs`` (on a tie, the higher t). What ``t=auto`` picks, and the t of each row of the head comparison."""
    scored = [
        (replay_rule(per_round, gamma, accepted, dataclasses.replace(params, threshold=t), costs), t)
        for t in THRESHOLDS
    ]
    best, t = max(scored, key=lambda s: (s[0]["speedup"], s[1]))
    return t, best


def tune(rounds: TuningRounds, key: str, params: PacerParams, costs: CostProfile) -> tuple[float, float]:
    """(t, predicted speedup): the grid's fastest threshold for ``params``' b, ρ and max under ``costs``."""
    t, best = best_threshold(rounds.per_round(key), rounds.gamma, rounds.accepted, params, costs)
    return t, best["speedup"]


def machine_threshold(
    pair: ModelPair, params: PacerParams, head_name: str, profile: CostProfile | None
) -> tuple[float, str]:
    """(t, why) for ``pacer`` with ``t=auto`` on ``pair``: tuned under the run's cost profile (data handed to the
    run, spec_core/core/cost_tables.py) when it can be, else :data:`SHIPPED_THRESHOLD` and the reason. Cached on the
    pair per head, b, ρ, max, precision and profile."""

    def compute() -> tuple[float, str]:
        rounds = load_rounds(getattr(pair, "draft_design", "") or "feature")
        key = prediction_key(head_name, params.block)
        shipped = f"t = {SHIPPED_THRESHOLD:g}, the shipped value"
        if rounds is None or key not in rounds.predicted:
            return SHIPPED_THRESHOLD, f"{shipped}: no recorded rounds for head {head_name!r} at b = {params.block}"
        if rounds.card.get("draft_sha256") != (pair.draft_card or {}).get("sha256"):
            return SHIPPED_THRESHOLD, f"{shipped}: the recorded rounds were drafted by another draft"
        head_file = HEADS_DIR / f"{head_name}.safetensors"
        if not head_file.exists() or rounds.card.get("heads", {}).get(head_name) != file_sha256(head_file):
            return SHIPPED_THRESHOLD, f"{shipped}: head {head_name!r} changed since the rounds were scored"
        if profile is None:
            return SHIPPED_THRESHOLD, f"{shipped}: the run was given no cost profile"
        head_ms = float(rounds.card.get("head_ms", {}).get(head_name, 0.0))
        t, speed = tune(rounds, key, params, dataclasses.replace(profile, head_ms=head_ms))
        return t, (
            f"t = {t:g}, tuned to the costs of {profile.name}: the fastest of t = 0.05 … 0.95 when PACER's rule is replayed on "
            f"{len(rounds.gamma):,} recorded rounds under {profile.name} "
            f"(predicted {speed:.2f}× ar)"
        )

    priced = profile.to_json() if profile is not None else "none"
    name = (
        f"{head_name}|b{params.block}|rho{params.rho:g}|max{params.max_len}|{getattr(pair, 'precision', '')}|{priced}"
    )
    return pair.learned(TUNED_KEY, name, compute)
