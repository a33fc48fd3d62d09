"""The arithmetic per machine, as far as it is known: the CPU's flags, this machine's cached cost table, and
``auto``'s choice from it. Nothing here measures (that is :mod:`spec_core.analysis.machine`, above the engine).

Whether speculation pays depends on the price of verifying: a target pass over k tokens against one plain step.
That price is a fact of the machine, not of the method. Measured on this project's machines (docs/LOG.md,
"Arithmetic per machine"): on an AVX2 CPU without native bfloat16 a bf16 pass over 4 tokens costs 2.2 one-token
steps, so every speculative lane loses; weight-only int8 (:mod:`spec_core.model.int8`) keeps it near 1.3, and a CPU
with AMX runs bf16 passes over 16 tokens at 1.3 steps.

The table lives under ``$SPECSCOPE_CACHE`` keyed by the CPU, the thread count and the torch version.
:func:`spec_core.core.cost_tables.auto_precision` picks the precision under which the default speculative lane is predicted fastest (plain
decoding of every precision is the yardstick), so ``auto`` is the fastest lane this machine can run, and the
choice is shown with the numbers that made it. Before this machine's table is measured, the table shipped for its
CPU kind answers (:mod:`spec_core.core.cost_tables`); nothing here measures or times.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import time
from pathlib import Path

import torch

from spec_core.core.assets import cache_dir
from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError

PRECISION_ENV = "SPECSCOPE_PRECISION"  # set to a precision to skip the measurement (e.g. a Space with known costs)
CPU_PRECISIONS = ("bfloat16", "float32", "int8")
UNMEASURED_CPU_PRECISION = "int8"  # ``auto`` on a CPU whose table is not measured yet: the choice every measured
# table of this project's CPUs made (an AVX2 EPYC and an AMX Xeon, docs/LOG.md "Arithmetic per machine")
VERSION = 5  # bump when what is measured changes: old tables are then measured again (5: row plans probed per CPU)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def cpu_family() -> str:
    """The CPU's vendor and family (``/proc/cpuinfo``: "AuthenticAMD family 25"; "" where it cannot be read): two
    CPUs with the same vector units may still price a pass differently (an AMD Zen 4 runs AVX-512 on 256-bit
    halves, a Zen 5 on full 512-bit units), so a shipped table records the family it was measured on."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, value = (line.split(":", 1) + [""])[:2]  # "cpu family\t: 25"
            key = key.strip()
            if key in ("vendor_id", "cpu family") and key not in fields:
                fields[key] = value.strip()
            if len(fields) == 2:
                break
    except OSError:
        return ""
    if len(fields) < 2:
        return ""
    return f"{fields['vendor_id']} family {fields['cpu family']}"


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
    return cache_dir() / "machine-costs" / f"{machine_key()}.json"


def save_table(profiles: dict[str, CostProfile], provisional: bool = False) -> Path:
    """Write this machine's table (precision → profile) where :func:`cached_machine_costs` reads it."""
    path = table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "cpu": cpu_name(),
                "family": cpu_family(),  # a shipped copy of this table is matched to CPUs of its family
                "threads": torch.get_num_threads(),
                "date": time.strftime("%Y-%m-%d"),
                "provisional": provisional,
                "profiles": {k: json.loads(v.to_json()) for k, v in profiles.items()},
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    tmp.replace(path)
    return path


def read_table(path: Path) -> dict[str, CostProfile]:
    """Precision → profile from a cost table file (this machine's cached one, or a shipped
    ``assets/results/costs/*.json``: ``{"profiles": {precision: profile}}``); a one-line error for anything else."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return {k: CostProfile.from_dict(v) for k, v in raw["profiles"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise SpecScopeError(f"{path} is not a cost table ({type(err).__name__}: {err})") from err


def cached_machine_costs() -> dict[str, CostProfile] | None:
    """This machine's table if it was measured already (never measures: for views that must not wait); a damaged
    table reads as None (measured again)."""
    path = table_path()
    if not path.exists():
        return None
    try:
        return read_table(path)
    except SpecScopeError:
        return None


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
