"""Which cost table prices a run: data chosen at once, never a timing taken on a request's path.

Whether speculation pays is a fact of the machine (docs/ALGORITHMS.md §5): a target pass over k tokens against
one plain step. The engine, its drafters and its policies price their choices (``cost``'s draft length, the
hybrid's start, ``pacer``'s automatic t, ``auto``'s precision) with a :class:`~spec_core.core.cost_model.CostProfile`
that is handed to the run as data (:func:`table_for`), in this order:

0. **given** — the file ``$SPECSCOPE_COSTS`` names (a replay on another machine, the test suite);
1. **measured** — this machine's own table, written by ``python -m spec_core costs --machine``
   (:mod:`spec_core.analysis.machine`) on a quiet machine;
2. **provisional** — this machine's table timed while other processes competed for its cores: kept and said,
   rather than timed again on every call (the next ``costs --machine`` replaces it);
3. **shipped** — a table measured on a machine of the same CPU kind (AMX, AVX-512, AVX2: :func:`cpu_kind`, from
   the CPU's flags) and shipped in ``assets/results/costs/``, of the same CPU family where one ships
   (:func:`~spec_core.core.precision.cpu_family`: AMD's Zen 4 and Zen 5 share AVX-512 but not its width); the
   nearest kind when none ships for this one;
4. **model** — off the CPU, the memory-bound accelerator model (:func:`~spec_core.core.cost_model.accelerator_profile`).

Nothing here times anything. The same pair, precision, table, sampling settings and seed give the same rounds on
any load: a run records the profile it used in its first event (``RoundEvent.costs``), so a replay prices alike.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from spec_core.core import precision
from spec_core.core.assets import ASSETS_DIR
from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import draft_ratio
from spec_core.core.precision import cpu_family, cpu_flags, read_table, table_path

SHIPPED_DIR = ASSETS_DIR / "results" / "costs"
CPU_KINDS = ("amx", "avx512", "avx2", "other")  # fastest matrix units first
KIND_WORDS = {"amx": "AMX", "avx512": "AVX-512", "avx2": "AVX2", "other": "plain x86/ARM"}
COSTS_ENV = "SPECSCOPE_COSTS"  # a cost table file to price every run with (a replay elsewhere, the test suite)
MEASURE_HINT = "measure this machine: python -m spec_core costs --machine"
DEFAULT_GPU_DRAFT_RATIO = 0.05  # a draft forward's share of a target step in the GPU model (about the embedded
# feature draft's parameters over the target's; the pair's own ratio replaces it where the pair is known)


def cpu_kind(flags: frozenset[str] | set[str] | None = None) -> str:
    """The CPU's kind for costs, from its feature flags: ``amx`` (AMX tiles: bf16 passes over 16 tokens cost about
    one step), ``avx512``, ``avx2`` or ``other``."""
    flags = cpu_flags() if flags is None else flags
    if "amx_bf16" in flags or "amx_tile" in flags:
        return "amx"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "other"


@dataclass(frozen=True)
class CostTable:
    """Precision → profile, and where it comes from (``origin``: given, measured, provisional, shipped or model)."""

    profiles: Mapping[str, CostProfile]
    origin: str
    label: str  # the words a status line uses: "measured on this machine on 2026-12-06"
    path: str = ""  # the file it was read from ("" for the model)
    notes: tuple[str, ...] = field(default=())

    def profile(self, precision: str | None) -> CostProfile:
        """The profile for ``precision``; a precision the table lacks (float16 on a CPU) takes bfloat16's, then
        any, marked so in its ``about``."""
        if precision is not None and precision in self.profiles:
            return self.profiles[precision]
        fallback = "bfloat16" if "bfloat16" in self.profiles else next(iter(self.profiles))
        base = self.profiles[fallback]
        return dataclasses.replace(
            base, about=f"{base.about} (this table has no {precision}; {fallback}'s prices stand in)"
        )

    def sentence(self, precision: str, chosen_by_auto: bool) -> str:
        """One honest line: which precision, chosen how, from which table, and how to measure."""
        how = "chosen by auto" if chosen_by_auto else "as asked"
        hint = "" if self.origin in ("measured", "model", "given") else f"; {MEASURE_HINT}"
        return f"precision {precision} ({how}), priced with the cost table {self.label}{hint}"


def _load(path: Path) -> tuple[dict[str, CostProfile], dict]:
    """(profiles, the file's raw fields), read once per version of the file (a run reads its table at once; a
    benchmark or a test that starts thousands of runs must not parse it thousands of times)."""
    stat = path.stat()
    return _load_version(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _load_version(path: str, mtime_ns: int, size: int) -> tuple[dict[str, CostProfile], dict]:
    profiles = read_table(Path(path))  # first: anything but a table is a one-line error
    return profiles, json.loads(Path(path).read_text(encoding="utf-8"))


def _file_date(path: Path, raw: dict) -> str:
    return str(raw.get("date") or time.strftime("%Y-%m-%d", time.localtime(path.stat().st_mtime)))


def machine_table() -> CostTable | None:
    """This machine's own table (measured or provisional) when ``costs --machine`` wrote one; never measures."""
    path = table_path()
    if not path.exists():
        return None
    try:
        profiles, raw = _load(path)
    except (SpecScopeError, OSError, ValueError, KeyError, TypeError):
        return None  # a damaged table reads as none (the next `costs --machine` writes it again)
    date = _file_date(path, raw)
    threads = raw.get("threads", "?")
    busy = raw.get("provisional") or any("busy" in p.extra for p in profiles.values())
    if busy:
        label = f"timed on this machine on {date} while it was busy ({threads} thread(s); provisional)"
        named = {k: dataclasses.replace(p, name=f"this machine (provisional) · {k}") for k, p in profiles.items()}
        return CostTable(named, "provisional", label, str(path))
    return CostTable(dict(profiles), "measured", f"measured on this machine on {date} ({threads} thread(s))", str(path))


def shipped_tables(folder: Path = SHIPPED_DIR) -> dict[str, list[tuple[Path, str]]]:
    """CPU kind → the tables shipped for it (``assets/results/costs/*.json``; its kind from its recorded flags),
    each with the CPU family it was measured on ("" where it does not say), in file-name order."""
    out: dict[str, list[tuple[Path, str]]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            raw = _load(path)[1]
        except (OSError, ValueError, SpecScopeError):
            continue
        kind = raw.get("kind") or cpu_kind(frozenset(str(raw.get("flags", "")).split()))
        out.setdefault(kind, []).append((path, str(raw.get("family", ""))))
    return out


def shipped_table(kind: str | None = None, folder: Path = SHIPPED_DIR, family: str | None = None) -> CostTable | None:
    """The table shipped for this CPU's kind, measured on its family where one was (:func:`cpu_family`: vector
    units alike may price a pass unlike), else for the nearest kind (said so); None when none ships."""
    kind = kind or cpu_kind()
    family = cpu_family() if family is None else family
    tables = shipped_tables(folder)
    if not tables:
        return None
    start = CPU_KINDS.index(kind) if kind in CPU_KINDS else len(CPU_KINDS) - 1
    order = sorted(CPU_KINDS, key=lambda k: (abs(CPU_KINDS.index(k) - start), CPU_KINDS.index(k)))
    chosen = next(k for k in order if k in tables)
    path = next((p for p, f in tables[chosen] if family and f == family), tables[chosen][0][0])
    loaded, raw = _load(path)
    machine = raw.get("machine", "a reference machine")
    if raw.get("family"):  # which of the kind's tables answered: two EPYCs of one kind can differ
        machine = f"{machine}, {raw['family']}"
    where = f"shipped for {KIND_WORDS[chosen]} CPUs ({machine}, {raw.get('threads', '?')} thread(s), {_file_date(path, raw)})"
    notes = () if chosen == kind else (f"no table ships for this CPU's kind ({KIND_WORDS.get(kind, kind)})",)
    if notes:
        where += f", the nearest to this {KIND_WORDS.get(kind, kind)} CPU"
    elif family and raw.get("family") and raw.get("family") != family:
        where += f", measured on another family than this {family}"
    profiles = {
        precision: dataclasses.replace(
            profile, name=f"the {KIND_WORDS[chosen]} reference · {precision}", source="reference"
        )
        for precision, profile in loaded.items()
    }
    return CostTable(profiles, "shipped", where, str(path), notes)


def gpu_table(draft_ratio: float | None = None) -> CostTable:
    """Off the CPU: the memory-bound accelerator model, one profile for every precision (no clock)."""
    profile = accelerator_profile(draft_ratio if draft_ratio is not None else DEFAULT_GPU_DRAFT_RATIO)
    profiles = {p: profile for p in ("bfloat16", "float16", "float32")}
    return CostTable(profiles, "model", "of the accelerator model (a pass over a few tokens costs one step)")


def given_table(path: str | Path, named_by: str = f"${COSTS_ENV}") -> CostTable:
    """A table named by the user (``$SPECSCOPE_COSTS``, or a script's ``--table``: ``named_by``): any cost table
    file, e.g. a shipped one or another machine's ``machine-costs/*.json``; a one-line error for a file that is not
    one."""
    path = Path(path)
    if not path.is_file():
        raise SpecScopeError(f"{named_by} names {str(path)!r}, which is not a file (a cost table: {SHIPPED_DIR})")
    profiles = {
        precision: dataclasses.replace(profile, name=f"{path.name} · {precision}", source="reference")
        for precision, profile in _load(path)[0].items()
    }
    return CostTable(profiles, "given", f"given in {named_by} ({path.name})", str(path))


def table_for(device: torch.device | str = "cpu", draft_ratio: float | None = None) -> CostTable:
    """The table that prices runs on ``device``: the one ``$SPECSCOPE_COSTS`` names, else measured, provisional,
    shipped (CPU), or the model (GPU)."""
    given = os.environ.get(COSTS_ENV, "").strip()
    if given:
        return given_table(given)
    if torch.device(device).type != "cpu":
        return gpu_table(draft_ratio)
    table = machine_table() or shipped_table()
    if table is None:
        raise SpecScopeError(f"no cost table: none measured here and none in {SHIPPED_DIR}; {MEASURE_HINT}")
    return table


def run_costs(pair) -> tuple[CostProfile, CostTable]:
    """(profile, table) for one run on ``pair``: the table for its device, the profile for its precision."""

    model = pair.device.type != "cpu" and not os.environ.get(COSTS_ENV, "").strip()  # the GPU model needs the ratio
    ratio = draft_ratio(pair) if model and getattr(pair, "draft", None) is not None else None
    table = table_for(pair.device, ratio)
    return table.profile(getattr(pair, "precision", None)), table


def recorded_costs(lanes: Mapping[str, list]) -> CostProfile | None:
    """The profile a run was priced with, from its first event (``RoundEvent.costs``); None for an older run."""
    for events in lanes.values():
        for event in events[:1]:
            raw = getattr(event, "costs", None)
            if raw:
                return CostProfile.from_dict(raw)
    return None


def auto_precision(device: torch.device) -> str:
    """``auto``: on a GPU :func:`gpu_precision` (bfloat16, or float16 without native bf16; never int8); on a CPU
    the precision :func:`~spec_core.core.precision.choose` picks from the cost table in force (this machine's, measured or provisional, else
    the one shipped for its CPU kind: :func:`table_for`), read at once and never timed;
    :data:`~spec_core.core.precision.UNMEASURED_CPU_PRECISION` only when no table can be read at all; ``$SPECSCOPE_PRECISION`` when set (an
    int8 there is refused on a GPU by :func:`~spec_core.core.precision.check_int8_device`)."""
    forced = os.environ.get(precision.PRECISION_ENV, "").strip()
    if forced and forced != "auto":
        return forced
    if device.type != "cpu":
        return precision.gpu_precision(device)
    try:
        return precision.choose(dict(table_for(device).profiles))
    except SpecScopeError:
        return precision.UNMEASURED_CPU_PRECISION
