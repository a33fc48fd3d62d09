"""The analyzer's per-prompt records: ``ar`` and one method on every prompt of a set, kept as events.

Where :mod:`spec_core.analysis.bench` keeps medians of repeated runs (the speed measurement), a record keeps
one run's events per method, so that any prompt can be replayed token by token, saved to a JSON-lines events
file and loaded back. The table's numbers come from the events alone (:class:`~spec_core.core.types.Stats`), with
the same definitions as the benchmark: speedup over ``ar`` of the same prompt, ``first_divergence`` (the 1-based new token
where the method first parts from ``ar``; blank when it wrote exactly ``ar``'s tokens).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent, SamplingConfig, Stats
from spec_core.engine.loop import Generation
from spec_core.engine.methods import MethodSpec, parse_method
from spec_core.engine.session import divergence_token, event_record, events_to_jsonl, read_events_jsonl, speedup
from spec_core.serve import spec_bench
from spec_core.serve.live import LiveFrame

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

TABLE_COLUMNS = [
    "prompt_id",
    "category",
    "prompt",
    "method",
    "new_tokens",
    "tau",
    "alpha",
    "tokens_per_s",
    "ar_tokens_per_s",
    "speedup_vs_ar",
    "first_divergence",
    "note",
]
NOISE_NOTE = "noise: the plain run was slowed (measured speedup above τ)"
SUMMARY_COLUMNS = [
    "method",
    "prompts",
    "new_tokens",
    "tau",
    "alpha",
    "tokens_per_s",
    "speedup_vs_ar",
    "median_speedup_vs_ar",
    "same_as_ar",
]
PROMPT_CHARS = 60  # the prompt column shows this many characters
HEADERS = {  # a column → its header on screen (the CSV keeps the column names)
    "prompt_id": "prompt id",
    "new_tokens": "new tokens",
    "tau": "τ",
    "alpha": "α",
    "tokens_per_s": "tokens/s",
    "ar_tokens_per_s": "ar tokens/s",
    "speedup_vs_ar": "speedup vs ar",
    "first_divergence": "parts from ar at token",
    "median_speedup_vs_ar": "median speedup vs ar",
    "same_as_ar": "same text as ar",
    "overall": "median speedup vs ar",
}
DECIMALS = {
    "tau": 3,
    "alpha": 3,
    "speedup_vs_ar": 3,
    "median_speedup_vs_ar": 3,
    "tokens_per_s": 2,
    "ar_tokens_per_s": 2,
}


@dataclass(frozen=True)
class PromptRecord:
    """One prompt's runs: method → its events, in round order."""

    prompt_id: str
    prompt: str
    category: str
    temperature: float
    lanes: Mapping[str, tuple[RoundEvent, ...]]


Records = Mapping[str, PromptRecord]  # prompt id → record, in prompt order


def run_records(
    pair: ModelPair,
    prompts: Sequence[dict],  # rows: prompt, id, category, and a history of turns
    spec: MethodSpec,
    max_new_tokens: int,
    sampling: SamplingConfig,
) -> Iterator[dict[str, PromptRecord]]:
    """Run ``ar`` and ``spec`` on every prompt, one after the other; yield all records so far after each prompt.
    A row with a ``history`` (an MT-bench second turn) runs with its earlier turns in the context, the target's
    greedy answers to them filled in (:func:`spec_bench.answer_first_turns`)."""
    methods = {"ar": parse_method("ar"), spec.name: spec}
    records: dict[str, PromptRecord] = {}
    for row in spec_bench.answer_first_turns(pair, prompts, max_new_tokens):
        lanes = {}
        for name, method in methods.items():
            try:
                run = Generation(pair, row["prompt"], method, max_new_tokens, sampling, history=row.get("history"))
                lanes[name] = tuple(run.rounds())
            except (SpecScopeError, ImportError, FileNotFoundError) as err:
                raise SpecScopeError(f"prompt {row['id']!r}, {name}: {err}") from err
        records[row["id"]] = PromptRecord(
            row["id"], row["prompt"], row.get("category", ""), sampling.temperature, lanes
        )
        yield dict(records)


def _tokens(events: Sequence[RoundEvent]) -> list[int]:
    return [t for e in events for t in e.emitted]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PROMPT_CHARS else text[: PROMPT_CHARS - 1] + "…"


def above_tau_note(measured: float | None, tau: float) -> str:
    """A speedup above τ cannot come from the method: a round costs at least one plain step, so at most τ tokens
    come per step's time. Above it, the plain run it is measured against was slowed (the machine was busy)."""
    return NOISE_NOTE if measured is not None and tau > 0 and measured > tau * 1.001 else ""


def table_rows(records: Records, method: str | None = None) -> pd.DataFrame:
    """One row per prompt and non-ar method: τ, α, tokens/s and speedup against the same prompt's ar run."""
    rows = []
    for pid, rec in records.items():
        ar = rec.lanes.get("ar")
        base = Stats.from_events(ar, method="ar") if ar else None
        for m, events in rec.lanes.items():
            if (m == "ar" and len(rec.lanes) > 1) or (method and m != method):
                continue
            s = Stats.from_events(events, method=m)
            sp = speedup(s, base)
            rows.append(
                [
                    pid,
                    rec.category,
                    _short(rec.prompt),
                    m,
                    s.new_tokens,
                    s.tau,
                    s.acceptance_rate,
                    s.tokens_per_s,
                    base.tokens_per_s if base else None,
                    sp,
                    divergence_token(_tokens(events), _tokens(ar)) if ar else "no ar",  # nothing to compare with
                    above_tau_note(sp, s.tau),
                ]
            )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _pooled(records: Records, method: str) -> Stats:
    """One method's events over every prompt, as if one long run (τ, α and tokens/s pooled, not averaged)."""
    events = [e for rec in records.values() for e in rec.lanes.get(method, ())]
    return Stats.from_events(events, method=method)


def summary_rows(records: Records) -> pd.DataFrame:
    """The summary row of each method: pooled totals over all prompts, the median speedup, how many match ar."""
    table = table_rows(records)
    rows = []
    for m in dict.fromkeys(table["method"]):
        mine = table[table["method"] == m]
        s, base = _pooled(records, m), _pooled(records, "ar")
        sp = speedup(s, base) if m != "ar" else None
        speeds = [x for x in mine["speedup_vs_ar"] if x is not None and x == x]
        same = int(mine["first_divergence"].isna().sum())
        rows.append(
            [
                m,
                len(mine),
                s.new_tokens,
                s.tau,
                s.acceptance_rate,
                s.tokens_per_s,
                sp,
                statistics.median(speeds) if speeds else None,
                f"{same}/{len(mine)}",
            ]
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def board_rows(records: Records, table: pd.DataFrame) -> pd.DataFrame | None:
    """Spec-Bench's per-category table of the rows (None when no prompt has a category), its τ the summary's:
    pooled over every prompt (:func:`_pooled`), not Spec-Bench's mean of per-prompt τ, so one τ reads the same
    in both tables."""
    if table.empty or not table["category"].fillna("").astype(str).ne("").any():
        return None
    board = spec_bench.leaderboard(table, speedup="speedup_vs_ar")
    board = board.drop(columns="mean accepted tokens")
    board.insert(len(board.columns) - 1, "tau", [_pooled(records, str(m)).tau for m in board.index])
    return board.reset_index()


def headers(columns: Sequence[str]) -> list[str]:
    """Columns' headers on screen (:data:`HEADERS`)."""
    return [HEADERS.get(c, c) for c in columns]


def shown(df: pd.DataFrame | None) -> pd.DataFrame | None:
    """A table as the Analyzer shows it: every number rounded here, once (the rows keep full precision, so a
    median is taken before any rounding), and readable headers (:data:`HEADERS`)."""
    if df is None:
        return None
    out = df.copy()
    for col in out.columns:
        places = DECIMALS.get(col, 3 if col not in ("prompts", "new_tokens", "first_divergence") else None)
        if places is not None and pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col].round(places)
    return out.rename(columns=HEADERS)


def records_jsonl(records: Records) -> str:
    """Every event of every record, one JSON line each, with the prompt's metadata."""
    lines = []
    for pid, rec in records.items():
        meta = {"prompt_id": pid, "category": rec.category, "prompt": rec.prompt, "temperature": rec.temperature}
        for events in rec.lanes.values():
            lines += [event_record(e, **meta) for e in events]
    return events_to_jsonl(lines)


def records_from_file(path: str | Path) -> dict[str, PromptRecord]:
    """Records back from :func:`records_jsonl`'s output; raises :class:`SpecScopeError` on a bad file."""
    metas: dict[str, dict] = {}
    lanes: dict[str, dict[str, list[RoundEvent]]] = {}
    for meta, event in read_events_jsonl(path):
        pid = str(meta.get("prompt_id", "run"))
        metas.setdefault(pid, meta)
        lanes.setdefault(pid, {}).setdefault(event.method, []).append(event)
    return {
        pid: PromptRecord(
            pid,
            str(meta.get("prompt", "")),
            str(meta.get("category", "")),
            float(meta.get("temperature", 0.0)),
            {m: tuple(ev) for m, ev in lanes[pid].items()},
        )
        for pid, meta in metas.items()
    }


def write_downloads(records: Records, table: pd.DataFrame, out_dir: str | Path | None = None) -> tuple[str, str]:
    """The table as CSV and the events as JSONL, in ``out_dir`` (a fresh temporary folder by default). The screen
    shows the first characters of each prompt; the CSV keeps every prompt whole."""
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="specscope-"))
    csv_path, jsonl_path = out / "specscope_analyzer.csv", out / "specscope_events.jsonl"
    if "prompt" in table and "prompt_id" in table:
        whole = {str(pid): r.prompt for pid, r in records.items()}
        table = table.assign(prompt=[whole.get(str(pid), shown) for pid, shown in zip(table.prompt_id, table.prompt)])
    table.to_csv(csv_path, index=False)
    jsonl_path.write_text(records_jsonl(records), encoding="utf-8")
    return str(csv_path), str(jsonl_path)


def record_for(records: Records | None, prompt_id: str) -> PromptRecord:
    """The record to replay; a clear error for a missing run."""
    if not records:
        raise SpecScopeError("run a prompt set or load an events file first")
    if prompt_id not in records:
        raise SpecScopeError(f"no run for prompt {prompt_id!r}")
    return records[prompt_id]


def replay_frame(record: PromptRecord) -> LiveFrame:
    """A finished live frame of one record, for the analyzer's replay: the method's lane first, then ``ar``."""
    methods = tuple(sorted(record.lanes, key=lambda m: m == "ar"))
    return LiveFrame(methods, record.lanes, done=True, temperature=record.temperature, status="replay")
