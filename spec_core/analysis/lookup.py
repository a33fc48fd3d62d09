"""``analyze lookup``: how far prompt lookup could go on Spec-Bench's answers, at every copy length.

The target answers Spec-Bench questions greedily (first turns; ``--per-category`` of each category after
``--offset``), then prompt lookup is replayed on each answer with no model call (:mod:`spec_core.engine.lookup_replay`):
fixed copy lengths, ``lookup``'s own cost policy, and an oracle that knows what the target keeps, each priced by
this machine's cost table for the pair's precision (``costs --machine``; measured once when none is cached). The
prefill is left out: the table says what the decoding rounds could gain. Rows go to a CSV; the printed table is
the median speedup per category and overall.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch

from spec_core.core.cli_args import add_threads
from spec_core.core.cost_tables import run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.lookup import LookupParams, special_ids
from spec_core.engine.hybrid_replay import network_runs
from spec_core.engine.lookup_replay import COPY_WINDOWS, copies, copy_replays, replay_oracle_sources
from spec_core.engine.loop import Generation
from spec_core.model.models import load_pair
from spec_core.serve import spec_bench
from spec_core.serve.spec_bench import CATEGORIES

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


def record_answers(pair: ModelPair, prompts: list[dict], max_new_tokens: int) -> list[dict]:
    """Each prompt's greedy answer with its prompt ids (``ar``, no display numbers)."""

    out = []
    for p in prompts:
        run = Generation(pair, p["prompt"], "ar", max_new_tokens, SamplingConfig(), display=False)
        result = run.run()
        banned = sorted(special_ids(pair.tokenizer))  # the copy never proposes one: its replay neither
        out.append({**p, "prompt_ids": list(run.prompt_ids), "tokens": list(result.token_ids), "special_ids": banned})
    return out


def replay_rows(answers: list[dict], profile, max_new_tokens: int, pair: ModelPair | None = None) -> pd.DataFrame:
    """One row per (answer, way of choosing the copy's length): τ and predicted speedup over ``ar``. With ``pair``,
    two more: the oracle over its draft network's chains alone, and over both sources (the hybrid's ceiling,
    :mod:`spec_core.engine.hybrid_replay`)."""

    rows = []
    for a in answers:
        banned = frozenset(a.get("special_ids", ()))
        replays = copy_replays(a["prompt_ids"], a["tokens"], profile, max_new_tokens, banned)
        if pair is not None:
            at = copies(a["prompt_ids"], a["tokens"], LookupParams(k=max(COPY_WINDOWS)), banned)
            runs = network_runs(pair, a["prompt_ids"], a["tokens"])
            replays += [replay_oracle_sources(at, runs, profile, max_new_tokens, copy=c) for c in (False, True)]
        for r in replays:
            rows.append(
                {
                    "prompt_id": a["id"],
                    "category": a["category"],
                    "policy": r.policy,
                    "new_tokens": r.tokens,
                    "rounds": len(r.lengths),
                    "tau": r.tau,
                    "speedup_vs_ar": r.speedup,
                    "costs": profile.name,
                }
            )
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Median speedup per policy: overall, then per category (Spec-Bench's order)."""

    order = list(dict.fromkeys(df["policy"]))
    out = pd.DataFrame(index=order)
    out["overall"] = df.groupby("policy")["speedup_vs_ar"].median()
    for c in [c for c in CATEGORIES if c in set(df["category"])]:
        out[c] = df[df.category == c].groupby("policy")["speedup_vs_ar"].median()
    return out.round(3)


def ceiling_sentence(df: pd.DataFrame) -> str:
    """How far above ``lookup`` (and the copy's own oracle) the hybrid's oracle goes, answer by answer (medians)."""
    by = df.pivot_table(index="prompt_id", columns="policy", values="speedup_vs_ar")
    over_lookup = (by["oracle (hybrid)"] / by["lookup (cost)"]).median()
    over_copy = (by["oracle (hybrid)"] / by["oracle"]).median()
    return (
        f"the hybrid's ceiling: an oracle choosing copy, network or a plain step each round is {over_lookup:.3f}x "
        f"lookup's cost policy and {over_copy:.3f}x the copy's own oracle (medians over the answers; it never "
        "drafts a rejected token and never pays the network's start)"
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze lookup", description=__doc__.splitlines()[0])
    ap.add_argument("--per-category", type=int, default=6, help="Spec-Bench questions of each category")
    ap.add_argument("--offset", type=int, default=10, help="questions of each category skipped first")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--dtype", default=None, help="the pair's precision (default: auto)")
    add_threads(ap, None)
    ap.add_argument(
        "--network",
        action="store_true",
        help="also replay the draft network's chains: its oracle, and the hybrid's (either source, each round)",
    )
    ap.add_argument("--out", default="runs/lookup_replay.csv")
    a = ap.parse_args(argv)
    try:
        if a.per_category < 1 or a.offset < 0 or a.max_new_tokens < 1:
            raise SpecScopeError("--per-category and --max-new-tokens must be at least 1, --offset at least 0")

        if a.threads:
            torch.set_num_threads(a.threads)
        prompts = [p for p in spec_bench.select(a.per_category, a.offset) if not p.get("history")]
        pair = load_pair("embedded", dtype=a.dtype, operator=True)
        profile, in_force = run_costs(pair)  # the table in force, read (never timed here)
        print(in_force.sentence(pair.precision, (a.dtype or "auto") == "auto"))
        answers = record_answers(pair, prompts, a.max_new_tokens)
        df = replay_rows(answers, profile, a.max_new_tokens, pair if a.network else None)
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False)
    print(f"prompt lookup replayed on {df.prompt_id.nunique()} answers, priced by {profile.name} ({profile.about})")
    print(
        f"median speedup over ar, the prefill left out (precision {pair.precision}, threads {torch.get_num_threads()}):"
    )
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table(df).to_string())
    tau = statistics.median(df[df.policy == "lookup (cost)"].tau)
    print(f"wrote {a.out} ({len(df)} rows); lookup's median τ over the answers: {tau:.2f}")
    if a.network:
        print(ceiling_sentence(df))
    return 0
