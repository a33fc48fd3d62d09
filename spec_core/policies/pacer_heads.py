"""Which pre-verifier? PACER's heads beside the draft's own Π q, a perfect pre-verifier and the fixed windows.

PACER (arXiv 2602.01274) stops drafting when a trained pre-verifier M_B predicts that the block just drafted will
not be kept. How much that can gain depends on two things a student can see side by side here:

- **how well the predictor ranks**: AUC (0.5 a coin, 1 perfect) and calibration (ECE) of its â against what the
  target kept, on the shipped rounds (:mod:`spec_core.heads.metrics`);
- **what the stop rule makes of it on this machine**: every predictor drives the *same* rule
  (:func:`spec_core.policies.pacer.replay_length`, t tuned for it as ``t=auto`` does) over the same recorded rounds,
  priced by the one cost model (:meth:`spec_core.core.cost_model.CostProfile.replay`).

The rows: the shipped heads (the paper head that ``pacer`` runs, the hybrid that also reads log q); the draft's own
Π_{j≤i} q_j driving the same rule (what a confidence rule knows); a **perfect pre-verifier** whose â is the
verifier's outcome, so the rule stops right after the first token the target will reject (what a head that never
errs would do; it still drafts the first block of every round before it can judge it); the fixed windows; and the **oracle**, which drafts exactly what will be kept (zero when nothing will be).

The rounds are the asset ``assets/results/pacer-rounds-<draft>`` (:mod:`spec_core.policies.pacer_tuning`), drafted
with ``fixed:8`` on training prompts no head trained on. docs/PACER.md, "Which pre-verifier".

What each rule drafts in each round, at every t of the grid, depends on no price (:func:`replays`): a process
computes it once per rule (:func:`shipped_replays`, a few seconds on one core), and a Live run's own costs only
price it (:func:`price`: every t at once, the spreads and the headroom), so the view costs a run a fraction of a
second.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from spec_core.core.assets import HEADS_DIR
from spec_core.core.cost_model import CostProfile, rounds_spread
from spec_core.core.quotes import Quote
from spec_core.heads.metrics import calibration, roc_auc
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_headroom import Headroom, headroom
from spec_core.policies.pacer_tuning import (
    RESULTS_DIR,
    THRESHOLDS,
    TuningRounds,
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
    spread: tuple[float, float] | None = None  # 10th–90th percentile of ``speedup`` over resampled rounds (t held)

    def quote(self, costs: CostProfile, rounds: int) -> Quote:
        """This row's speedup as the comparison quotes it beside the Live lane's (:mod:`spec_core.core.quotes`): the
        ``rounds`` recorded rounds of training prompts, priced by ``costs``."""
        low, high = self.spread if self.spread is not None else (self.speedup, self.speedup)
        return Quote(
            view="the PACER comparison",
            method=self.method or self.name,
            value=self.speedup,
            low=low,
            high=high,
            source=costs.source,
            measured=False,
            tau=self.tokens_per_round,
            about=f"the comparison's {rounds:,} recorded rounds (training prompts, not this run's)",
            text="the training prompts of the shipped rounds",
            step_ms=costs.step_ms if costs.unit == "ms" else None,
        )


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


@dataclasses.dataclass(frozen=True, eq=False)
class Replay:
    """One row's recorded rounds re-decided by its rule, before any price: for each t on the grid (one entry for a
    rule without t), the draft length and pre-verifier calls of every round. Nothing here depends on the costs, so
    a process computes it once per rounds asset and rule (:func:`shipped_replays`) and each Live run only prices
    it (:func:`price`)."""

    row: HeadRow  # what the rule reads and how its â ranks (AUC, ECE); its speed is filled in by :func:`price`
    lengths: np.ndarray  # [T, R] draft length of each recorded round at each t (T = 1 without t)
    tokens: np.ndarray  # [T] tokens the R rounds add at each t: Σ min(accepted, length) + 1 (no price in it)
    calls: np.ndarray | None = None  # [T, R] pre-verifier calls (None: the rule calls none)
    thresholds: tuple[float, ...] = ()  # the t of each entry (PACER's rule), () without
    head_ms: float = 0.0  # one head call on a measured profile, and its share of a step on a model
    share: float = 0.0


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # shared by every run's pricing through the cache
    return array


def _replay(lengths: np.ndarray, accepted: np.ndarray, row: HeadRow, **rule) -> Replay:
    tokens = (np.minimum(accepted, lengths) + 1).sum(axis=1)
    return Replay(row, _frozen(lengths), _frozen(tokens), **rule)


def _unpriced(**row) -> HeadRow:
    return HeadRow(speedup=float("nan"), drafted_per_round=float("nan"), tokens_per_round=float("nan"), **row)


def _rule_replay(rounds, predicted, labels, position, params, head_ms=0.0, share=0.0, **row) -> Replay:
    """PACER's rule on one predictor's â at every t of the grid (:data:`THRESHOLDS`, the ``t=auto`` grid), and the
    predictor's AUC and ECE. A head call costs ``head_ms`` on a measured profile and ``share`` of a step on a model
    (:meth:`CostProfile.with_head`), applied when priced."""
    per_round = list(torch.split(predicted.float(), rounds.gamma.tolist()))
    decided = [rule_lengths(per_round, rounds.gamma, dataclasses.replace(params, threshold=t)) for t in THRESHOLDS]
    first = position == 1
    ece, _ = calibration(predicted.float().clamp(0, 1), labels)
    return _replay(
        np.stack([lengths for lengths, _ in decided]),
        rounds.accepted.numpy(),
        _unpriced(auc=roc_auc(predicted, labels), auc_first=roc_auc(predicted[first], labels[first]), ece=ece, **row),
        calls=_frozen(np.stack([calls for _, calls in decided])),
        thresholds=THRESHOLDS,
        head_ms=head_ms,
        share=share,
    )


def replays(rounds: TuningRounds, params: PacerParams | None = None) -> tuple[Replay, ...]:
    """Every row of the comparison at ``params``' b, ρ and max, re-decided but not priced (:func:`price`)."""
    params = params or PacerParams()
    labels, position = token_labels(rounds)
    out = []
    heads = sorted(head_names(rounds).items(), key=lambda item: item[1][1] != "pacer")  # `pacer`'s head first
    for name, (row, method, inputs) in heads:
        key = prediction_key(name, params.block)
        if key in rounds.predicted:
            head_ms = float(rounds.card.get("head_ms", {}).get(name, 0.0))
            out.append(
                _rule_replay(
                    rounds,
                    rounds.predicted[key],
                    labels,
                    position,
                    params,
                    head_ms,
                    head_share(name),
                    name=row,
                    kind="head",
                    method=method,
                    inputs=inputs,
                    head=name,
                )
            )
    if DRAFT_CUMPROB in rounds.predicted:
        out.append(
            _rule_replay(
                rounds,
                rounds.predicted[DRAFT_CUMPROB],
                labels,
                position,
                params,
                name="draft's own Π q",
                kind="probability",
                method="",
                inputs="draft probability: Π_{j≤i} q_j",
            )
        )
    out.append(
        _rule_replay(
            rounds,
            labels.float(),
            labels,
            position,
            params,
            name="perfect pre-verifier",
            kind="perfect",
            method="",
            inputs="the verifier's outcome, block by block",
        )
    )
    gamma, accepted = rounds.gamma.numpy(), rounds.accepted.numpy()
    for k in FIXED_WINDOWS:
        fixed = _unpriced(name=f"fixed:{k}", kind="fixed", method=f"fixed:{k}", inputs="nothing: always k")
        out.append(_replay(np.minimum(gamma, k)[None], accepted, fixed))
    oracle = _unpriced(name="oracle", kind="oracle", method="", inputs="the outcome before drafting")
    out.append(_replay(accepted.astype(np.int64)[None], accepted, oracle))
    return tuple(out)


def price(replayed: Sequence[Replay], accepted: np.ndarray, costs: CostProfile) -> list[HeadRow]:
    """The rows of :func:`replays` under ``costs``: each rule's t the fastest of the grid (on a tie the higher, as
    :func:`spec_core.policies.pacer_tuning.best_threshold` picks), its speedup over ``ar`` by
    :meth:`CostProfile.replay`, its 10–90% spread over the rounds and, but for the oracle, its share of a perfect
    pre-verifier's headroom. Every t is priced at once: one array over the grid and the rounds."""
    rows, prices = [], {}
    for r in replayed:
        priced = costs.with_head(r.head_ms, r.share) if r.thresholds else costs
        best = 0
        if r.thresholds:  # Σ tokens · step / Σ ms at each t, as CostProfile.replay sums one t's rounds
            ms = np.asarray(priced.round_ms(r.lengths + 1, r.lengths, r.calls), dtype=float).sum(axis=1)
            speed = r.tokens * priced.step_ms / ms
            best = max(range(len(r.thresholds)), key=lambda i: (speed[i], r.thresholds[i]))
        calls = r.calls[best] if r.calls is not None else 0
        found = priced.replay(r.lengths[best], accepted, calls)
        prices[r.row.name] = priced.round_prices(r.lengths[best], accepted, calls)
        rows.append(
            dataclasses.replace(
                r.row,
                speedup=found["speedup"],
                drafted_per_round=found["drafted_per_round"],
                tokens_per_round=found["tokens_per_round"],
                threshold=r.thresholds[best] if r.thresholds else None,
            )
        )
    rules = {name: p for name, p in prices.items() if name != "oracle"}  # the oracle takes no share of headroom
    shares = headroom(rules, [f"fixed:{k}" for k in FIXED_WINDOWS], "perfect pre-verifier")  # resamples rounds
    return [
        dataclasses.replace(row, headroom=shares.get(row.name), spread=rounds_spread(*prices[row.name], costs.step_ms))
        for row in rows
    ]


def compare(rounds: TuningRounds, costs: CostProfile, params: PacerParams | None = None) -> list[HeadRow]:
    """Every row of the comparison under ``costs`` at ``params``' b, ρ and max (t is tuned per predictor)."""
    return price(replays(rounds, params), rounds.accepted.numpy(), costs)


@functools.lru_cache(maxsize=8)
def shipped_replays(draft_design: str, block: int, rho: float, max_len: int) -> tuple[np.ndarray, tuple[Replay, ...]]:
    """(accepted [R], :func:`replays`) of the shipped rounds at b, ρ and max: the part of the comparison no price
    enters, computed once per process (a few seconds on one core); (empty, ()) when the asset is missing."""
    rounds = load_rounds(draft_design)
    if rounds is None:
        return np.zeros(0, dtype=np.int64), ()
    return _frozen(rounds.accepted.numpy()), replays(rounds, PacerParams(block=block, rho=rho, max_len=max_len))


@functools.lru_cache(maxsize=16)
def _cached(draft_design: str, costs_json: str, block: int, rho: float, max_len: int) -> tuple[HeadRow, ...]:
    accepted, replayed = shipped_replays(draft_design, block, rho, max_len)
    if not replayed:
        return ()
    return tuple(price(replayed, accepted, CostProfile.from_dict(json.loads(costs_json))))


def shipped_comparison(costs: CostProfile, params: PacerParams | None = None, draft_design: str = "feature"):
    """:func:`compare` on the shipped rounds (() when the asset is missing): the replays once per rule
    (:func:`shipped_replays`), their prices once per cost profile."""
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
    "Replay",
    "compare",
    "price",
    "recorded_heads",
    "recorded_rounds",
    "replays",
    "rounds_card",
    "shipped_comparison",
    "shipped_replays",
    "token_labels",
]
