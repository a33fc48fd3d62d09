"""Measuring this machine's arithmetic: ``python -m spec_core costs --machine``, and what ``auto`` reads.

Whether speculation pays depends on the price of verifying: a target pass over k tokens against one plain step.
:func:`machine_costs` measures, per precision, the target's forward over 1…8 tokens, one draft step, the engine's
own work and the draft's acceptance on two short prompts (it runs the engine, so it lives here, above it), and
writes the table that :mod:`spec_core.core.precision` reads and ``auto`` chooses from. It is
never on a request's path: the runs read tables as data (:mod:`spec_core.core.cost_tables`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from spec_core.core.cost_model import CostProfile, profile_from_events
from spec_core.core.precision import (
    CPU_PRECISIONS,
    cached_machine_costs,
    cpu_name,
    save_table,
)
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.model.invariance import is_batch_invariant
from spec_core.model.models import load_pair
from spec_core.model.pass_timing import CONTEXT, target_forward_ms

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

PROBE_PROMPTS = (  # the first prompts of the project's benchmark set (prompts/specscope.jsonl), code and math
    "Write a Python function that returns the list of prime numbers below n.",
    "A bakery makes 48 muffins each morning and sells them in boxes of 6. If 3 boxes are left unsold, how many "
    "muffins were sold?",
)
PROBE_METHOD = "fixed:3"
PROBE_TOKENS = 32


def measure_profile(pair: ModelPair, repeats: int = 6) -> CostProfile:
    """This machine's :class:`CostProfile` for ``pair`` at its precision, with the acceptance its draft reached
    (``extra["acceptance"]``) on the probe prompts."""

    widths = target_forward_ms(pair, repeats=repeats, fastest=True)
    lanes, drafted, accepted = {}, 0, 0
    for i, prompt in enumerate(PROBE_PROMPTS):
        for method in ("ar", PROBE_METHOD):
            run = Generation(pair, prompt, method, PROBE_TOKENS, SamplingConfig(), display=False)
            events = list(run.rounds())
            lanes[f"{method}#{i}"] = events
            drafted += sum(e.draft_len for e in events)
            accepted += sum(e.accepted for e in events)
    rounds = profile_from_events(lanes)
    draft_ms = rounds.draft_ms if rounds is not None else 0.0
    engine_ms = rounds.engine_ms if rounds is not None else 0.0
    return CostProfile(
        name=f"this machine · {pair.precision}",
        widths=tuple(widths),
        target_ms=tuple(widths.values()),
        draft_ms=draft_ms,
        engine_ms=engine_ms,
        about=f"measured on {cpu_name()}, {torch.get_num_threads()} thread(s), context {CONTEXT} tokens, "
        f"{'batch-invariant' if is_batch_invariant(pair.target) else 'plain'} target passes",
        extra={"acceptance": accepted / drafted if drafted else 0.0, "precision": pair.precision},
    )


PROC_STAT_CPU = re.compile(r"cpu(\d+)((?:\s+\d+){8})")  # one CPU's line of /proc/stat: its number, 8 tick counts
BUSY_CORES = 0.25  # others' demand on our cores beyond what our threads leave free that marks a busy machine


def cpu_times() -> dict[int, tuple[int, int]] | None:
    """Per CPU: (busy, total) clock ticks since boot from ``/proc/stat``; busy leaves out idle, I/O wait and
    *niced* work (a background job at low priority yields to a measurement). None off Linux."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    out = {}
    for line in lines:
        row = PROC_STAT_CPU.match(line)  # "cpuN user nice system idle iowait irq softirq steal …"
        if row is not None:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(f) for f in row.group(2).split())
            busy = user + system + irq + softirq + steal
            out[int(row.group(1))] = (busy, busy + nice + idle + iowait)
    return out or None


def others_demand(before: dict, after: dict, own_cpu_s: float, cpus: set[int]) -> float:
    """Cores' worth of other processes' (un-niced) work on ``cpus`` between two :func:`cpu_times` readings, our own
    process's ``own_cpu_s`` taken out."""
    busy = sum(after[c][0] - before[c][0] for c in cpus if c in before and c in after)
    ticks = sum(after[c][1] - before[c][1] for c in cpus if c in before and c in after)
    if ticks <= 0:
        return 0.0
    hz = os.sysconf("SC_CLK_TCK")
    span_s = ticks / hz / max(len(cpus), 1)  # the wall time the readings span
    return max(busy / hz - own_cpu_s, 0.0) / max(span_s, 1e-9)


def busy_reason(demand: float, cpus: int, threads: int) -> str:
    """Why a table measured with others' ``demand`` (cores) beside our ``threads`` on ``cpus`` cores is not kept,
    or "" when it is: others took more than what our threads left free (plus :data:`BUSY_CORES`)."""
    if demand <= max(cpus - threads, 0) + BUSY_CORES:
        return ""
    return (
        f"the machine was busy while measuring (other processes used {demand:.1f} of the {cpus} core(s) this "
        f"process may run on, beside its {threads} thread(s)), so this table is kept as provisional: run "
        "`python -m spec_core costs --machine` again when the machine is quiet"
    )


_MEASURED_HERE: dict[str, dict[str, CostProfile]] = {}  # pair name → the table this process measured (once)


def machine_costs(pair_name: str = "embedded", refresh: bool = False) -> dict[str, CostProfile]:
    """Precision → this machine's measured profile, written where :mod:`spec_core.core.cost_tables` reads it. Explicit
    only (``costs --machine``, ``make costs``, the app's background task): no request's path calls it. A cached
    table (or the one this process measured) answers unless ``refresh`` asks to measure again.

    Each pass is the fastest of its repeats (load only ever adds time). A table timed while other processes
    competed for our cores (:func:`busy_reason`) is still written, marked provisional (``extra["busy"]``) and
    said on stderr: the runs price with it, say so, and the next ``costs --machine`` on a quiet machine replaces
    it, rather than every call timing the machine again."""
    if not refresh and pair_name in _MEASURED_HERE:
        return _MEASURED_HERE[pair_name]
    cached = None if refresh else cached_machine_costs()
    if cached:
        return cached  # (a damaged table reads as None: measured again)

    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    before, own = cpu_times(), time.process_time()
    profiles = {}
    for precision in CPU_PRECISIONS:
        pair = load_pair(pair_name, device="cpu", dtype=precision, operator=True)
        profiles[precision] = measure_profile(pair)
    after = cpu_times()
    demand = others_demand(before, after, time.process_time() - own, cpus) if before and after else 0.0
    reason = busy_reason(demand, len(cpus), torch.get_num_threads())
    if reason:
        for profile in profiles.values():
            profile.extra["busy"] = reason
        print(f"note: {reason}", file=sys.stderr, flush=True)
    save_table(profiles, provisional=bool(reason))
    _MEASURED_HERE[pair_name] = profiles
    return profiles
