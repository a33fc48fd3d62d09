"""Which pre-verifier? PACER's heads beside the draft's own Π q, a perfect pre-verifier and the fixed windows.

PACER (arXiv 2602.01274) stops drafting when a trained pre-verifier M_B predicts that the block just drafted will
not be kept. How much that can gain depends on two things a student can see side by side here:

- **how well the predictor ranks**: AUC (0.5 a coin, 1 perfect) and calibration (ECE) of its â against what the
  target kept, on the shipped rounds (:mod:`spec_core.heads.metrics`);
- **what the stop rule makes of it on this machine**: every predictor drives the *same* rule
  (:func:`spec_core.policies.pacer.replay_length`, t tuned for it as ``t=auto`` does) over the same recorded rounds,
  priced by the one cost model (:meth:`spec_core.cost_model.CostProfile.replay`).

The rows: the shipped heads (the paper head that ``pacer`` runs, the hybrid that also reads log q); the draft's own
Π_{j≤i} q_j driving the same rule (what a confidence rule knows); a **perfect pre-verifier** whose â is the
verifier's outcome, so the rule stops right after the first token the target will reject (what a head that never
errs would do; it still drafts the first block of every round before it can judge it); the fixed windows; and the **oracle**, which drafts exactly what will be kept (zero when nothing will be).

The rounds are the asset ``assets/results/pacer-rounds-<draft>`` (:mod:`spec_core.policies.pacer_tuning`), drafted
with ``fixed:8`` on training prompts no head trained on. docs/PACER.md, "Which pre-verifier".
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
import torch

from spec_core.assets import HEADS_DIR
from spec_core.cost_model import CostProfile
from spec_core.heads.metrics import calibration, roc_auc
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_headroom import Headroom, headroom
from spec_core.policies.pacer_tuning import (
    RESULTS_DIR,
    TuningRounds,
    best_threshold,
    load_rounds,
    prediction_key,
    rounds_name,
    rule_lengths,
)

DRAFT_CUMPROB = "draft-cumprob"  # the rounds asset's key of the draft's own Π_{j≤i} q_j (block-independent)
FIXED_WINDOWS = (1, 2, 3, 4)


@dataclasses.dataclass(frozen=True)
class HeadRow:
    """One rule replayed on the rounds: what it reads, how well it ranks, and the speed it is predicted to reach."""

    name: str  # e.g. "paper head", "fixed:2"
    kind: str  # "head", "probability", "perfect", "fixed" or "oracle"
    method: str  # the method name that runs it live ("" when none does)
    inputs: str  # what it reads
    speedup: float  # predicted over ar on this cost profile
    drafted_per_round: float
    tokens_per_round: float
    threshold: float | None = None  # t tuned for it (PACER's rule only)
    auc: float | None = None  # ranking of â against the cumulative label, all positions
    auc_first: float | None = None  # the same at the first drafted token: the decision that matters most
    ece: float | None = None
    head: str = ""  # the head's asset name (kind "head")
    headroom: Headroom | None = None  # the share of a perfect pre-verifier's gain over the best fixed window it
    #   captures (:mod:`spec_core.policies.pacer_headroom`), its interval resampling the rounds


def token_labels(rounds: TuningRounds) -> tuple[torch.Tensor, torch.Tensor]:
    """(label [N], position [N]) per recorded drafted token: label_i = 1 iff token i and every one before it were
    kept (i ≤ accepted); positions from 1 within each round."""
    gamma, accepted = rounds.gamma.long(), rounds.accepted.long()
    start = torch.repeat_interleave(torch.cumsum(gamma, 0) - gamma, gamma)
    position = torch.arange(int(gamma.sum())) - start + 1
    return (position <= torch.repeat_interleave(accepted, gamma)), position


CALIBRATION_FILE = "calibration.json"  # `analyze calibration --json`: each shipped draft's Π q, calibrated or not


def load_calibration(directory: Path | None = None) -> dict | None:
    """The shipped calibration summary (:mod:`spec_core.analysis.calibration` writes it): the command, its date and
    commit, and per draft × temperature the ECE, mean Π q, share kept and verdict. None when missing or unreadable."""
    path = (directory or RESULTS_DIR) / CALIBRATION_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("cells") else None


EMBEDDED_TARGET_PARAMETERS = 134_515_008  # SmolLM2-135M-Instruct, the target the shipped rounds were recorded on


def head_share(name: str) -> float:
    """A shipped head's parameters over the embedded target's (its card's count): what one call costs on a model
    priced in steps, as a draft forward's share is (0 when the card is missing)."""
    try:
        card = json.loads((HEADS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0.0
    return float(card.get("parameters", 0)) / EMBEDDED_TARGET_PARAMETERS


def head_names(rounds: TuningRounds) -> dict[str, tuple[str, str, str]]:
    """Head file name → (row name, method, inputs) for each head the rounds were scored by."""
    out = {}
    for name in rounds.card.get("heads", {}):
        try:
            card = json.loads((HEADS_DIR / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        paper = card.get("config", {}).get("design") == "paper"
        row = "paper head" if paper else "hybrid head"
        method = "pacer" if paper else "pacer:head=hybrid"
        out[name] = (row, method, " + ".join(card.get("inputs", ())))
    return out


def _rule_row(
    rounds, predicted, labels, position, params, costs, head_ms=0.0, share=0.0, prices: dict | None = None, **row
) -> HeadRow:
    """PACER's rule on one predictor's â: t tuned on these rounds (as ``t=auto`` does), then AUC and ECE. A head
    call costs ``head_ms`` on a measured profile and ``share`` of a step on a model (:meth:`CostProfile.with_head`).
    The rule's per-round prices go into ``prices`` under the row's name, for :func:`compare`'s headroom."""
    per_round = list(torch.split(predicted.float(), rounds.gamma.tolist()))
    priced = costs.with_head(head_ms, share)
    t, best = best_threshold(per_round, rounds.gamma, rounds.accepted, params, priced)
    lengths, calls = rule_lengths(per_round, rounds.gamma, dataclasses.replace(params, threshold=t))
    if prices is not None:
        prices[row["name"]] = priced.round_prices(lengths, rounds.accepted.numpy(), calls)
    first = position == 1
    ece, _ = calibration(predicted.float().clamp(0, 1), labels)
    return HeadRow(
        speedup=best["speedup"],
        drafted_per_round=best["drafted_per_round"],
        tokens_per_round=best["tokens_per_round"],
        threshold=t,
        auc=roc_auc(predicted, labels),
        auc_first=roc_auc(predicted[first], labels[first]),
        ece=ece,
        **row,
    )


def compare(rounds: TuningRounds, costs: CostProfile, params: PacerParams | None = None) -> list[HeadRow]:
    """Every row of the comparison under ``costs`` at ``params``' b, ρ and max (t is tuned per predictor)."""
    params = params or PacerParams()
    labels, position = token_labels(rounds)
    rows = []
    prices: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    heads = sorted(head_names(rounds).items(), key=lambda item: item[1][1] != "pacer")  # `pacer`'s head first
    for name, (row, method, inputs) in heads:
        key = prediction_key(name, params.block)
        if key in rounds.predicted:
            head_ms = float(rounds.card.get("head_ms", {}).get(name, 0.0))
            rows.append(
                _rule_row(
                    rounds,
                    rounds.predicted[key],
                    labels,
                    position,
                    params,
                    costs,
                    head_ms,
                    head_share(name),
                    prices=prices,
                    name=row,
                    kind="head",
                    method=method,
                    inputs=inputs,
                    head=name,
                )
            )
    if DRAFT_CUMPROB in rounds.predicted:
        rows.append(
            _rule_row(
                rounds,
                rounds.predicted[DRAFT_CUMPROB],
                labels,
                position,
                params,
                costs,
                prices=prices,
                name="draft's own Π q",
                kind="probability",
                method="",
                inputs="draft probability: Π_{j≤i} q_j",
            )
        )
    rows.append(
        _rule_row(
            rounds,
            labels.float(),
            labels,
            position,
            params,
            costs,
            prices=prices,
            name="perfect pre-verifier",
            kind="perfect",
            method="",
            inputs="the verifier's outcome, block by block",
        )
    )
    gamma, accepted = rounds.gamma.numpy(), rounds.accepted.numpy()
    for k in FIXED_WINDOWS:
        r = costs.replay(np.minimum(gamma, k), accepted)
        prices[f"fixed:{k}"] = costs.round_prices(np.minimum(gamma, k), accepted)
        rows.append(
            HeadRow(
                f"fixed:{k}",
                "fixed",
                f"fixed:{k}",
                "nothing: always k",
                r["speedup"],
                r["drafted_per_round"],
                r["tokens_per_round"],
            )
        )
    found = headroom(prices, [f"fixed:{k}" for k in FIXED_WINDOWS], "perfect pre-verifier")  # resamples rounds
    rows = [dataclasses.replace(row, headroom=found.get(row.name)) for row in rows]
    r = costs.replay(accepted, accepted)
    rows.append(
        HeadRow(
            "oracle",
            "oracle",
            "",
            "the outcome before drafting",
            r["speedup"],
            r["drafted_per_round"],
            r["tokens_per_round"],
        )
    )
    return rows


@functools.lru_cache(maxsize=16)
def _cached(draft_design: str, costs_json: str, block: int, rho: float, max_len: int) -> tuple[HeadRow, ...]:
    rounds = load_rounds(draft_design)
    if rounds is None:
        return ()
    costs = CostProfile.from_dict(json.loads(costs_json))
    return tuple(compare(rounds, costs, PacerParams(block=block, rho=rho, max_len=max_len)))


def shipped_comparison(costs: CostProfile, params: PacerParams | None = None, draft_design: str = "feature"):
    """:func:`compare` on the shipped rounds (cached per cost profile and rule; () when the asset is missing)."""
    p = params or PacerParams()
    return _cached(draft_design, costs.to_json(), p.block, p.rho, p.max_len)


@functools.lru_cache(maxsize=4)
def rounds_card(draft_design: str = "feature") -> dict:
    """The shipped rounds asset's card ({} without one; read once per process: the view asks on every render)."""
    try:
        return json.loads((RESULTS_DIR / f"{rounds_name(draft_design)}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def recorded_rounds(draft_design: str = "feature") -> int:
    """How many rounds the shipped asset holds (0 without one)."""
    return int(rounds_card(draft_design).get("rounds", 0))


def recorded_heads(draft_design: str = "feature") -> set[str]:
    """The heads whose â the shipped rounds carry (a lane on another head has nothing to compare)."""
    return set(rounds_card(draft_design).get("heads", {}))


__all__ = [
    "DRAFT_CUMPROB",
    "HeadRow",
    "compare",
    "recorded_heads",
    "recorded_rounds",
    "rounds_card",
    "shipped_comparison",
    "token_labels",
]
