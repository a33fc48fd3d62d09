"""Forward costs of the target and of each draft design, measured side by side in one process.

Reports milliseconds per call (median over repeats, after a warm-up) for a target forward over 1, 2, 4, 8 and
16 new tokens on a cached context, and for one draft step of each design (what a drafted token costs), with the
ratio draft step / one-token target forward — the c in the usual speedup estimate (Leviathan et al. 2023).
"""

from __future__ import annotations

import statistics
import time

import pandas as pd
import torch

from spec_core.cached_lm import CachedLM, LMOutput
from spec_core.drafters import FeatureDrafter, StandaloneDrafter
from spec_core.types import SamplingConfig

CONTEXT = 200  # tokens already in the cache when a forward is timed
GREEDY = SamplingConfig()


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


@torch.inference_mode()
def measure_costs(pair, drafts: dict[str, torch.nn.Module], repeats: int = 20) -> pd.DataFrame:
    """One row per measured call: ``what``, ``tokens``, ``ms``, ``relative_to_target_1``."""
    gen = torch.Generator(device=pair.device).manual_seed(0)
    vocab = pair.target.config.vocab_size
    low, high = (100, 1000) if vocab > 1000 else (0, vocab)  # ordinary token ids (any id fits a tiny test model)
    ids = torch.randint(low, high, (CONTEXT,), generator=torch.Generator().manual_seed(0)).tolist()
    target = CachedLM(pair.target)
    target.reset()
    target.forward(torch.tensor(ids), all_logits=False)
    rows = []

    def target_call(n):
        target.forward(torch.tensor(ids[:n]))
        target.crop(CONTEXT)

    for n in (1, 2, 4, 8, 16):
        rows.append({"what": "target forward", "tokens": n, "ms": _median_ms(lambda n=n: target_call(n), repeats)})
    base = rows[0]["ms"]
    for name, draft in drafts.items():
        drafter = FeatureDrafter(draft) if hasattr(draft, "fc") else StandaloneDrafter(draft)
        probe = CachedLM(pair.target, layers=drafter.target_layers)  # the states this drafter reads
        prefill = probe.forward(torch.tensor([ids[0]]))  # any target output: features for the feature draft
        repeat = lambda t: torch.cat([t] * (CONTEXT - 1)) if t is not None else None  # noqa: E731
        drafter.reset(ids, LMOutput(prefill.logits, repeat(prefill.hidden), repeat(prefill.layer_hidden)))

        def step(drafter=drafter, verified=prefill):
            drafter.propose(1, GREEDY, gen)
            drafter.commit(0, ids[-1], verified)

        rows.append({"what": f"draft step ({name})", "tokens": 1, "ms": _median_ms(step, repeats)})
    df = pd.DataFrame(rows)
    df["relative_to_target_1"] = (df["ms"] / base).round(3)
    df["ms"] = df["ms"].round(2)
    return df
