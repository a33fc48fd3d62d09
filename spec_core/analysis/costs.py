"""Forward costs of the target and of each draft design, measured side by side in one process.

Reports milliseconds per call (median over repeats, after a warm-up) for a target forward over 1, 2, 4, 8, 16 and 33
new tokens on a cached context, and for one draft step of each design (what a drafted token costs), with the
ratio draft step / one-token target forward — the c in the usual speedup estimate (Leviathan et al. 2023).

From those costs, :func:`acceptance_needed` answers the inverse question: the per-token acceptance α a fixed window
must reach for a given speedup (or τ), under the i.i.d. model of Leviathan et al. (2023, §3.1), where a round of
``fixed:k`` yields E[tokens] = (1 − α^(k+1)) / (1 − α) and costs one target forward over k + 1 tokens plus k
draft steps (plus the engine's own overhead, 0 unless given: the answer is then a lower bound).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd
import torch

from spec_core.core.cost_model import CostProfile, expected_tau, round_shape
from spec_core.core.types import SamplingConfig
from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.standalone import StandaloneDrafter
from spec_core.engine.loop import Generation, generate
from spec_core.model.cached_lm import CachedLM, LMOutput
from spec_core.model.pass_timing import interleaved_median_ms, target_calls

if TYPE_CHECKING:
    from spec_core.model.draft_networks import FeatureDraft
    from spec_core.model.models import ModelPair

CONTEXT = 200  # tokens already in the cache when a forward is timed
WIDTHS = (1, 2, 4, 8, 16, 33)  # target forward widths timed (33: the default token tree, 32 nodes + pending)
GREEDY = SamplingConfig()


def median_ms(fn, repeats: int, warmup: int = 1) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


@torch.inference_mode()
def measure_costs(
    pair: ModelPair,
    drafts: Mapping[str, torch.nn.Module],
    repeats: int = 20,
    context: int = CONTEXT,
    widths: tuple[int, ...] = WIDTHS,
) -> pd.DataFrame:
    """One row per measured call: ``what``, ``tokens``, ``ms``, ``relative_to_target_1``, with ``context``
    tokens already cached (a forward's cost grows with it: compare rounds with costs at their own context).
    ``widths`` (1 among them) are the target forward widths timed."""
    context = max(2, int(context))
    gen = torch.Generator(device=pair.device).manual_seed(0)
    vocab = pair.target.config.vocab_size
    low, high = (100, 1000) if vocab > 1000 else (0, vocab)  # ordinary token ids (any id fits a tiny test model)
    ids = torch.randint(low, high, (context,), generator=torch.Generator().manual_seed(0)).tolist()
    widths = tuple(sorted({1, *widths}))
    calls = {("target forward", n): call for n, call in target_calls(pair, widths, context, hidden=True).items()}
    for name, draft in drafts.items():
        drafter = FeatureDrafter(cast("FeatureDraft", draft)) if hasattr(draft, "fc") else StandaloneDrafter(draft)
        probe = CachedLM(pair.target, layers=drafter.target_layers)  # the states this drafter reads
        prefill = probe.forward(torch.tensor([ids[0]]))  # any target output: features for the feature draft
        repeat = lambda t: torch.cat([t] * (context - 1)) if t is not None else None  # noqa: E731
        drafter.reset(ids, LMOutput(prefill.logits, repeat(prefill.hidden), repeat(prefill.layer_hidden)))

        def step(drafter=drafter, verified=prefill):
            drafter.propose(1, GREEDY, gen)
            drafter.commit(0, ids[-1], verified)

        calls[(f"draft step ({name})", 1)] = step
    timed = interleaved_median_ms(calls, repeats)
    rows = [{"what": what, "tokens": n, "ms": ms} for (what, n), ms in timed.items()]
    base = rows[0]["ms"]
    df = pd.DataFrame(rows)
    df["relative_to_target_1"] = (df["ms"] / base).round(3)
    df["ms"] = df["ms"].round(2)
    return df


def profile_from_table(costs: pd.DataFrame, draft: str, overhead_ms: float = 0.0) -> CostProfile:
    """A :func:`measure_costs` table as the one cost model's :class:`~spec_core.core.cost_model.CostProfile`."""
    target = costs[costs["what"] == "target forward"]
    step = costs.loc[costs["what"] == f"draft step ({draft})", "ms"]
    return CostProfile(
        tuple(int(t) for t in target["tokens"]),
        tuple(float(m) for m in target["ms"]),
        float(step.iloc[0]) if len(step) else 0.0,
        overhead_ms,
        source="quick",
    )


def window_speedup(alpha, k: int, costs: pd.DataFrame, draft: str, overhead_ms: float = 0.0) -> np.ndarray:
    """Expected speedup of ``fixed:k`` over ``ar`` at i.i.d. acceptance α, from a :func:`measure_costs` table
    (:meth:`spec_core.core.cost_model.CostProfile.window_speedup`; the engine's ``overhead_ms`` per round, plain
    steps included)."""
    return profile_from_table(costs, draft, overhead_ms).window_speedup(alpha, k)


def acceptance_needed(
    costs: pd.DataFrame,
    draft: str,
    speedup: float = 1.5,
    tau: float = 3.0,
    windows=(2, 3, 4, 6),
    overhead_ms: float = 0.0,
) -> pd.DataFrame:
    """Per window: the α at which ``fixed:k`` reaches ``speedup`` over ``ar`` and the α at which its τ reaches
    ``tau`` (NaN where even α → 1 falls short). Both are increasing in α, so each is read off a dense grid."""
    grid = np.linspace(0.0, 0.9999, 20001)
    rows = []
    for k in windows:
        s, t = window_speedup(grid, k, costs, draft, overhead_ms), expected_tau(grid, k)
        rows.append(
            {
                "window": f"fixed:{k}",
                f"alpha_for_{speedup:g}x": round(float(np.interp(speedup, s, grid, right=np.nan)), 3),
                f"alpha_for_tau_{tau:g}": round(float(np.interp(tau, t, grid, right=np.nan)), 3),
                "speedup_at_alpha_1": round(float(window_speedup(1.0 - 1e-9, k, costs, draft, overhead_ms)), 3),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------
# Where a round's time goes, and the speedup the model predicts from the rounds a method actually ran


def predicted_ms(events, costs: pd.DataFrame, draft: str) -> float:
    """The cost model's time for these rounds (:class:`~spec_core.core.cost_model.CostProfile` priced by each round's
    :func:`~spec_core.core.cost_model.round_shape`). Nothing for the engine's own work."""
    shapes = [round_shape(e) for e in events]
    profile = profile_from_table(costs, draft)
    return float(profile.round_ms([r.width for r in shapes], [r.draft_forwards for r in shapes]).sum())


def round_breakdown(
    pair: ModelPair,
    costs: pd.DataFrame,
    draft: str,
    prompts: list[str],
    methods: list[str],
    max_new_tokens: int = 96,
    repeats: int = 3,
) -> pd.DataFrame:
    """Per method (``ar`` first, interleaved with the others): ms per round spent in draft steps, in the target
    forward and in the engine's own work (policy, rule, rollback, event), from the events' timers; τ; and the
    decode speedup over ``ar`` measured (lane clocks: Σ draft_s + verify_s) beside the one the cost model
    predicts for the same rounds (:func:`predicted_ms`). Medians over ``repeats`` per prompt, then means.

    Rounds run as the benchmark runs them (``display=False``); ``display_ms`` is what the numbers a viewer reads
    (p(x), q of the target's choice, p of the next token) add per round, from one more run with them."""

    methods = ["ar", *[m for m in dict.fromkeys(methods) if m != "ar"]]
    for m in methods:  # warm-up: allocations, lazy loads
        list(Generation(pair, prompts[0], m, 8, GREEDY, display=False).rounds())
    per: dict[str, list[dict]] = {m: [] for m in methods}
    for prompt in prompts:
        runs: dict[str, list[dict]] = {m: [] for m in methods}
        for _ in range(repeats):
            for m in methods:
                events = list(Generation(pair, prompt, m, max_new_tokens, GREEDY, display=False).rounds())
                busy = sum(e.draft_s + e.verify_s for e in events)
                runs[m].append(
                    {
                        "tokens": sum(len(e.emitted) for e in events),
                        "rounds": len(events),
                        "busy_ms": busy * 1000,
                        "target_ms": sum(e.target_s for e in events) * 1000,
                        "engine_ms": sum(e.engine_s for e in events) * 1000,
                        "model_ms": predicted_ms(events, costs, draft),
                    }
                )
        shown = {m: list(Generation(pair, prompt, m, max_new_tokens, GREEDY).rounds()) for m in methods}
        med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in runs.items()}
        for m in methods:
            r, a = med[m], med["ar"]
            per[m].append(
                {
                    "rounds": r["rounds"],
                    "tau": r["tokens"] / r["rounds"],
                    "draft_ms": max(0.0, r["busy_ms"] - r["target_ms"] - r["engine_ms"]) / r["rounds"],  # timer noise
                    "target_ms": r["target_ms"] / r["rounds"],
                    "engine_ms": r["engine_ms"] / r["rounds"],
                    "display_ms": 1000 * sum(e.engine_s for e in shown[m]) / len(shown[m])
                    - r["engine_ms"] / r["rounds"],
                    "measured_speedup": (r["tokens"] / r["busy_ms"]) / (a["tokens"] / a["busy_ms"]),
                    "predicted_speedup": (r["tokens"] / r["model_ms"]) / (a["tokens"] / a["model_ms"]),
                }
            )
    rows = [{"method": m, **{k: float(np.mean([p[k] for p in ps])) for k in ps[0]}} for m, ps in per.items()]
    df = pd.DataFrame(rows)
    df["gap_pct"] = 100 * (df["measured_speedup"] / df["predicted_speedup"] - 1)
    return df.round(3)


def measure_round_costs(pair: ModelPair, head=None, block: int = 2, repeats: int = 10) -> CostProfile:
    """Forward costs on this machine, the engine's per-round overhead (median over a short ``fixed:4``
    generation) and one pre-verifier call on a block of ``block`` tokens."""

    assert pair.draft is not None  # a speculative pair
    df = measure_costs(pair, {"draft": pair.draft}, repeats)
    target = df[df["what"] == "target forward"]
    draft_ms = float(df.loc[df["what"] == "draft step (draft)", "ms"].iloc[0])
    events = generate(pair, "Explain what a list is in Python.", "fixed:4", max_new_tokens=32).events
    overhead_ms = statistics.median(e.engine_s for e in events) * 1000
    head_ms = 0.0
    if head is not None:
        hidden = torch.zeros(block, head.cfg.hidden_size)
        positions = torch.arange(1, block + 1)
        if getattr(head.cfg, "design", "") == "paper":
            embeds = torch.zeros(block, head.cfg.hidden_size) if head.cfg.use_token else None
            head_ms = median_ms(lambda: head.predict(hidden, embeds, positions), 50)
        else:
            feats = head.prob_features(torch.full((block,), 0.5)) if head.cfg.use_token_prob else None
            head_ms = median_ms(lambda: head.predict(hidden, positions, feats), 50)
    return CostProfile(
        tuple(int(t) for t in target["tokens"]),
        tuple(float(m) for m in target["ms"]),
        draft_ms,
        overhead_ms,
        head_ms,
        name=f"this machine · {pair.precision}",
        source="quick",
    )
