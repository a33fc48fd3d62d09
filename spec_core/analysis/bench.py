"""Benchmark: every method on a prompt set, side by side in one process, against ``ar`` of the same run.

Spec-Bench's habits (Xia et al., arXiv 2401.07851): one call contract for every method, seeded runs, a warm-up,
repeats interleaved across methods (so machine noise hits all of them alike), medians, and raw per-prompt rows
written to a CSV that is analysed separately. ``speedup_vs_ar`` is tokens/s over the tokens/s of ``ar`` on the
same prompt in the same invocation.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pandas as pd
from tqdm import tqdm

from spec_core.analysis.peers import run_peer
from spec_core.core.cost_model import CostProfile
from spec_core.core.cost_tables import run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent, SamplingConfig
from spec_core.engine.loop import Generation, prompt_ids
from spec_core.engine.methods import parse_method, split_precision
from spec_core.engine.session import divergence_token
from spec_core.model.prompting import History
from spec_core.serve import spec_bench

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

COLUMNS = [
    "method",
    "prompt_id",
    "category",
    "new_tokens",
    "wall_s",
    "tokens_per_s",
    "target_forwards",
    "drafted_tokens",
    "accepted_tokens",
    "tau",
    "acceptance_rate",
    "speedup_vs_ar",
    "output_sha",
    "first_divergence",
    "draft_s",
    "verify_s",
    "repeats",
    "temperature",
    "seed",
    "precision",
    "speedup_vs_best_ar",
    "lookup_tokens",
    "model_tokens",
    "costs",  # the cost table the run's choices were priced with (spec_core/core/cost_tables.py)
]


def output_sha(token_ids) -> str:
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]


def run_once(
    pair: ModelPair,
    method: str,
    prompt: str,
    max_new_tokens: int,
    sampling: SamplingConfig,
    history: History | None = None,
    costs: CostProfile | None = None,
) -> dict:
    """One generation of one method → a dict of raw measurements (``history``: earlier turns of a conversation;
    ``costs``: the profile its choices are priced with, data read once per bench)."""
    spec = parse_method(method)
    if spec.kind == "peer":
        res = run_peer(
            pair,
            method,
            prompt_ids(pair, prompt, history=history),
            max_new_tokens,
            sampling.temperature,
            sampling.top_p,
            sampling.top_k,
            sampling.seed,
        )
        n = len(res.token_ids)
        return {
            "token_ids": res.token_ids,
            "wall_s": res.wall_s,
            "target_forwards": res.target_forwards,
            "drafted_tokens": float("nan"),
            "accepted_tokens": float("nan"),
            "draft_s": float("nan"),
            "verify_s": float("nan"),
            "new_tokens": n,
            "lookup_tokens": float("nan"),
            "model_tokens": float("nan"),
        }
    # display=False: the method, not a viewer
    r = Generation(pair, prompt, method, max_new_tokens, sampling, display=False, history=history, costs=costs).run()
    return {
        "token_ids": r.token_ids,
        "wall_s": r.stats.wall_s,
        "target_forwards": r.stats.target_forwards,
        "drafted_tokens": r.stats.drafted_tokens,
        "accepted_tokens": r.stats.accepted_tokens,
        "draft_s": sum(e.draft_s for e in r.events),
        "verify_s": sum(e.verify_s for e in r.events),
        "new_tokens": r.stats.new_tokens,
        **accepted_by_source(r.events),
    }


def accepted_by_source(events: Sequence[RoundEvent]) -> dict[str, int]:
    """Accepted drafted tokens by who drafted them: ``lookup`` (copied from the text) or ``model`` (a network).
    An event without ``draft_sources`` (read from an older file) counts every accepted token as ``model``."""
    lookup = model = 0
    for e in events:
        sources = getattr(e, "draft_sources", ())[: e.accepted]
        if not sources:
            model += e.accepted
            continue
        lookup += sum(1 for s in sources if s == "lookup")
        model += sum(1 for s in sources if s == "model")
    return {"lookup_tokens": lookup, "model_tokens": model}


def run_bench(
    pair: ModelPair,
    prompts: list[dict],
    methods: list[str],
    max_new_tokens: int = 96,
    temperature: float = 0.0,
    repeats: int = 3,
    seed: int = 0,
    warmup: bool = True,
    progress: bool = True,
    pair_for: Callable[[str], ModelPair] | None = None,
) -> pd.DataFrame:
    """One row per (method, prompt): medians over ``repeats``; ``ar`` is always run (it is the baseline).

    A method written ``NAME@PRECISION`` runs on ``pair_for(PRECISION)`` (the same pair at that arithmetic);
    bare names run on ``pair``. ``speedup_vs_ar`` is against the bare ``ar``; ``speedup_vs_best_ar`` against the
    fastest plain decoding of any precision in the run (every ``ar@…`` and ``ar``), prompt by prompt.
    A prompt with a ``history`` (an MT-bench second turn) runs with it in the context; a missing answer in it is the target's
    greedy ``ar`` output on ``pair``, generated once here, so every method sees the same context.
    """
    specs = {m: parse_method(m) for m in ["ar", *methods]}  # parsed once: kinds and precisions read below
    pairs: dict[str | None, ModelPair] = {None: pair}
    for spec in specs.values():
        if spec.precision is not None and spec.precision not in pairs and spec.precision != pair.precision:
            if pair_for is None:
                raise SpecScopeError(f"{spec.name!r} asks for another precision; this run has only {pair.precision}")
            pairs[spec.precision] = pair_for(spec.precision)
    on = {m: pairs.get(spec.precision, pair) for m, spec in specs.items()}
    # every precision in the run gets its own plain decoding: a lossless method is compared with the ar of its
    # own arithmetic (first_divergence, same_as_ar), and the fastest ar of any precision is the yardstick
    for spec_pair in {id(p): p for p in on.values()}.values():
        if not any(on[m] is spec_pair and specs[m].kind == "ar" for m in on):
            name = f"ar@{spec_pair.precision}"
            on[name], specs[name] = spec_pair, parse_method(name)
            methods = [*methods, name]
    plain = {m for m, spec in specs.items() if spec.kind == "ar"}
    methods = ["ar", *[m for m in dict.fromkeys(methods) if m != "ar"]]
    if repeats < 1 or max_new_tokens < 1:
        raise SpecScopeError("repeats and max_new_tokens must be >= 1")
    sampling = SamplingConfig(temperature=temperature, seed=seed).validate()
    prompts = spec_bench.answer_first_turns(pair, prompts, max_new_tokens)
    # a name for a lane already in the run (``ar@int8`` when the run's default is int8 is ``ar``) is measured once
    # and reported under both names: timing one computation twice and keeping the faster would flatter the yardstick
    lane_of: dict[tuple[int, str], str] = {}
    same = {m: lane_of.setdefault((id(on[m]), split_precision(m)[0]), m) for m in methods}
    lanes = [m for m in methods if same[m] == m]
    priced = {id(p): run_costs(p) for p in pairs.values()}  # read once for the whole bench, never timed
    costs = {m: priced[id(on[m])][0] for m in methods}
    if warmup:  # first calls pay for allocations and lazy loads; measure none of them
        for m in lanes:
            run_once(
                on[m], m, prompts[0]["prompt"], min(16, max_new_tokens), sampling, prompts[0].get("history"), costs[m]
            )
    raw: dict[tuple[str, str], list[dict]] = {}
    bar = tqdm(total=repeats * len(prompts) * len(lanes), desc="bench", unit="run", disable=not progress)
    for _ in range(repeats):
        for p in prompts:
            for m in lanes:
                run = run_once(on[m], m, p["prompt"], max_new_tokens, sampling, p.get("history"), costs[m])
                raw.setdefault((m, p["id"]), []).append(run)
                bar.update(1)
    bar.close()
    for m in methods:
        for p in prompts:
            raw[(m, p["id"])] = raw[(same[m], p["id"])]
    rows = []
    for p in prompts:
        ar_runs = raw[("ar", p["id"])]
        ar_tps = statistics.median(r["new_tokens"] / r["wall_s"] for r in ar_runs)
        tps_of = {m: statistics.median(r["new_tokens"] / r["wall_s"] for r in raw[(m, p["id"])]) for m in methods}
        best_ar = max(v for m, v in tps_of.items() if m in plain)
        own_ar = {id(on[m]): raw[(m, p["id"])][0]["token_ids"] for m in reversed(methods) if m in plain}
        for m in methods:
            runs = raw[(m, p["id"])]
            wall = statistics.median(r["wall_s"] for r in runs)
            first = runs[0]
            tps = statistics.median(r["new_tokens"] / r["wall_s"] for r in runs)
            rows.append(
                {
                    "method": m,
                    "prompt_id": p["id"],
                    "category": p["category"],
                    "new_tokens": first["new_tokens"],
                    "wall_s": wall,
                    "tokens_per_s": tps,
                    "target_forwards": first["target_forwards"],
                    "drafted_tokens": first["drafted_tokens"],
                    "accepted_tokens": first["accepted_tokens"],
                    "tau": first["new_tokens"] / first["target_forwards"],
                    "acceptance_rate": first["accepted_tokens"] / first["drafted_tokens"]
                    if first["drafted_tokens"]
                    else float("nan"),
                    "speedup_vs_ar": tps / ar_tps,
                    "output_sha": output_sha(first["token_ids"]),
                    "first_divergence": divergence_token(first["token_ids"], own_ar[id(on[m])]),  # 1-based; None: same
                    "draft_s": statistics.median(r["draft_s"] for r in runs),
                    "verify_s": statistics.median(r["verify_s"] for r in runs),
                    "repeats": repeats,
                    "temperature": temperature,
                    "seed": seed,
                    "precision": on[m].precision,
                    "speedup_vs_best_ar": tps / best_ar,
                    "lookup_tokens": first["lookup_tokens"],
                    "model_tokens": first["model_tokens"],
                    "costs": priced[id(on[m])][1].label,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per method: median speedup, pooled speedup and tokens/s, mean τ and α, how many outputs match ``ar``.

    The median is of the per-prompt ratios; the pooled speedup is the method's new tokens over its time, summed over
    every prompt, against ``ar``'s (what the Analyzer's "speedup vs ar" shows). A few long answers weigh more in the
    second; a tie between two lanes can read differently in the two, so both are printed."""
    g = df.groupby("method", sort=False)
    rate = g["new_tokens"].sum() / g["wall_s"].sum()  # tokens/s over every prompt
    return pd.DataFrame(
        {
            "speedup_vs_ar (median)": g["speedup_vs_ar"].median(),
            "speedup_vs_ar (pooled)": rate / rate["ar"],
            "vs_best_ar (median)": g["speedup_vs_best_ar"].median(),
            "tokens_per_s (median)": g["tokens_per_s"].median(),
            "tau (mean)": g["tau"].mean(),
            "acceptance (mean)": g["acceptance_rate"].mean(),
            "same_as_ar": g["first_divergence"].apply(lambda s: f"{int(s.isna().sum())}/{len(s)}"),
        }
    ).round(3)
