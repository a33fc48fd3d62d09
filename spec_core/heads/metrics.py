"""How well a predictor of acceptance predicts it: ranking (AUC) and calibration (ECE).

PACER's pre-verifier (arXiv 2602.01274) outputs â_i, the chance that drafted token i and every one before it are
kept. Two questions tell a good one from a bad one, on rounds it never trained on: does it *rank* kept tokens above
rejected ones (the area under the ROC curve: 0.5 is a coin, 1 is perfect), and when it says 0.3, are 30% kept (the
expected calibration error: the mean gap between predicted and kept, bin by bin). ``train pacer``, ``analyze
preverifier`` and the app's head comparison (:mod:`spec_core.policies.pacer_heads`) all score with these.
"""

from __future__ import annotations

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
