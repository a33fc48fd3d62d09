"""The arithmetic per machine: measure each precision's costs once, cache them, and let ``auto`` pick.

Whether speculation pays depends on the price of verifying: a target pass over k tokens against one plain step.
That price is a fact of the machine, not of the method. Measured on this project's machines (docs/RESULTS.md,
"Arithmetic per machine"): on an AVX2 CPU without native bfloat16 a bf16 pass over 4 tokens costs 2.2 one-token
steps, so every speculative lane loses; weight-only int8 (:mod:`spec_core.int8`) keeps it near 1.3, and a CPU
with AMX runs bf16 passes over 16 tokens at 1.3 steps.

:func:`machine_costs` measures, per precision, the target's forward over 1…8 tokens, one draft step, the engine's
own work and the draft's acceptance on two short prompts, and caches the table under ``$SPECSCOPE_CACHE`` keyed by
the CPU, the thread count and the torch version. :func:`auto_precision` picks the precision under which the
default speculative lane is predicted fastest (plain decoding of every precision is the yardstick), so ``auto``
is the fastest lane this machine can run, and the choice is shown with the numbers that made it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from spec_core.cost_model import CostProfile, profile_from_events
from spec_core.errors import SpecScopeError

PRECISION_ENV = "SPECSCOPE_PRECISION"  # set to a precision to skip the measurement (e.g. a Space with known costs)
CPU_PRECISIONS = ("bfloat16", "float32", "int8")
WIDTHS = (1, 2, 3, 4, 6, 8)
CONTEXT = 200
PROBE_PROMPTS = (  # the first prompts of the project's benchmark set (prompts/specscope.jsonl), code and math
    "Write a Python function that returns the list of prime numbers below n.",
    "A bakery makes 48 muffins each morning and sells them in boxes of 6. If 3 boxes are left unsold, how many "
    "muffins were sold?",
)
PROBE_METHOD = "fixed:3"
PROBE_TOKENS = 32
VERSION = 4  # bump when what is measured changes: old tables are then measured again (4: batch-invariant targets)


def interleaved_median_ms(calls: dict, repeats: int) -> dict:
    """Median milliseconds of each call, timed round-robin after one warm-up each, so that a slow spell of a
    shared machine slows every call alike instead of one whole series."""
    for fn in calls.values():
        fn()
    times: dict = {k: [] for k in calls}
    for _ in range(repeats):
        for key, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[key].append((time.perf_counter() - t0) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def target_calls(pair, widths=WIDTHS, context: int = CONTEXT, hidden: bool = False) -> dict:
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


def target_forward_ms(pair, widths=WIDTHS, repeats: int = 6, context: int = CONTEXT) -> dict[int, float]:
    """Median ms of a target forward over each width, ``context`` tokens already cached."""
    return interleaved_median_ms(target_calls(pair, widths, context), repeats)


def measure_profile(pair, repeats: int = 6) -> CostProfile:
    """This machine's :class:`CostProfile` for ``pair`` at its precision, with the acceptance its draft reached
    (``extra["acceptance"]``) on the probe prompts."""
    from spec_core.engine import Generation
    from spec_core.invariance import is_batch_invariant
    from spec_core.types import SamplingConfig

    widths = target_forward_ms(pair, repeats=repeats)
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


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; none where it cannot be read), read once per process."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(next((ln for ln in text.splitlines() if ln.startswith("flags")), "").split())


def machine_key() -> str:
    """What the costs depend on: the CPU and its vector units, the thread count, torch's version."""
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma"))))
    isa = f"{os.environ.get('ATEN_CPU_CAPABILITY', '')}|{os.environ.get('ONEDNN_MAX_CPU_ISA', '')}"
    raw = f"{cpu_name()}|{flags}|{isa}|{torch.get_num_threads()}|{torch.__version__}|v{VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def table_path() -> Path:
    from spec_core.models import cache_dir

    return cache_dir() / "machine-costs" / f"{machine_key()}.json"


def machine_costs(pair_name: str = "embedded", refresh: bool = False) -> dict[str, CostProfile]:
    """Precision → this machine's measured profile (cached; ``refresh`` measures again)."""
    cached = None if refresh else cached_machine_costs()
    if cached:
        return cached  # (a damaged table reads as None: measured again)
    path = table_path()
    from spec_core.models import load_pair

    profiles = {}
    for precision in CPU_PRECISIONS:
        pair = load_pair(pair_name, device="cpu", dtype=precision, operator=True)
        profiles[precision] = measure_profile(pair)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "cpu": cpu_name(),
                "threads": torch.get_num_threads(),
                "profiles": {k: json.loads(v.to_json()) for k, v in profiles.items()},
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    tmp.replace(path)
    return profiles


def cached_machine_costs() -> dict[str, CostProfile] | None:
    """This machine's table if it was measured already (never measures: for views that must not wait)."""
    path = table_path()
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {k: CostProfile.from_dict(v) for k, v in raw["profiles"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cached_profile(precision: str | None) -> CostProfile | None:
    """This machine's cached profile for ``precision`` when one with draft costs was measured (never measures)."""
    profile = (cached_machine_costs() or {}).get(precision or "")
    return profile if profile is not None and profile.draft_ms else None


def predicted_tokens_per_s(profile: CostProfile) -> tuple[float, int]:
    """(tokens/s, k) of the best fixed window at this profile's measured acceptance: the default lane's stand-in."""
    alpha = float(profile.extra.get("acceptance", 0.0))
    k, speedup = profile.best_window(alpha)
    return 1000.0 * speedup / profile.step_ms, k


def choose(profiles: dict[str, CostProfile]) -> str:
    """The precision whose speculative lane is predicted fastest (against the fastest plain decoding of any)."""
    return max(profiles, key=lambda p: predicted_tokens_per_s(profiles[p])[0])


def explain(profiles: dict[str, CostProfile]) -> str:
    """One line per precision: plain step, verifying 4 tokens, acceptance, predicted speculative tokens/s."""
    fastest_ar = max(1000.0 / p.step_ms for p in profiles.values())
    lines = []
    for name, p in profiles.items():
        tps, k = predicted_tokens_per_s(p)
        lines.append(
            f"{name}: plain step {p.step_ms:.1f} ms, verifying 4 tokens costs {p.verify_ratio(4):.2f}× a "
            f"step, acceptance {p.extra.get('acceptance', 0):.2f} → fixed:{k} predicted {tps:.1f} tok/s "
            f"({tps / fastest_ar:.2f}× the fastest plain decoding)"
        )
    return "\n".join(lines)


def gpu_precision(device: torch.device) -> str:
    """``auto`` off the CPU, with nothing measured: bfloat16 where the GPU computes in it natively
    (``torch.cuda.is_bf16_supported()``: Ampere and later), else float16 (a T4); never int8
    (:func:`check_int8_device`). MPS: bfloat16."""
    if device.type != "cuda":
        return "bfloat16"
    try:
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    except (RuntimeError, AssertionError):  # a device that cannot be asked: bf16, native on every GPU since Ampere
        return "bfloat16"


def check_int8_device(device: torch.device | None) -> None:
    """Refuse the weight-only int8 path off the CPU. It exists for CPUs without fast bf16 (it halves the bytes a
    one-token step reads) and runs through ATen's ``_weight_int8pack_mm``; torch's CUDA builds register a CUDA
    kernel for it too (2.9.1 does), but this path was never run on a GPU, and a GPU runs bf16/fp16 at full speed."""
    if device is not None and device.type != "cpu":
        raise SpecScopeError(
            f"precision 'int8' is the CPU's weight-only int8 path (ATen's _weight_int8pack_mm), not offered on "
            f"{device.type!r}: use 'auto' (here {gpu_precision(device)}), 'bfloat16' or 'float32'"
        )


def auto_precision(device: torch.device) -> str:
    """``auto``: on a GPU :func:`gpu_precision` (bfloat16, or float16 without native bf16; never int8); on a CPU
    the precision :func:`choose` picks from this machine's cost table (measured once, ~20 s, then cached), or
    ``$SPECSCOPE_PRECISION`` when set (an int8 there is refused on a GPU by :func:`check_int8_device`)."""
    forced = os.environ.get(PRECISION_ENV, "").strip()
    if forced and forced != "auto":
        return forced
    if device.type != "cpu":
        return gpu_precision(device)
    return choose(machine_costs())
