"""The training prompts: deterministic, distinct, of every kind, and never the benchmark's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_core.jsonl import read_objects
from spec_core.train.prompts import PROMPT_BANK, training_prompts, written_prompts

KINDS = {"code", "math", "summarization", "chat", "qa", "lists"}
ROOT = Path(__file__).resolve().parents[2]


def benchmark_prompts() -> set[str]:
    return {
        o["prompt"].strip().lower()
        for f in ("specscope", "examples")
        for _, o in read_objects(ROOT / "prompts" / f"{f}.jsonl", "prompts")
    }


@pytest.mark.parametrize("source", ["templates", "written"])
def test_prompts_are_deterministic_distinct_of_every_kind_and_not_the_benchmark(source):
    prompts = training_prompts(600, seed=7, source=source)
    assert prompts == training_prompts(600, seed=7, source=source)
    assert len({p for _, p in prompts}) == len(prompts)
    assert len(prompts) == 600 if source == "templates" else len(prompts) > 0
    assert {k for k, _ in prompts} == KINDS
    assert not benchmark_prompts() & {p.strip().lower() for _, p in prompts}


def test_the_written_bank_is_well_formed_and_large():
    rows = [
        json.loads(line)
        for f in sorted(PROMPT_BANK.glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    assert all(set(r) == {"category", "prompt"} and r["category"] in KINDS and r["prompt"].strip() for r in rows)
    assert len(written_prompts()) >= 1000


def test_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="unknown prompt source"):
        training_prompts(3, source="web")
