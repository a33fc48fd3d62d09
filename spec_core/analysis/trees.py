"""Which token tree to draft: ``python -m spec_core analyze trees``.

EAGLE-2 (arXiv 2406.16858) keeps the N best nodes of a dynamic tree of depth D, expanding the top-K children
of the K most promising nodes per level. Larger trees buy a longer accepted path (τ) with a wider target pass.
How much a wider pass costs depends on the hardware: on a GPU a pass over 32 tokens costs about one step, on a
CPU without native bf16 it costs up to 15 steps. This command runs a grid of shapes on the *training* prompts
(:mod:`spec_core.train.prompts`, never the benchmark set), greedy, and reports per shape:

- τ (tokens per target forward) and the mean accepted path length, which depend only on the models;
- the predicted speedup over ``ar`` on this machine: the same rounds priced with forward costs measured in this
  process (:func:`spec_core.analysis.costs.predicted_ms`, widths up to the largest tree);
- the predicted speedup where a verification pass costs one step (``free_pass_speedup``: τ against the draft
  levels alone), which is the regime the trees were designed for.

The shipped default (:class:`spec_core.drafters.tree.TreeShape`) is the shape with the best ``free_pass_speedup``
among trees of at most 32 nodes (a pass a GPU verifies at about the cost of one step); the table says what each
other shape would give here and there.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from spec_core.analysis.costs import measure_costs, predicted_ms
from spec_core.core.cli_args import add_threads
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.tree import TreeShape
from spec_core.engine.loop import Generation
from spec_core.model.models import load_pair
from spec_core.train.prompts import training_prompts

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

DEFAULT_GRID = "nodes=8,16,24,32,48;depth=4,6,8;topk=4,8"


def parse_grid(text: str) -> list[TreeShape]:
    """``"nodes=8,16;depth=4,6;topk=4"`` → every combination, as validated shapes (duplicates dropped)."""
    axes: dict[str, list[int]] = {}
    for part in (p for p in text.split(";") if p.strip()):
        key, _, values = part.partition("=")
        key = key.strip()
        if key not in ("nodes", "depth", "topk"):
            raise SpecScopeError(f"tree grid: unknown axis {key!r}; use nodes=..;depth=..;topk=..")
        try:
            axes[key] = [int(v) for v in values.split(",") if v.strip()]
        except ValueError as err:
            raise SpecScopeError(f"tree grid: {key} needs integers, got {values!r}") from err
        if not axes[key]:
            raise SpecScopeError(f"tree grid: {key} has no values")
    base = TreeShape()
    shapes = [
        TreeShape(nodes=n, depth=d, topk=k)
        for n in axes.get("nodes", [base.nodes])
        for d in axes.get("depth", [base.depth])
        for k in axes.get("topk", [base.topk])
    ]
    return list(dict.fromkeys(shapes))


def shape_name(shape: TreeShape) -> str:
    return f"tree:nodes={shape.nodes},depth={shape.depth},topk={shape.topk}"


def run_shapes(
    pair: ModelPair, shapes: list[TreeShape], prompts: list[str], max_new_tokens: int
) -> tuple[pd.DataFrame, dict]:
    """One row per shape (its events on every prompt, greedy) and the raw events per shape for pricing."""

    events: dict[str, list] = {}
    rows = []
    for shape in shapes:
        name = shape_name(shape)
        evs: list = []
        t = time.perf_counter()
        for prompt in prompts:
            evs += list(Generation(pair, prompt, name, max_new_tokens, SamplingConfig(), display=False).rounds())
        events[name] = evs
        tokens = sum(len(e.emitted) for e in evs)
        rows.append(
            {
                "method": name,
                "nodes": shape.nodes,
                "depth": shape.depth,
                "topk": shape.topk,
                "tau": tokens / len(evs),
                "accepted_path": statistics.fmean(e.accepted for e in evs),
                "rounds": len(evs),
                "seconds": time.perf_counter() - t,
            }
        )
    return pd.DataFrame(rows), events


def price(table: pd.DataFrame, events: dict, costs: pd.DataFrame, draft: str) -> pd.DataFrame:
    """Add ``predicted_speedup`` (this machine's measured forward costs) and ``free_pass_speedup`` (a pass over
    any tree priced as one step, the regime of a GPU at these sizes) to the table."""
    one = float(costs.loc[(costs["what"] == "target forward") & (costs["tokens"] == 1), "ms"].iloc[0])
    step = float(costs.loc[costs["what"] == f"draft step ({draft})", "ms"].iloc[0])
    out = table.copy()
    predicted, free = [], []
    for name in out["method"]:
        evs = events[name]
        tokens = sum(len(e.emitted) for e in evs)
        predicted.append(tokens * one / predicted_ms(evs, costs, draft))
        levels = sum(e.draft_forwards for e in evs)  # one batched draft forward per level drafted
        free.append(tokens * one / (len(evs) * one + levels * step))
    out["predicted_speedup"] = np.round(predicted, 3)
    out["free_pass_speedup"] = np.round(free, 3)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze trees", description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=DEFAULT_GRID, help="axes nodes=..;depth=..;topk=.. (every combination)")
    ap.add_argument("--prompts", type=int, default=8, help="training prompts (spec_core.train.prompts)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--draft", default="feature", help="feature (default) or standalone")
    ap.add_argument("--dtype", default="float32", help="τ depends on the models only: float32 runs fastest on CPU")
    add_threads(ap, 1)
    ap.add_argument("--out", default="runs/trees.csv")
    a = ap.parse_args(argv)
    try:
        if a.prompts < 1 or a.max_new_tokens < 1 or a.threads < 1:
            raise SpecScopeError("--prompts, --max-new-tokens and --threads must be at least 1")
        shapes = parse_grid(a.grid)
        torch.set_num_threads(a.threads)

        prompts = [p for _, p in training_prompts(a.prompts)]
        pair = load_pair("embedded", "cpu", a.dtype, draft=a.draft)
        table, events = run_shapes(pair, shapes, prompts, a.max_new_tokens)
        context = int(np.mean([e.context_len for evs in events.values() for e in evs]))
        widths = sorted({1, 2, 4, 8, *(s.nodes + 1 for s in shapes)})
        assert pair.draft is not None  # the embedded pair has its draft
        costs = measure_costs(pair, {a.draft: pair.draft}, repeats=5, context=context, widths=tuple(widths))
        table = price(table, events, costs, a.draft)
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(a.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table.sort_values("tau", ascending=False).round(3).to_string(index=False))
    best = table.loc[table["tau"].idxmax()]
    print(
        f"best τ: {best['method']} ({best['tau']:.3f}); best predicted here: "
        f"{table.loc[table['predicted_speedup'].idxmax(), 'method']}; wrote {a.out}"
    )
    return 0
