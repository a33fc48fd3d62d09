"""How well a predictor of acceptance predicts it: ranking (AUC) and calibration (ECE).

PACER's pre-verifier (arXiv 2602.01274) outputs â_i, the chance that drafted token i and every one before it are
kept. Two questions tell a good one from a bad one, on rounds it never trained on: does it *rank* kept tokens above
rejected ones (the area under the ROC curve: 0.5 is a coin, 1 is perfect), and when it says 0.3, are 30% kept (the
expected calibration error: the mean gap between predicted and kept, bin by bin). ``train pacer``, ``analyze
preverifier`` and the app's head comparison (:mod:`spec_core.policies.pacer_heads`) all score with these.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann–Whitney U with average ranks for ties)."""
    labels = labels.bool()
    pos, neg = int(labels.sum()), int((~labels).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = scores.double().argsort()
    ranks = torch.empty_like(order, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    uniq, inverse = torch.unique(scores.double(), return_inverse=True)  # average the ranks of ties
    mean_rank = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inverse, ranks)
    mean_rank /= torch.bincount(inverse, minlength=len(uniq)).double()
    return float((mean_rank[inverse][labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def calibration(probs: torch.Tensor, labels: torch.Tensor, bins: int = 10) -> tuple[float, list[dict]]:
    """Expected calibration error and the reliability bins (mean predicted, share kept, count)."""
    idx = (probs.clamp(0, 1 - 1e-9) * bins).long()  # [N]
    rows, ece = [], 0.0
    for b in range(bins):
        sel = idx == b
        n = int(sel.sum())
        if n == 0:
            continue
        pred, kept = float(probs[sel].mean()), float(labels[sel].float().mean())
        ece += n / len(probs) * abs(pred - kept)
        rows.append(
            {
                "bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}",
                "predicted": round(pred, 4),
                "kept": round(kept, 4),
                "count": n,
            }
        )
    return ece, rows


CALIBRATED_ECE = 0.05  # an ECE at or under this is "calibrated" (the feature draft's Π q measured 0.016 held out)


def prefix_confidence(
    rounds: Sequence[tuple[Sequence[float], int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The draft's own confidence in each drafted token's prefix, against whether that prefix was kept.

    ``rounds``: per round, (q_1..q_γ: the draft's probability of each of its drafted tokens, accepted). Returns
    (Π_{j≤i} q_j [N], label [N]: 1 iff token i and every one before it were kept (i ≤ accepted), position [N]
    from 1): the predictor and the label PACER's pre-verifier is trained and scored on."""
    scores, labels, positions = [], [], []
    for probs, accepted in rounds:
        q = torch.tensor(list(probs), dtype=torch.float64)
        pos = torch.arange(1, len(q) + 1)
        scores.append(torch.cumprod(q, 0))
        labels.append(pos <= accepted)
        positions.append(pos)
    if not scores:
        return torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.bool), torch.zeros(0, dtype=torch.long)
    return torch.cat(scores), torch.cat(labels), torch.cat(positions)


def confidence_verdict(ece: float, gap: float) -> str:
    """ "calibrated" (ECE ≤ :data:`CALIBRATED_ECE`), else "overconfident" / "underconfident" by the sign of
    ``gap`` (mean predicted − share kept), or "mixed" when the bins err both ways (|gap| under half the ECE)."""
    if ece <= CALIBRATED_ECE:
        return "calibrated"
    if abs(gap) < ece / 2:
        return "mixed"
    return "overconfident" if gap > 0 else "underconfident"


def ece_noise(probs: torch.Tensor, bins: int = 10, draws: int = 200, seed: int = 0) -> float:
    """The ECE a *perfectly calibrated* predictor would show on these scores, from sampling alone: the mean ECE when
    each label is drawn kept with probability equal to its score (``draws`` times, a fixed seed). An ECE near it
    says nothing; few tokens in a bin make it large."""
    if len(probs) == 0:
        return float("nan")
    g = torch.Generator().manual_seed(seed)
    p = probs.double().clamp(0, 1)
    return (
        sum(calibration(p, torch.rand(len(p), generator=g, dtype=torch.float64) < p, bins)[0] for _ in range(draws))
        / draws
    )


def calibration_summary(
    scores: torch.Tensor, labels: torch.Tensor, positions: torch.Tensor | None = None, bins: int = 10
) -> dict:
    """ECE, mean predicted against share kept (``gap`` > 0: overconfident), its verdict, AUC (and AUC, ECE, mean
    predicted and share kept at the first drafted token when ``positions`` are given) and the reliability bins of a
    predictor of acceptance. The verdict reads every position, as PACER's head is scored."""
    probs = scores.double().clamp(0, 1)
    ece, rows = calibration(probs, labels, bins)
    predicted, kept = float(probs.mean()), float(labels.double().mean())
    out = {
        "tokens": len(probs),
        "ece": round(ece, 4),
        "ece_noise": round(ece_noise(probs, bins), 4),
        "mean_predicted": round(predicted, 4),
        "kept_rate": round(kept, 4),
        "gap": round(predicted - kept, 4),
        "verdict": confidence_verdict(ece, predicted - kept),
        "auc": round(roc_auc(probs, labels), 4),
    }
    if positions is not None:
        first = positions == 1
        out["auc_first"] = round(roc_auc(probs[first], labels[first]), 4)
        if first.any():  # the decision that matters most: keep drafting after the first token?
            ece_first, _ = calibration(probs[first], labels[first], bins)
            out["ece_first"] = round(ece_first, 4)
            out["ece_first_noise"] = round(ece_noise(probs[first], bins), 4)
            out["mean_predicted_first"] = round(float(probs[first].mean()), 4)
            out["kept_first"] = round(float(labels[first].double().mean()), 4)
    out["bins"] = rows
    return out
