"""Timing a model's passes: a target forward over 1, 2, … new tokens after a cached context, timed round-robin.

The measured pass costs are the facts every speed prediction rests on (:mod:`spec_core.cost_model`): the table
``auto`` reads (:mod:`spec_core.analysis.machine`), ``costs`` (:mod:`spec_core.analysis.costs`) and a lane's own step
(:mod:`spec_core.lane_speed`). This module runs one model at a time through :class:`~spec_core.cached_lm.CachedLM`;
it never runs the engine.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from spec_core.models import ModelPair

WIDTHS = (1, 2, 3, 4, 6, 8)  # the pass widths a machine's table holds
CONTEXT = 200  # tokens already cached before each timed pass


def interleaved_median_ms(calls: dict, repeats: int, fastest: bool = False) -> dict:
    """Median milliseconds of each call (its fastest repeat with ``fastest``: another process's work only ever adds
    time), timed round-robin after one warm-up each, so that a slow spell of a shared machine slows every call
    alike instead of one whole series."""
    for fn in calls.values():
        fn()
    times: dict = {k: [] for k in calls}
    for _ in range(repeats):
        for key, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[key].append((time.perf_counter() - t0) * 1000)
    return {k: (min(v) if fastest else statistics.median(v)) for k, v in times.items()}


def target_calls(pair: ModelPair, widths=WIDTHS, context: int = CONTEXT, hidden: bool = False) -> dict:
    """Width → a call that runs one target forward over that many new tokens after ``context`` cached ones, then
    crops back (ordinary token ids, seeded; any id fits a tiny test model). ``costs`` times them beside its
    draft steps; :func:`target_forward_ms` alone."""
    from spec_core.cached_lm import CachedLM

    context = max(2, int(context))
    vocab = pair.target.config.vocab_size
    low, high = (100, 1000) if vocab > 1000 else (0, vocab)
    ids = torch.randint(low, high, (context,), generator=torch.Generator().manual_seed(0))
    feed = ids.repeat(max(widths) // context + 1)  # enough tokens for the widest pass
    lm = CachedLM(pair.target, hidden=hidden)
    lm.reset()
    with torch.inference_mode():
        lm.forward(ids, all_logits=False)

    @torch.inference_mode()
    def call(n):
        lm.forward(feed[:n])
        lm.crop(context)

    return {n: (lambda n=n: call(n)) for n in sorted({1, *widths})}


def target_forward_ms(
    pair: ModelPair, widths=WIDTHS, repeats: int = 6, context: int = CONTEXT, fastest: bool = False
) -> dict[int, float]:
    """Median (or fastest) ms of a target forward over each width, ``context`` tokens already cached."""
    return interleaved_median_ms(target_calls(pair, widths, context), repeats, fastest)
