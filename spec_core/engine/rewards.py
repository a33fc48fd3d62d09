"""The evaluation suite: offline tasks with automatic rewards and train / eval splits (DIVERSED's R).

DIVERSED (arXiv 2604.07622) trains its ensemble head on a task reward R(x_{1:T}) and reports quality beside
acceptance: exact-match accuracy on GSM8K, ROUGE-2 on CNN/DM and XSum, pass@1 on MBPP. Our suite is small,
written by the project (``prompts/eval/*.jsonl``) and sized for the embedded 135M target:

- ``arithmetic`` — two-number sums, differences and products; reward 1 when the last integer of the reply
  equals the answer (exact match on the final number, as GSM8K graders read a worked answer);
- ``summary`` — one-sentence summaries of short news paragraphs; reward ROUGE-2 F1 against a written reference
  (``rouge-score``, Porter stemming);
- ``extraction`` — pull an email address, a city, a year or a name out of a sentence; reward 1 when the reply
  contains the reference (case-insensitive, whitespace-normalised).

Each line: ``id``, ``task``, ``split`` ("train" | "eval"), ``prompt``, ``reference``, ``max_new_tokens``.

:func:`run_item` runs one item through the engine and scores it: DIVERSED's sweep
(:mod:`spec_core.analysis.pareto`) and the head's training (:mod:`spec_core.train.diversed`) both build on it, so
it lives here, below both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.jsonl import read_objects
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

EVAL_DIR = Path(__file__).resolve().parents[2] / "prompts" / "eval"
TASKS = ("arithmetic", "summary", "extraction")
SPLITS = ("train", "eval")


@dataclass(frozen=True)
class EvalItem:
    id: str
    task: str  # one of TASKS
    split: str  # "train" | "eval"
    prompt: str
    reference: str
    max_new_tokens: int


def load_items(
    split: str,
    tasks: tuple[str, ...] = TASKS,
    directory: Path = EVAL_DIR,
    per_task: int | None = None,
) -> list[EvalItem]:
    """The items of one split, task by task (``per_task`` keeps the first N of each)."""
    if split not in SPLITS:
        raise SpecScopeError(f"split must be one of {SPLITS}, got {split!r}")
    items: list[EvalItem] = []
    for task in tasks:
        if task not in TASKS:
            raise SpecScopeError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
        rows = []
        for n, obj in read_objects(Path(directory) / f"{task}.jsonl", "evaluation file"):
            missing = [k for k in ("id", "prompt", "reference", "split") if not isinstance(obj.get(k), str)]
            if missing or obj.get("task") != task:
                raise SpecScopeError(f"evaluation file {task}.jsonl, line {n}: needs string {missing or ['task']}")
            if obj["split"] == split:
                rows.append(
                    EvalItem(
                        obj["id"], task, split, obj["prompt"], obj["reference"], int(obj.get("max_new_tokens", 48))
                    )
                )
        items += rows[:per_task] if per_task else rows
    return items


_INT = re.compile(r"-?\d[\d,]*")


def last_integer(text: str) -> int | None:
    found = _INT.findall(text)
    return int(found[-1].replace(",", "")) if found else None


def arithmetic_reward(output: str, reference: str) -> float:
    """1 when the reply's last integer equals the reference answer."""
    return float(last_integer(output) == int(reference))


@functools.lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer  # rouge_score loads nltk: only a summary's reward needs it

    return rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)


def rouge2(output: str, reference: str) -> float:
    """ROUGE-2 F1 (Lin 2004) by Google's ``rouge-score`` with Porter stemming."""
    return float(_rouge().score(reference, output)["rouge2"].fmeasure)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def extraction_reward(output: str, reference: str) -> float:
    """1 when the reply contains the reference (case and spacing ignored)."""
    return float(_norm(reference) in _norm(output))


REWARDS = {"arithmetic": arithmetic_reward, "summary": rouge2, "extraction": extraction_reward}


def reward(task: str, output: str, reference: str) -> float:
    if task not in REWARDS:
        raise SpecScopeError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    return REWARDS[task](output, reference)


# -- one item through the engine ---------------------------------------------------------------------------


def round_numbers(events) -> dict[str, list[float]]:
    """Per drafted round: measured accepted, Σ_k Π a_i, Σ_k Π β_i, draft length, a_i's, w's."""
    out: dict[str, list[float]] = {"measured": [], "expected": [], "rb": [], "gamma": [], "a": [], "w": []}
    for e in events:
        if not e.draft_len:
            continue
        out["measured"].append(e.accepted)
        out["gamma"].append(e.draft_len)
        out["rb"].append(float(rules.expected_accepted_length(torch.tensor(e.accept_probs))))
        a = e.verifier_trace.get("expected_accept")
        if a is not None:
            out["expected"].append(float(rules.expected_accepted_length(torch.tensor(a))))
            out["a"] += list(a)
        out["w"] += list(e.verifier_trace.get("w", []))
    return out


def run_item(pair: ModelPair, method: str, item: EvalItem, temperature: float, seed: int) -> dict:
    """One item through the engine (seeded, ``display=False``): its text, reward, counters and round numbers."""
    sampling = SamplingConfig(temperature=temperature, seed=seed)
    run = Generation(pair, item.prompt, method, item.max_new_tokens, sampling, display=False)
    events = list(run.rounds())
    result = run.result()
    return {
        "id": item.id,
        "task": item.task,
        "method": method,
        "text": result.text,
        "reward": reward(item.task, result.text, item.reference),
        "new_tokens": result.stats.new_tokens,
        "forwards": result.stats.target_forwards,
        "wall_s": result.stats.wall_s,
        "verify_s": sum(e.verify_s for e in events if e.draft_len),
        "rounds": round_numbers(events),
    }
