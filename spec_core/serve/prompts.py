"""Prompt sets: the project's files under ``prompts/`` and one file read and checked (JSON lines with ``id``,
``category``, ``prompt``, or Spec-Bench's questions). The Analyzer offers them, and ``bench`` and the other tools
read them."""

from __future__ import annotations

from pathlib import Path

from spec_core.core.errors import SpecScopeError
from spec_core.core.guards import check_text
from spec_core.core.jsonl import read_objects
from spec_core.serve import spec_bench


def prompt_sets(root: Path) -> list[str]:
    """The prompt sets under ``root/prompts`` (paths relative to ``root``), the project's own first."""
    folder = root / "prompts"
    first = [p for p in (folder / "specscope.jsonl", folder / "examples.jsonl") if p.exists()]
    rest = sorted(p for p in folder.glob("*.jsonl") if p not in first) if folder.exists() else []
    return [str(p.relative_to(root)) for p in first + rest]


def load_prompts(path: str | Path) -> list[dict]:
    """Read a JSON-lines prompt file (``id``, ``category``, ``prompt`` per line), or a Spec-Bench question file
    (``question_id``, ``category``, ``turns``: :func:`spec_bench.to_prompts`, both turns of an MT-bench question)."""
    objects = read_objects(path, "prompt file")
    if spec_bench.is_question_row(objects[0][1]):
        return spec_bench.to_prompts(spec_bench.check_questions(objects, Path(path).name))
    rows = []
    for n, row in objects:
        if not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            raise SpecScopeError(f"prompt file {Path(path).name}, line {n}: needs a non-empty 'prompt' string")
        check_text(row["prompt"], f"prompt file {Path(path).name}, line {n}: the prompt")
        rows.append({"id": str(row.get("id", n)), "category": str(row.get("category", "")), "prompt": row["prompt"]})
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise SpecScopeError(f"prompt file {str(path)!r} repeats an id")
    return rows
