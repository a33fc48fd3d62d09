"""How the feature draft's alignment grows with its training data, and what reaching a target would take.

Usage: ``PYTHONPATH=. .venv/bin/python scripts/draft_scaling.py --tok-per-s 160 CARD.json [CARD.json ...]``
with the cards of drafts trained by the same recipe on growing ``--train-fraction`` of the same data (the held-out
shards stay the same, so their held-out agreement is comparable). It prints, per card, the training answer tokens
and the shipped held-out greedy agreement (1st drafted token, and the 2nd / 3rd on the draft's own features), then
fits agreement = a + b · log2(tokens) by least squares (``numpy.polyfit``) and extrapolates the answer tokens, and
the hours of target generation at ``--tok-per-s``, at which the 1st-token agreement would reach each ``--alpha``.
A log-linear fit on a few points is a rough guide, not a law: it says how far off a target is, not exactly where.

A warm-started draft (``train draft --init``, whose card has an ``init``) counts the answer tokens its start saw as
well as its own. With ``--with-start``, the start itself is a row too: its score on the same held-out shards, step 0
of the run, read from the card's history (drafts started from one draft share that row once).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def _row(name: str, fraction: float, tokens: int, held: dict) -> dict:
    return {
        "draft": name,
        "fraction": fraction,
        "train_answer_tokens": tokens,
        "agree_1st": held["heldout_agree0"],
        "agree_2nd": held.get("heldout_agree1", float("nan")),
        "agree_3rd": held.get("heldout_agree2", float("nan")),
        "best_step": held["step"],
    }


def scaling_table(cards: list[dict], with_start: bool = False) -> pd.DataFrame:
    """A row per card (answer tokens seen, held-out agreement at its best step), by tokens; with ``with_start``,
    a warm start's step-0 score as a row of its own (the tokens its start saw)."""
    rows, starts = [], {}
    for card in cards:
        init = card.get("init") or {}
        prior = int(init.get("train_answer_tokens") or 0)
        fraction = float(card["training"].get("train_fraction", 1.0))
        rows.append(_row(card["name"], fraction, prior + card["data"]["train_answer_tokens"], card["heldout"]))
        first = (card.get("history") or [{}])[0]
        if with_start and init and first.get("step") == 0:
            starts.setdefault(
                init.get("sha256") or init.get("from"), _row(f"start ({init['from']})", 1.0, prior, first)
            )
    return pd.DataFrame(rows + list(starts.values())).sort_values("train_answer_tokens").reset_index(drop=True)


def extrapolate(table: pd.DataFrame, alphas: list[float], tok_per_s: float) -> tuple[float, float, pd.DataFrame]:
    """(a, b, rows): the fit agree_1st = a + b·log2(tokens) and, per α, the tokens and generation hours it implies."""
    b, a = np.polyfit(np.log2(table["train_answer_tokens"]), table["agree_1st"], 1)
    have = float(table["train_answer_tokens"].max())
    rows = []
    for alpha in alphas:
        tokens = 2 ** ((alpha - a) / b) if b > 0 else float("inf")
        rows.append(
            {
                "alpha": alpha,
                "answer_tokens": tokens,
                "times_the_data": tokens / have,
                "generation_hours": tokens / tok_per_s / 3600,
            }
        )
    return float(a), float(b), pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cards", nargs="+", type=Path, help="JSON cards of drafts trained on growing data fractions")
    ap.add_argument("--alpha", default="0.55,0.6,0.69", help="first-token agreements to extrapolate to")
    ap.add_argument("--tok-per-s", type=float, required=True, help="the target's batched generation rate here")
    ap.add_argument("--with-start", action="store_true", help="a warm start's step-0 score as a row of its own")
    a = ap.parse_args(argv)
    try:
        table = scaling_table([json.loads(p.read_text()) for p in a.cards], a.with_start)
    except (OSError, ValueError, KeyError, TypeError) as err:  # not a draft card: say so, no traceback
        print(f"error: {', '.join(map(str, a.cards))}: not draft cards written by train draft ({err!r})")
        return 2
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    if len(table) < 2:
        return 0
    intercept, slope, rows = extrapolate(table, [float(x) for x in a.alpha.split(",")], a.tok_per_s)
    print(f"\nfit: agree_1st = {intercept:.4f} + {slope:.4f} * log2(answer tokens)  (+{slope:.4f} per doubling)")
    print(
        rows.to_string(
            index=False,
            formatters={"alpha": "{:.2f}".format}
            | {c: "{:,.1f}".format for c in ("answer_tokens", "times_the_data", "generation_hours")},
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
