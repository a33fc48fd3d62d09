"""The training prompts: deterministic, distinct, of every kind, and never the benchmark's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_core.core.jsonl import read_objects
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


# ----------------------------------------------------------------------------------------------------------
# Prompts at scale: every source stays clear of Spec-Bench and the held-out sets


def heldout_set() -> tuple[set[str], list[str]]:
    """Independent of the generators' own filter: the held-out prompts, lower-cased, and the long ones."""
    texts = [t for _, o in read_objects(ROOT / "prompts" / "spec_bench" / "question.jsonl", "q") for t in o["turns"]]
    for f in ("specscope.jsonl", "examples.jsonl", *(f"eval/{p.name}" for p in (ROOT / "prompts" / "eval").glob("*"))):
        texts += [o["prompt"] for _, o in read_objects(ROOT / "prompts" / f, "prompts")]
    assert len(texts) > 700  # 480 Spec-Bench questions (some with two turns), the benchmark and the eval tasks
    norm = [" ".join(t.lower().split()) for t in texts]
    return set(norm), [t for t in norm if len(t) >= 60]


def assert_clear(prompts: list[str]) -> None:
    whole, long = heldout_set()
    for p in prompts:
        text = " ".join(p.lower().split())
        assert text not in whole, p
        assert not any(h in text for h in long), p  # no held-out prompt (60+ characters) quoted inside


@pytest.fixture
def few_stdlib_files(monkeypatch):
    """The passages of a few standard-library files (all of them take ~30 s to parse)."""
    from spec_core.train import passages

    files = [f for f in passages._stdlib_files() if f.name in {"textwrap.py", "fractions.py", "shlex.py", "heapq.py"}]
    monkeypatch.setattr(passages, "_stdlib_files", lambda: files)
    passages.stdlib_passages.cache_clear()
    yield files
    passages.stdlib_passages.cache_clear()


def test_the_filter_catches_held_out_prompts_and_runs_shared_with_them():
    from spec_core.train.prompts import heldout_texts, overlaps_heldout

    question = next(o["turns"][0] for _, o in read_objects(ROOT / "prompts/spec_bench/question.jsonl", "q"))
    assert question in heldout_texts() and overlaps_heldout(question.upper())
    words = question.split()
    assert len(words) >= 14 and overlaps_heldout("Please: " + " ".join(words[:13]) + " and then some.")
    assert not overlaps_heldout("Please: " + " ".join(words[:12]) + " and then some.")
    assert not overlaps_heldout("Write a haiku about tea.")


def test_passage_prompts_are_deterministic_copy_heavy_and_clear_of_held_out_sets(few_stdlib_files):
    from spec_core.train.passages import PASSAGE_FORMS, package_licences, passage_prompts

    prompts = passage_prompts(400, seed=5)
    assert prompts == passage_prompts(400, seed=5) and prompts != passage_prompts(400, seed=6)
    assert len({p for _, p in prompts}) == len(prompts) > 100
    kinds = {k for k, _ in prompts}
    assert {"stdlib-code", *(f"stdlib-{task}" for task in PASSAGE_FORMS)} <= kinds
    code = [p for k, p in prompts if k == "stdlib-code"]
    assert all("```python\ndef " in p for p in code)  # whole functions, dedented
    assert all(licence and "GPL" not in licence and "MPL" not in licence for licence in package_licences().values())
    assert_clear([p for _, p in prompts])


@pytest.mark.parametrize("source", ["templates", "written"])
def test_the_first_sources_are_clear_of_held_out_sets(source):
    assert_clear([p for _, p in training_prompts(5000, seed=1234, source=source)])


def test_magpie_keeps_real_questions_only():
    from spec_core.train.magpie import keep_question

    question = next(o["turns"][0] for _, o in read_objects(ROOT / "prompts/spec_bench/question.jsonl", "q"))
    assert keep_question("How do I keep my sourdough starter alive while I travel?")
    assert not keep_question(question)  # a Spec-Bench question
    assert not keep_question("Hi")  # too short
    assert not keep_question("1234 5678 9012 3456 ++++ ---- ////")  # not words
