"""Each lane's own rounds priced by a cost table: speedups over ``ar`` that no clock enters.

Usage: ``PYTHONPATH=. .venv/bin/python scripts/priced_rounds.py --methods ar,fixed:1,fixed:2,pacer [--table FILE]``

Runs the embedded pair at int8 over ``prompts/specscope.jsonl`` (or ``--prompts``; 64 new tokens, greedy), one
generation per method and prompt, and prices every round the engine ran with one cost profile
(:meth:`CostProfile.round_ms`: a pass over the round's drafted tokens and the pending one, its draft forwards, and
``--head-ms`` per pre-verifier call a PACER round made). The rounds are the engine's (greedy: the same on any
machine), and so are the prices (the table's), so two runs print the same numbers whatever else the machine is
doing: a way to compare lanes whose measured speeds differ by less than a bench's noise. Per method it prints the
median over prompts of ``ar``'s priced time over the lane's, and the ratio of the totals. The prefill is left out
of both, and so is a hybrid's catch-up pass (its network's first read of the text): only rounds are priced.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np
import torch

from spec_core.core.cost_model import round_shape
from spec_core.core.cost_tables import given_table, run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import MAX_NEW_TOKENS_LIMIT, Generation
from spec_core.engine.methods import parse_method, split_methods
from spec_core.model.models import load_pair
from spec_core.serve.prompts import load_prompts

PAPER_HEAD_MS = 0.29  # the paper head's call in the engine, int8, one thread (docs/LOG.md, seventh session)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", required=True, help="comma-separated method names; the first is the baseline")
    ap.add_argument("--prompts", default="prompts/specscope.jsonl")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--table", help="a cost table JSON (default: the one a run on this machine is priced with)")
    ap.add_argument("--head-ms", type=float, default=PAPER_HEAD_MS, help="the price of one pre-verifier call")
    a = ap.parse_args(argv)
    try:
        return _priced(a)
    except SpecScopeError as err:  # a missing or wrong file, a method name, a length: one line, before any model
        print(f"error: {err}", file=sys.stderr)
        return 2


def _priced(a: argparse.Namespace) -> int:
    given = given_table(a.table, "--table").profiles["int8"] if a.table else None
    prompts = [p["prompt"] for p in load_prompts(a.prompts) if not p.get("history")]
    if not prompts:
        raise SpecScopeError(f"{a.prompts} holds only follow-up turns; nothing to price")
    methods = split_methods(a.methods)
    if not methods:
        raise SpecScopeError("--methods is empty")
    for m in methods:
        parse_method(m)
    if not 1 <= a.max_new_tokens <= MAX_NEW_TOKENS_LIMIT:
        raise SpecScopeError(f"--max-new-tokens must be in [1, {MAX_NEW_TOKENS_LIMIT}], got {a.max_new_tokens}")
    if not 0 <= a.head_ms < 1000:
        raise SpecScopeError(f"--head-ms must be in [0, 1000) ms, got {a.head_ms:g}")
    torch.set_num_threads(1)
    pair = load_pair("embedded", dtype="int8")
    costs = dataclasses.replace(given if given is not None else run_costs(pair)[0], head_ms=a.head_ms)
    greedy = SamplingConfig(temperature=0.0, seed=0).validate()
    priced: dict[str, list[tuple[int, float]]] = {}
    for m in methods:
        priced[m] = []
        for prompt in prompts:
            run = Generation(pair, prompt, m, a.max_new_tokens, greedy, display=False, costs=costs).run()
            shapes = [round_shape(e) for e in run.events]  # a tree round: its whole pass
            ms = sum(float(costs.round_ms(r.width, r.draft_forwards, r.head_calls)) for r in shapes)
            priced[m].append((run.stats.new_tokens, ms))
    print(f"priced by {costs.name}, a pre-verifier call at {a.head_ms:g} ms; {len(prompts)} prompts of {a.prompts}")
    print("method               median  total")
    base = priced[methods[0]]
    for m, runs in priced.items():
        ratios = [(bt / bn) / (mt / mn) if mn and bn else float("nan") for (bn, bt), (mn, mt) in zip(base, runs)]
        total = (sum(t for _, t in base) / sum(n for n, _ in base)) / (
            sum(t for _, t in runs) / sum(n for n, _ in runs)
        )
        print(f"{m:20s} {np.median(ratios):6.3f}  {total:5.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
