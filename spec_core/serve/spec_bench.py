"""Spec-Bench as a benchmark suite: its questions, a deterministic selection, and its leaderboard table.

Spec-Bench (Xia et al., "Unlocking Efficiency in Large Language Model Inference: A Comprehensive Survey of
Speculative Decoding", arXiv 2401.07851) reports six categories: multi-turn conversation (MT-bench), translation
(WMT14 DE-EN), summarization (CNN/DailyMail), question answering (Natural Questions), mathematical reasoning
(GSM8K) and retrieval-augmented generation (RAG over Natural Questions passages). Its question file is shipped
unchanged in ``prompts/spec_bench/`` (Apache-2.0, see the README there).

An MT-bench question has two turns. The second runs with the first turn and the target's own greedy answer to it
in the context (Spec-Bench does the same): the answer is generated once, with ``ar`` at the run's
``max_new_tokens`` (:func:`answer_first_turns`), and every method then sees the same context. Such a row carries
``history = [(user_1, assistant_1)]``; :func:`spec_core.model.prompting.prompt_ids` renders it through the chat template.

The leaderboard has Spec-Bench's shape: one row per method, one column per category. Its numbers are SpecScope's:
the median over a category's prompts of ``speedup_vs_best_ar`` (tokens/s over the fastest plain decoding of the
same prompt in the same run), where Spec-Bench divides mean tokens/s by the baseline's mean tokens/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from spec_core.core.errors import SpecScopeError
from spec_core.core.guards import check_text
from spec_core.core.jsonl import read_objects
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

QUESTION_FILE = Path(__file__).resolve().parents[2] / "prompts" / "spec_bench" / "question.jsonl"
CATEGORIES = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")  # Spec-Bench's order
MT_BENCH = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
DEFAULT_PER_CATEGORY = 2  # `--suite spec-bench`: 12 questions (14 prompts), minutes on a CPU at 128 new tokens
SUITE = "spec-bench"
ANALYZER_CHOICE = f"Spec-Bench ({DEFAULT_PER_CATEGORY} per category)"  # the Analyzer's prompt-set entry
LEADERBOARD_EXTRA = ("mean accepted tokens", "overall")


def category_of(raw: str) -> str:
    """Spec-Bench's reported category of a row: MT-bench's eight are one, ``mt_bench``; the rest as written."""
    return "mt_bench" if raw in MT_BENCH else raw


def is_question_row(obj: dict) -> bool:
    """A row of Spec-Bench's format (``question_id``, ``category``, ``turns``) rather than SpecScope's."""
    return "turns" in obj and "question_id" in obj


def check_questions(objects: Sequence[tuple[int, dict]], name: str) -> list[dict]:
    """Spec-Bench rows ``(line number, object)`` checked: an id, a category, a list of non-empty turns."""
    questions = []
    for n, obj in objects:
        where = f"Spec-Bench file {name}, line {n}"
        qid, category, turns = obj.get("question_id"), obj.get("category"), obj.get("turns")
        if isinstance(qid, bool) or not isinstance(qid, (int, str)) or not str(qid).strip():
            raise SpecScopeError(f"{where}: needs a 'question_id' (a number or a string)")
        if not isinstance(category, str) or not category.strip():
            raise SpecScopeError(f"{where}: needs a non-empty 'category' string")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise SpecScopeError(f"{where}: 'turns' must be a non-empty list of non-empty strings")
        for k, turn in enumerate(turns, 1):
            check_text(turn, f"{where}: turn {k}")
        questions.append({"question_id": str(qid).strip(), "category": category_of(category), "turns": turns})
    ids = [q["question_id"] for q in questions]
    if len(set(ids)) != len(ids):
        raise SpecScopeError(f"Spec-Bench file {name} repeats a question_id")
    return questions


def load_questions(path: str | Path = QUESTION_FILE) -> list[dict]:
    """The questions of a Spec-Bench-format file, in file order, categories as Spec-Bench reports them."""
    objects = read_objects(path, "Spec-Bench file")
    for n, obj in objects:
        if not is_question_row(obj):
            raise SpecScopeError(f"Spec-Bench file {Path(path).name}, line {n}: needs 'question_id' and 'turns'")
    return check_questions(objects, Path(path).name)


def to_prompts(questions: Sequence[dict]) -> list[dict]:
    """Questions → prompt rows (``id``, ``category``, ``prompt``): the first turn, and for MT-bench the second too,
    whose ``history`` holds the first turn and a placeholder (None) for the answer :func:`answer_first_turns`
    fills in."""
    rows = []
    for q in questions:
        first, qid = q["turns"][0], q["question_id"]
        rows.append({"id": qid, "category": q["category"], "prompt": first})
        if q["category"] == "mt_bench":
            for k, turn in enumerate(q["turns"][1:], 2):
                history = [(u, None) for u in q["turns"][: k - 1]]
                rows.append({"id": f"{qid}-t{k}", "category": q["category"], "prompt": turn, "history": history})
    return rows


def select(n_per_category: int = DEFAULT_PER_CATEGORY, offset: int = 0, path: str | Path = QUESTION_FILE) -> list[dict]:
    """The first ``n_per_category`` questions of each category in file order, after skipping ``offset`` of each,
    as prompt rows (:func:`to_prompts`). Deterministic: the same arguments give the same rows."""
    if isinstance(n_per_category, bool) or not isinstance(n_per_category, int) or n_per_category < 1:
        raise SpecScopeError(f"questions per category must be an integer >= 1, got {n_per_category!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise SpecScopeError(f"offset must be an integer >= 0, got {offset!r}")
    questions = load_questions(path)
    by_category: dict[str, list[dict]] = {}
    for q in questions:
        by_category.setdefault(q["category"], []).append(q)
    short = {c: len(qs) for c, qs in by_category.items() if len(qs) < offset + n_per_category}
    if short:
        raise SpecScopeError(
            f"offset {offset} + {n_per_category} per category runs past the questions of "
            + ", ".join(f"{c} ({n})" for c, n in short.items())
        )
    chosen = {id(q) for qs in by_category.values() for q in qs[offset : offset + n_per_category]}
    return to_prompts([q for q in questions if id(q) in chosen])


def parse_suite(text: str) -> int:
    """``spec-bench`` or ``spec-bench:N`` → N questions per category."""
    head, colon, arg = (text or "").strip().partition(":")
    if head != SUITE:
        raise SpecScopeError(f"unknown suite {text!r}; use {SUITE} or {SUITE}:N (N questions per category)")
    if not colon:
        return DEFAULT_PER_CATEGORY
    if not arg.isdigit() or int(arg) < 1:
        raise SpecScopeError(f"{SUITE}:N needs an integer N >= 1 (questions per category), got {arg!r}")
    return int(arg)


def answer_first_turns(pair: ModelPair, prompts: Sequence[dict], max_new_tokens: int) -> list[dict]:
    """``prompts`` with every missing answer in a ``history`` filled in: the target's greedy ``ar`` output for the
    turns before it (itself with the answers before it), generated once per distinct context."""

    answers: dict[tuple, str] = {}
    out = []
    for row in prompts:
        history = row.get("history")
        if not history or all(a is not None for _, a in history):
            out.append(row)
            continue
        filled: list[tuple[str, str]] = []
        for user, answer in history:
            if answer is None:
                key = (user, tuple(filled))
                if key not in answers:
                    greedy = SamplingConfig(temperature=0.0)
                    run = Generation(pair, user, "ar", max_new_tokens, greedy, display=False, history=filled or None)
                    answers[key] = run.run().text
                answer = answers[key]
            filled.append((user, answer))
        out.append({**row, "history": filled})
    return out


def leaderboard(df: pd.DataFrame, speedup: str = "speedup_vs_best_ar") -> pd.DataFrame:
    """Spec-Bench's table from a bench CSV: one row per method, one column per category (the median ``speedup``
    over its prompts), then ``mean accepted tokens`` (mean τ, new tokens per target forward) and ``overall``
    (the median over every prompt). Categories in Spec-Bench's order, any others after them as they come."""
    df = df.assign(category=df["category"].fillna("").astype(str))
    seen = [c for c in dict.fromkeys(df["category"]) if c]
    if not seen:
        raise SpecScopeError("no prompt of this run has a category; the leaderboard is per category")
    cats = [c for c in CATEGORIES if c in seen] + [c for c in seen if c not in CATEGORIES]
    methods = list(dict.fromkeys(df["method"]))
    per = df[df["category"] != ""].pivot_table(index="method", columns="category", values=speedup, aggfunc="median")
    table = per.reindex(index=methods, columns=cats)
    g = df.groupby("method", sort=False)
    table["mean accepted tokens"] = g["tau"].mean()
    table["overall"] = g[speedup].median()
    table.columns.name = None
    return table.round(3)
