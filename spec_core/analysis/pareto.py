"""Acceptance vs quality of the verifiers on the evaluation split: ``python -m spec_core pareto``.

DIVERSED (arXiv 2604.07622) compares its learned ensemble with the static-ensemble sweep W ∈ {0, 0.1, …, 1}
(which lies on the linear Pareto front of Yin et al., arXiv 2411.00841), the lenient "lossy" rule and the
lossless rule, on the same prompts. One row per configuration: ``method, param, acceptance_rate, quality, tau``
(+ per-task quality, speed, and the expected accepted count).

Expected accepted drafts per round, from the recorded rounds (paper's Theorem, no i.i.d. assumption):
E[#accepted] = Σ_k E[Π_{i≤k} a_i] with a_i = 1 − TV(q_i, ν_i) (``expected_accept`` in the verifier trace).
Beside it: Σ_k Π_{i≤k} β_i with β_i the recorded acceptance probability of the drafted token (an unbiased
estimate of the measured count given the drafts), the i.i.d. formula α(1 − α^γ)/(1 − α) with the mean a, and
the measured mean. Generations are interleaved item by item across configurations, so machine noise hits all
of them alike; ``tokens_per_s`` ratios are comparable within one run only.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch
from tqdm import tqdm

from spec_core.core import rules
from spec_core.core.assets import HEADS_DIR, available
from spec_core.core.cli_args import add_threads
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.engine.methods import parse_method, spec_of
from spec_core.engine.rewards import TASKS, load_items, run_item
from spec_core.heads.ensemble import shipped_head
from spec_core.model.models import load_pair
from spec_core.serve.sweeps import with_frontier

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

COLUMNS = [
    "method",
    "param",
    "acceptance_rate",
    "quality",
    "tau",
    *(f"quality_{t}" for t in TASKS),
    "measured_accepted",
    "expected_accepted",
    "rb_expected_accepted",
    "iid_expected_accepted",
    "mean_draft_len",
    "mean_w",
    "new_tokens",
    "wall_s",
    "tokens_per_s",
    "verify_ms_per_round",
    "items",
    "temperature",
    "policy",
]
LENIENCIES = (0.3, 0.5, 0.7)
STATIC_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))


@dataclass(frozen=True)
class Config:
    method: str  # "lossless" | "lenient" | "static" | "diversed"
    param: str  # "" | ℓ | W | head name
    verifier: str  # the verifier part of the method name

    def full(self, policy: str) -> str:
        return f"{policy}+{self.verifier}"

    @classmethod
    def parse(cls, method: str) -> Config:
        """The configuration of a verifier part ("static:0.7") or a whole method ("fixed:4+static:0.7")."""
        verifier = spec_of(method).verifier
        if verifier is None:
            raise SpecScopeError(f"{method!r} has no verifier to sweep; try static:0.7 or fixed:4+lenient:0.5")
        return cls(verifier.family, verifier.arg, verifier.text)


def default_configs(t0: str, diversed_head: str | None) -> list[Config]:
    opt = "" if t0 == "argmax" else f",t0={t0}"
    out = [Config("lossless", "", "lossless")]
    out += [Config("lenient", f"{v:g}", f"lenient:{v:g}{opt}") for v in LENIENCIES]
    out += [Config("static", f"{w:g}", f"static:{w:g}{opt}") for w in STATIC_WEIGHTS]
    if diversed_head:
        sep = "," if opt else ""
        out.append(Config("diversed", diversed_head, f"diversed:head={diversed_head}{sep}{opt.lstrip(',')}"))
    return out


def summarise(config: Config, policy: str, temperature: float, raw: list[dict]) -> dict:
    """One CSV row from the per-item records of one configuration."""
    quality = {
        t: statistics.fmean([r["reward"] for r in raw if r["task"] == t])
        for t in TASKS
        if any(r["task"] == t for r in raw)
    }
    rounds: dict[str, list] = {k: sum((r["rounds"][k] for r in raw), []) for k in raw[0]["rounds"]}
    drafted, accepted = sum(rounds["gamma"]), sum(rounds["measured"])
    forwards, new_tokens = sum(r["forwards"] for r in raw), sum(r["new_tokens"] for r in raw)
    wall = sum(r["wall_s"] for r in raw)
    alpha = statistics.fmean(rounds["a"]) if rounds["a"] else float("nan")
    iid = [rules.iid_expected_accepted(alpha, int(g)) for g in rounds["gamma"]] if rounds["a"] else []
    mean = lambda xs: statistics.fmean(xs) if xs else float("nan")  # noqa: E731
    return {
        "method": config.method,
        "param": config.param,
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "quality": statistics.fmean(quality.values()),  # macro average over tasks
        "tau": new_tokens / forwards if forwards else 0.0,
        **{f"quality_{t}": quality.get(t, float("nan")) for t in TASKS},
        "measured_accepted": mean(rounds["measured"]),
        "expected_accepted": mean(rounds["expected"]),
        "rb_expected_accepted": mean(rounds["rb"]),
        "iid_expected_accepted": mean(iid),
        "mean_draft_len": mean(rounds["gamma"]),
        "mean_w": mean(rounds["w"]),
        "new_tokens": new_tokens,
        "wall_s": wall,
        "tokens_per_s": new_tokens / wall if wall else 0.0,
        "verify_ms_per_round": 1000 * sum(r["verify_s"] for r in raw) / max(1, len(rounds["gamma"])),
        "items": len(raw),
        "temperature": temperature,
        "policy": policy,
    }


_WORKER: dict = {}  # the pair a worker process loaded once (see run_pareto)


def _worker_init(load_pair: Callable[[], ModelPair], threads: int) -> None:
    torch.set_num_threads(threads)
    _WORKER["pair"] = load_pair()


def _worker_item(n: int, item, methods: list[str], temperature: float, seed: int) -> tuple[int, list[dict]]:
    return n, [run_item(_WORKER["pair"], m, item, temperature, seed + n) for m in methods]


def run_pareto(
    pair: ModelPair | Callable[[], ModelPair],
    configs: list[Config],
    items,
    policy: str,
    temperature: float,
    seed: int,
    raw_path: Path | None = None,
    progress: bool = True,
    partial_path: Path | None = None,
    workers: int = 1,
    threads: int = 1,
) -> pd.DataFrame:
    """Run every configuration on every item and summarise one row per configuration.

    ``pair`` is a loaded pair, or a picklable zero-argument loader (``functools.partial(load_pair, ...)``). With
    ``workers`` > 1 (a loader needed) items are shared among that many processes of ``threads`` threads each, every
    process running all configurations on its items in turn. Item n is always generated with seed ``seed + n``,
    so the table does not depend on the number of workers.
    """

    for c in configs:
        parse_method(c.full(policy))  # fail before any generation
    if workers > 1 and not callable(pair):
        raise SpecScopeError("workers > 1 need a pair loader, not a loaded pair")
    methods = [c.full(policy) for c in configs]
    raw: dict[str, list[dict]] = {c.verifier: [] for c in configs}
    handle = raw_path.open("w") if raw_path else None
    bar = tqdm(total=len(items) * len(configs), desc="pareto", disable=not progress)
    table = lambda: pd.DataFrame([summarise(c, policy, temperature, raw[c.verifier]) for c in configs], columns=COLUMNS)  # noqa: E731
    pool = None
    try:
        if workers > 1:
            assert callable(pair)  # a loader (checked above)
            pool = ProcessPoolExecutor(
                min(workers, len(items)) or 1,
                mp_context=get_context("spawn"),
                initializer=_worker_init,
                initargs=(pair, threads),
            )
            futures = [pool.submit(_worker_item, n, item, methods, temperature, seed) for n, item in enumerate(items)]
            done = (f.result() for f in as_completed(futures))
        else:
            loaded = pair() if callable(pair) else pair
            done = (
                (n, [run_item(loaded, m, item, temperature, seed + n) for m in methods]) for n, item in enumerate(items)
            )
        for _, records in done:
            for c, rec in zip(configs, records):
                raw[c.verifier].append(rec)
                if handle:
                    counts = {"drafted": sum(rec["rounds"]["gamma"]), "accepted": sum(rec["rounds"]["measured"])}
                    handle.write(json.dumps({**{k: v for k, v in rec.items() if k != "rounds"}, **counts}) + "\n")
                    handle.flush()
            bar.update(len(configs))
            if partial_path is not None:  # every item: the table so far (a long run stopped early still counts)
                table().to_csv(partial_path, index=False)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if handle:
            handle.close()
    return table()


def finished_records(paths: list[Path]) -> tuple[list[dict], list[str]]:
    """The ``*.items.jsonl`` records of the items that every configuration finished, and the configurations."""
    records = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines() if line.strip()]
    if not records:
        raise SpecScopeError(f"no records in {', '.join(map(str, paths))}")
    methods = list(dict.fromkeys(r["method"] for r in records))
    common = set.intersection(*({r["id"] for r in records if r["method"] == m} for m in methods))
    return [r for r in records if r["id"] in common], methods


def table_from_items(paths: list[Path]) -> pd.DataFrame:
    """Rebuild the main columns from ``*.items.jsonl`` records (runs stopped early, or run apart), over the
    items that every configuration finished (the same items, seeds and order)."""
    records, methods = finished_records(paths)
    rows = []
    for m in methods:
        rs = [r for r in records if r["method"] == m]
        config = Config.parse(m)
        per_task = {
            t: statistics.fmean([r["reward"] for r in rs if r["task"] == t])
            for t in TASKS
            if any(r["task"] == t for r in rs)
        }
        drafted, forwards = sum(r["drafted"] for r in rs), sum(r["forwards"] for r in rs)
        rows.append(
            {
                "method": config.method,
                "param": config.param.replace("head=", ""),
                "acceptance_rate": sum(r["accepted"] for r in rs) / max(1, drafted),
                "quality": statistics.fmean(per_task.values()),
                "tau": sum(r["new_tokens"] for r in rs) / max(1, forwards),
                **{f"quality_{t}": per_task.get(t, float("nan")) for t in TASKS},
                "tokens_per_s": sum(r["new_tokens"] for r in rs) / max(1e-9, sum(r["wall_s"] for r in rs)),
                "items": len(rs),
            }
        )
    return pd.DataFrame(rows)


def task_mix_envelope(paths: list[Path], family: str = "static") -> pd.DataFrame:
    """The room a per-token weight has: ``static:W`` with W chosen *per task* (as if w_t only knew the task).

    From ``*.items.jsonl`` records (the items every configuration finished), every choice of one ``static:W``
    per task gives a point: acceptance = the chosen rows' accepted / drafted pooled over tasks, quality = the
    mean of their task qualities (macro, as in the sweep). Returns the points no other point beats on both
    axes, by acceptance, with column ``weights`` ("arithmetic=0.8 summary=0.4 ...").
    """

    records, methods = finished_records(paths)
    cells: dict[str, dict[str, tuple[int, int, float]]] = {}  # task -> W -> (accepted, drafted, quality)
    for m in methods:
        config = Config.parse(m)
        if config.method != family:
            continue
        param = config.param
        for task in TASKS:
            rs = [r for r in records if r["method"] == m and r["task"] == task]
            if rs:
                cells.setdefault(task, {})[param] = (
                    sum(r["accepted"] for r in rs),
                    sum(r["drafted"] for r in rs),
                    statistics.fmean(r["reward"] for r in rs),
                )
    if not cells:
        raise SpecScopeError(f"no {family}:W records to mix")
    tasks = list(cells)
    points = []
    for choice in itertools.product(*(cells[t].items() for t in tasks)):
        accepted = sum(c[1][0] for c in choice)
        drafted = sum(c[1][1] for c in choice)
        points.append(
            {
                "acceptance_rate": accepted / max(1, drafted),
                "quality": statistics.fmean(c[1][2] for c in choice),
                "weights": " ".join(f"{t}={c[0]}" for t, c in zip(tasks, choice)),
            }
        )
    df = pd.DataFrame(points).sort_values(["acceptance_rate", "quality"], ascending=[False, False])
    keep, best = [], float("-inf")
    for row in df.itertuples(index=False):  # from the highest acceptance down: keep each new best quality
        if row.quality > best:
            keep.append(row._asdict())
            best = row.quality
    return pd.DataFrame(keep).sort_values("acceptance_rate", ignore_index=True)


def envelope_quality(envelope: pd.DataFrame, acceptance: float) -> float:
    """The best quality the envelope reaches at ``acceptance`` or more (a step function; NaN past its end)."""
    at = envelope[envelope["acceptance_rate"] >= acceptance]
    return float(at["quality"].max()) if len(at) else float("nan")


def interleave(items: list) -> list:
    """Round-robin over tasks (arithmetic, summary, extraction, arithmetic, ...), so any prefix is balanced."""
    by_task: dict[str, list] = {}
    for item in items:
        by_task.setdefault(item.task, []).append(item)
    out, queues = [], list(by_task.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core pareto", description=__doc__.splitlines()[0])
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--out", default="runs/pareto.csv")
    ap.add_argument("--split", default="eval", help="eval (default) or train")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--per-task", type=int, default=8, help="first N items of each task (0 = all)")
    ap.add_argument("--policy", default="fixed:4", help="draft-length policy shared by every configuration")
    ap.add_argument("--verifiers", default="", help="';'-separated verifier parts instead of the default sweep")
    ap.add_argument("--t0", default="argmax", choices=("argmax", "onehot"), help="temperature-0 definition")
    ap.add_argument(
        "--head",
        default="shipped",
        help="ensemble head asset for the diversed row ('shipped': the head `diversed` uses at --temperature; '' = none)",
    )
    ap.add_argument("--summarise", default="", help="comma list of *.items.jsonl: rebuild the table, run nothing")
    ap.add_argument("--compare", default="", help="an earlier sweep CSV (same items): print these rows against it")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="bfloat16")
    add_threads(ap, 1)
    ap.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes sharing the items (default: 2, or 1 on a one-core machine)",
    )
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if a.workers < 1 or a.threads < 1:
        print("error: --workers and --threads must be at least 1")
        return 2
    if a.summarise:
        paths = [Path(p) for p in a.summarise.split(",") if p]
        try:
            df = with_frontier(table_from_items(paths))
        except SpecScopeError as err:
            print(f"error: {err}")
            return 2
        try:
            envelope = task_mix_envelope(paths)
        except SpecScopeError:
            envelope = None
        if envelope is not None:  # drawn as the dashed line of the figure (visuals.diversed.TASK_STATIC)
            rows = envelope.rename(columns={"weights": "param"}).assign(method="task-static")
            df = with_frontier(pd.concat([df, rows], ignore_index=True))
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out, index=False)
        with pd.option_context("display.width", 220, "display.max_columns", 14):
            print(df[df["method"] != "task-static"].round(3).to_string(index=False))
        if envelope is None:
            return 0
        print(
            "\nstatic:W with W chosen per task (what a w_t that only knew the task could reach), at each "
            "non-static row's acceptance:"
        )
        for row in df[~df["method"].isin(["static", "task-static"])].itertuples(index=False):
            print(
                f"  {row.method} {row.param}: acceptance {row.acceptance_rate:.3f}, quality {row.quality:.3f}; "
                f"per-task static {envelope_quality(envelope, row.acceptance_rate):.3f}"
            )
        return 0
    try:
        SamplingConfig(temperature=a.temperature).validate()
        torch.set_num_threads(a.threads)

        wanted = shipped_head(a.temperature) if a.head == "shipped" else a.head
        head = wanted if wanted and wanted in available(HEADS_DIR) else None
        if wanted and head is None:
            print(f"(no ensemble head {wanted!r} in {HEADS_DIR}: the diversed row is skipped)")
        if a.verifiers:
            configs = [Config.parse(v) for v in a.verifiers.split(";") if v]
        else:
            configs = default_configs(a.t0, head)
        items = interleave(load_items(a.split, tuple(t for t in a.tasks.split(",") if t), per_task=a.per_task or None))
        load = functools.partial(load_pair, "embedded", "cpu", a.dtype)
        pair = load if a.workers > 1 else load()  # one process: load before the clock starts
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        df = run_pareto(
            pair,
            configs,
            items,
            a.policy,
            a.temperature,
            a.seed,
            out.with_suffix(".items.jsonl"),
            not a.no_progress,
            out.with_suffix(".partial.csv"),
            a.workers,
            a.threads,
        )
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    df.to_csv(out, index=False)
    both = pd.concat([pd.read_csv(a.compare, dtype={"param": str}), df], ignore_index=True) if a.compare else df
    both = with_frontier(both)
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(
            both[["method", "param", "acceptance_rate", "quality", "frontier_quality", "acceptance_vs_lossless"]]
            .round(3)
            .to_string(index=False)
        )
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(
            df[
                [
                    "method",
                    "param",
                    "acceptance_rate",
                    "quality",
                    "tau",
                    "measured_accepted",
                    "expected_accepted",
                    "iid_expected_accepted",
                    "tokens_per_s",
                ]
            ]
            .round(3)
            .to_string(index=False)
        )
    print(
        f"wrote {out} ({len(items)} items x {len(configs)} configurations, {a.workers} worker(s), "
        f"{time.perf_counter() - t:.0f} s)"
    )
    return 0
