"""The policy playground over a prompt set: ``python -m spec_core analyze policies --prompts FILE``.

One recorded pass per prompt (:func:`spec_core.serve.playground.record_text`), every policy replayed on it, and
optionally real engine runs of the same policies beside the replay: one CSV row per policy and prompt, and the
table pooled over the prompts with the oracle's gain over the best fixed window and the share each policy
captures.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from spec_core.analysis.costs import measure_round_costs
from spec_core.core.cost_model import CostProfile
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.methods import is_fixed_window, split_methods
from spec_core.engine.replay import (
    ORACLE,
    PolicyReplay,
    TextRecord,
    _parse,
    replay_all,
    save_record,
    standard_policies,
)
from spec_core.model.models import load_pair
from spec_core.serve.playground import _heads, record_text
from spec_core.serve.prompts import load_prompts

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

# -- the prompt-set table (`python -m spec_core analyze policies --prompts FILE`) ------------------------------------

CSV_COLUMNS = [
    "policy",
    "prompt_id",
    "category",
    "rounds",
    "new_tokens",
    "tau",
    "drafted_tokens",
    "accepted_tokens",
    "wasted_tokens",
    "predicted_ms",
    "predicted_speedup",
    "head_calls",
    "truncated_rounds",
    "measured_speedup",
    "engine_tau",
    "engine_same_rounds",
    "engine_same_text",
    "record_s",
]


def measure_runs(pair: ModelPair, prompt: str, policies: Sequence[str], max_new_tokens: int) -> dict[str, Any]:
    """Real greedy engine runs of ``ar`` and each policy on one prompt: per policy, its events and tokens/s."""

    out = {}
    for name in ["ar", *policies]:
        out[name] = Generation(pair, prompt, name, max_new_tokens, SamplingConfig()).run()
    return out


def prompt_rows(record: TextRecord, replays: Sequence[PolicyReplay], prompt: dict, runs: dict | None = None) -> list:
    """CSV rows of one prompt: the replays, and beside them the real runs where some were measured."""
    rows = []
    ar = runs.get("ar") if runs else None
    for rep in replays:
        row = {
            **rep.row(),
            "prompt_id": prompt["id"],
            "category": prompt.get("category", ""),
            "record_s": record.meta.get("record_s"),
        }
        res = runs.get(rep.policy) if runs else None
        if res is not None and ar is not None:
            row["measured_speedup"] = res.stats.tokens_per_s / ar.stats.tokens_per_s
            row["engine_tau"] = res.stats.tau
            row["engine_same_rounds"] = [(e.draft_len, e.accepted) for e in res.events] == list(
                zip(rep.lengths, rep.kept)
            )
            row["engine_same_text"] = tuple(res.token_ids) == record.tokens
        rows.append(row)
    return rows


def summary(df):
    """Per policy over the prompts: τ and predicted speedup pooled (Σ tokens / Σ rounds, Σ ar time / Σ time),
    drafted and wasted tokens, the measured speedup of the sample, and the oracle's gain captured."""

    g = df.groupby("policy", sort=False)
    out = pd.DataFrame(
        {
            "prompts": g.size(),
            "tau": g["new_tokens"].sum() / g["rounds"].sum(),
            "drafted": g["drafted_tokens"].sum(),
            "wasted": g["wasted_tokens"].sum(),
            "wasted_share": g["wasted_tokens"].sum() / g["drafted_tokens"].sum().clip(lower=1),
            "predicted_speedup": (df["predicted_ms"] * df["predicted_speedup"]).groupby(df["policy"], sort=False).sum()
            / g["predicted_ms"].sum(),
            "measured_speedup": g["measured_speedup"].mean(),
            "sampled": g["measured_speedup"].count(),
        }
    )
    fixed = out[out.index.map(is_fixed_window).astype(bool)]["predicted_speedup"]
    best, oracle = fixed.max(), out["predicted_speedup"].get(ORACLE, np.nan)
    out["vs_best_fixed"] = out["predicted_speedup"] / best
    out["share_of_oracle_gain"] = (out["predicted_speedup"] - best) / (oracle - best) if oracle > best else np.nan
    return out.reset_index(), fixed.idxmax()


def prompts_main(args) -> int:
    """The prompt-set mode of ``analyze policies`` (arguments parsed in :mod:`spec_core.analysis.policies`)."""

    torch.set_num_threads(args.threads)
    prompts = load_prompts(args.prompts)[: args.limit or None]
    pair = load_pair("embedded", draft=args.draft, dtype=args.dtype)
    pacer = [p for p in args.pacer.split(";") if p.strip()]
    policies = split_methods(args.policies) if args.policies else standard_policies(args.confidence, pacer)
    for p in policies:
        _parse(p)  # a bad name fails before any model runs
    if args.costs:
        raw = json.loads(Path(args.costs).read_text())
        costs = CostProfile.from_dict(raw)
    else:
        blocks = [_parse(p)[1].params.block for p in policies if _parse(p)[0] == "pacer"]
        costs = measure_round_costs(pair, _heads(pair, [""]).get(""), max(blocks, default=1), args.repeats)
    engine_policies = [p for p in policies if p != ORACLE]
    if args.measure:
        measure_runs(pair, prompts[0]["prompt"], engine_policies, 8)  # warm-up
    variants = sorted({_parse(p)[1].params.head for p in policies if _parse(p)[0] == "pacer"} | {""})
    missing = [v for v in variants if v not in _heads(pair, [v])]
    if missing:  # said once, here: the replays of these PACER settings are left out of the table
        print(f"no pre-verifier head {missing} matches this pair's draft: those PACER settings are left out")
    rows = []
    for k, prompt in enumerate(prompts):
        record = record_text(pair, prompt["prompt"], args.max_new_tokens, args.max_len, heads=variants, costs=costs)
        if args.save_records:
            save_record(record, Path(args.save_records) / f"{prompt['id']}.json")
        runs = measure_runs(pair, prompt["prompt"], engine_policies, args.max_new_tokens) if k < args.measure else None
        rows += prompt_rows(record, replay_all(record, policies), prompt, runs)
        print(
            f"{prompt['id']}: {len(record.tokens)} tokens recorded in {record.meta['record_s']:.2f} s"
            + (" (+ engine runs)" if runs else ""),
            flush=True,
        )
    df = pd.DataFrame(rows).reindex(columns=CSV_COLUMNS)
    table, best = summary(df)
    pd.set_option("display.width", 200)
    print(
        f"\n{len(prompts)} prompts, {args.max_new_tokens} new tokens, {args.dtype} {args.draft} draft; "
        f"costs (ms): {dataclasses.asdict(costs)}"
    )
    print(table.round(3).to_string(index=False))
    oracle = table.set_index("policy")["vs_best_fixed"].get(ORACLE)
    print(f"\noracle gain over the best fixed window ({best}): x{oracle:.3f}")
    sampled = df[df["engine_same_rounds"].notna()]
    if len(sampled):
        same = sampled["engine_same_rounds"].astype(bool)
        print(
            f"replay vs real runs ({sampled['prompt_id'].nunique()} prompts x {sampled['policy'].nunique()} "
            f"policies): same rounds {int(same.sum())}/{len(same)}, same text "
            f"{int(sampled['engine_same_text'].astype(bool).sum())}/{len(same)}, mean |tau - engine tau| "
            f"{(sampled['tau'] - sampled['engine_tau']).abs().mean():.3f}"
        )
    print(f"recording: median {df.drop_duplicates('prompt_id')['record_s'].median():.2f} s per prompt")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0
