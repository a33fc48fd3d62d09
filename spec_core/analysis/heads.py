"""``python -m spec_core analyze heads``: the app's "which pre-verifier?" comparison, printed from shipped assets.

The rows of :func:`spec_core.policies.pacer_heads.compare` on the shipped rounds (``assets/results/pacer-rounds-*``):
PACER's rule driven by each shipped head and by the draft's own Π q (t tuned for each), a perfect pre-verifier,
``fixed:1`` … ``fixed:4`` and the oracle, each with its predicted speedup over ``ar`` and H, the share of a perfect
pre-verifier's gain over the best fixed window it captures (:mod:`spec_core.policies.pacer_headroom`, a 90%
bootstrap interval over the rounds). Priced under a shipped cost table (``--costs FILE --precision P``, e.g.
``assets/results/costs/xeon-amx-1thread.json``) or the accelerator model (``--costs accelerator``), so a docs
table made by it is reproduced from a clone (``tests/unit/test_docs_numbers.py`` does).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import DEFAULT_DRAFT_RATIO
from spec_core.core.precision import read_table as table_file
from spec_core.policies.pacer_heads import HeadRow, shipped_comparison

ACCELERATOR = "accelerator"


def read_table(path: Path, precision: str) -> CostProfile:
    """One precision's profile from a cost table file (:func:`spec_core.core.precision.read_table`)."""
    profiles = table_file(path)
    if precision not in profiles:
        raise SpecScopeError(f"{path} has no {precision!r} profile (it has: {', '.join(sorted(profiles)) or 'none'})")
    return profiles[precision]


def costs_of(costs: str, precision: str) -> CostProfile:
    return accelerator_profile(DEFAULT_DRAFT_RATIO) if costs == ACCELERATOR else read_table(Path(costs), precision)


def rows_table(rows: list[HeadRow]) -> list[dict]:
    """The printed columns of each row (3 decimals: what the docs quote)."""
    out = []
    for r in rows:
        h = r.headroom
        out.append(
            {
                "rule": r.name,
                "speedup": f"{r.speedup:.3f}",
                "headroom": "" if h is None else f"{h.value:.2f}",
                "interval": "" if h is None else f"{h.low:.2f} … {h.high:.2f}",
                "t": "" if r.threshold is None or r.kind == "perfect" else f"{r.threshold:g}",
                "auc_first": "" if r.auc_first is None else f"{r.auc_first:.3f}",
                "drafted_per_round": f"{r.drafted_per_round:.2f}",
            }
        )
    return out


def markdown(table: list[dict]) -> str:
    header = list(table[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[k] for k in header) + " |" for row in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze heads", description=__doc__.splitlines()[0])
    ap.add_argument("--costs", default=ACCELERATOR, help="a cost table JSON (shipped or cached), or 'accelerator'")
    ap.add_argument("--precision", default="int8", help="the table's profile to price with (not for 'accelerator')")
    ap.add_argument("--draft", default="feature", help="the shipped rounds of this draft design")
    a = ap.parse_args(argv)
    try:
        rows = list(shipped_comparison(costs_of(a.costs, a.precision), draft_design=a.draft))
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    if not rows:
        print(f"error: no shipped rounds for the {a.draft!r} draft (assets/results/pacer-rounds-{a.draft})")
        return 2
    print(markdown(rows_table(rows)))
    return 0
