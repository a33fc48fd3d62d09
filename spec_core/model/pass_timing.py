"""Timing a model's passes: a target forward over 1, 2, … new tokens after a cached context, timed round-robin.

The measured pass costs are the facts every speed prediction rests on (:mod:`spec_core.core.cost_model`): the table
``auto`` reads (:mod:`spec_core.analysis.machine`), ``costs`` (:mod:`spec_core.analysis.costs`) and a lane's own step
(:func:`probe_profile`, for :mod:`spec_core.core.lane_speed`'s verdict). This module runs one model at a time through :class:`~spec_core.model.cached_lm.CachedLM`;
it never runs the engine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from spec_core.core.cost_model import CostProfile, profile_from_events
from spec_core.core.types import RoundEvent
from spec_core.model.cached_lm import CachedLM

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

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


def probe_profile(
    pair: ModelPair, events: Sequence[RoundEvent], target_lm, pending: int, repeats: int = 3
) -> CostProfile | None:
    """This run's costs with the plain step measured beside it: the run's own rounds give the verification, draft,
    engine and head costs, and a one-token target step is timed on the run's own cache (``target_lm``, which holds
    every token but the ``pending`` one), then cropped back: a lane run alone, as ``/generate`` runs it, has no
    ``ar`` lane to anchor it, and no second prefill is needed."""
    if not events or target_lm is None or target_lm.cache is None:
        return None
    held, token = target_lm.length, torch.tensor([pending])

    def step():
        target_lm.forward(token, all_logits=False)
        target_lm.crop(held)

    with torch.inference_mode():
        one = interleaved_median_ms({1: step}, repeats)[1]
    return profile_from_events(
        {"lane": events},
        name=f"this machine · {pair.precision}",
        about="this run's rounds, plus a one-token step timed beside them",
        one_step_ms=one,
    )
