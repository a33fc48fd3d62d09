"""Spec-Bench as a suite: the selection, the file format, MT-bench's second turn, the leaderboard, ``hf-lookup:K``."""

from __future__ import annotations

import json
import math
from collections import Counter
from types import SimpleNamespace

import pandas as pd
import pytest

from spec_core.__main__ import main
from spec_core.analysis import bench
from spec_core.analysis.bench import accepted_by_source, run_bench
from spec_core.analysis.peers import run_peer
from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import DRAFT_OVERSHOOT
from spec_core.engine.methods import parse_method
from spec_core.model.prompting import prompt_ids
from spec_core.serve import spec_bench
from spec_core.serve.prompts import load_prompts


def questions_per_category(rows: list[dict]) -> Counter:
    return Counter(r["category"] for r in rows if "history" not in r)  # a second turn is the same question


def test_selection_is_deterministic_balanced_and_in_file_order():
    rows = spec_bench.select(2)
    assert rows == spec_bench.select(2)
    assert questions_per_category(rows) == {c: 2 for c in spec_bench.CATEGORIES}
    assert [r["id"] for r in rows if r["category"] in ("mt_bench", "qa")] == [
        "81",
        "81-t2",
        "82",
        "82-t2",
        "321",
        "322",
    ]
    later = spec_bench.select(1, offset=2)
    assert [r["id"] for r in later if r["category"] == "translation"] == ["163"]
    assert all(len(r["history"]) == 1 and r["history"][0][1] is None for r in rows if "history" in r)
    with pytest.raises(SpecScopeError, match="runs past the questions"):
        spec_bench.select(1, offset=80)
    with pytest.raises(SpecScopeError, match=">= 1"):
        spec_bench.select(0)


def test_a_spec_bench_format_file_converts(tmp_path):
    path = tmp_path / "q.jsonl"
    rows = [
        {"question_id": 7, "category": "writing", "turns": ["Write a haiku.", "Now make it rhyme."]},
        {"question_id": 8, "category": "qa", "turns": ["Who wrote Hamlet?"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    prompts = load_prompts(path)
    assert [(p["id"], p["category"], p["prompt"]) for p in prompts] == [
        ("7", "mt_bench", "Write a haiku."),
        ("7-t2", "mt_bench", "Now make it rhyme."),
        ("8", "qa", "Who wrote Hamlet?"),
    ]
    assert prompts[1]["history"] == [("Write a haiku.", None)] and "history" not in prompts[2]


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"question_id": 1, "category": "qa", "turns": "not a list"}'], "non-empty list"),
        (['{"question_id": 1, "category": "qa", "turns": []}'], "non-empty list"),
        (['{"question_id": 1, "category": "qa", "turns": ["ok", 3]}'], "non-empty list"),
        (['{"question_id": 1, "turns": ["ok"]}'], "category"),
        (['{"question_id": true, "category": "qa", "turns": ["ok"]}'], "question_id"),
        (['{"question_id": 1, "category": "qa", "turns": ["a"]}', '{"id": "x", "prompt": "b"}'], "line 2"),
        (['{"question_id": 1, "category": "qa", "turns": ["a"]}'] * 2, "repeats"),
        (['{"question_id": 1, "category": "qa", "turns": ["a"]', "{}"], "not JSON"),
    ],
)
def test_a_malformed_spec_bench_file_is_a_clear_error(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SpecScopeError, match=message):
        load_prompts(path)
    with pytest.raises(SpecScopeError):
        spec_bench.load_questions(path)


def test_the_leaderboard_has_a_column_per_category_then_tau_and_overall():
    rows = [
        {"method": m, "prompt_id": f"{c}{k}", "category": c, "speedup_vs_best_ar": s * (1 + k), "tau": t}
        for m, s, t in (("ar", 1.0, 1.0), ("fixed:2", 1.5, 2.0))
        for c in reversed(spec_bench.CATEGORIES)
        for k in range(2)
    ]
    board = spec_bench.leaderboard(pd.DataFrame(rows))
    assert list(board.columns) == [*spec_bench.CATEGORIES, "mean accepted tokens", "overall"]
    assert list(board.index) == ["ar", "fixed:2"]
    assert board.loc["fixed:2", "qa"] == pytest.approx(2.25)  # median of 1.5 and 3.0
    assert board.loc["fixed:2", "mean accepted tokens"] == 2.0 and board.loc["ar", "overall"] == 1.5
    with pytest.raises(SpecScopeError, match="category"):
        spec_bench.leaderboard(pd.DataFrame([{**rows[0], "category": ""}]))


def test_suite_names_and_the_hf_lookup_peer_parse_or_fail_clearly():
    assert spec_bench.parse_suite("spec-bench") == spec_bench.DEFAULT_PER_CATEGORY
    assert spec_bench.parse_suite("spec-bench:3") == 3
    for bad in ("spec-bench:0", "spec-bench:x", "mt-bench"):
        with pytest.raises(SpecScopeError, match="spec-bench"):
            spec_bench.parse_suite(bad)
    assert parse_method("hf-lookup:4").kind == "peer"
    with pytest.raises(SpecScopeError, match=r"hf-lookup:K needs an integer 1 <= K <= 64, got '0'"):
        parse_method("hf-lookup:0")
    with pytest.raises(SpecScopeError, match=r"unknown peer 'hf-lookup'; .*hf-lookup:K"):
        parse_method("hf-lookup")


def test_bench_cli_refuses_a_bad_suite_before_loading_a_model(capsys):
    assert main(["bench", "--suite", "spec-bench:0", "--methods", "ar"]) == 2
    assert main(["bench", "--suite", "spec-bench", "--prompts", "prompts/examples.jsonl"]) == 2
    assert "not both" in capsys.readouterr().err


def test_bench_cli_runs_the_suite_and_prints_the_leaderboard(tmp_path, monkeypatch, capsys):
    import spec_core.__main__ as cli
    from spec_core.analysis import bench

    seen = {}

    def fake_run_bench(pair, prompts, methods, *args, **kwargs):
        seen["prompts"], seen["methods"] = prompts, methods
        rows = [
            {"method": m, "prompt_id": p["id"], "category": p["category"]} for m in ["ar", *methods] for p in prompts
        ]
        return pd.DataFrame(rows, columns=bench.COLUMNS).assign(speedup_vs_best_ar=1.0, tau=1.0)

    monkeypatch.setattr(cli, "_pair", lambda args: SimpleNamespace(precision="float32", device="cpu", draft_design="x"))
    monkeypatch.setattr(cli, "run_bench", fake_run_bench)
    out = tmp_path / "sb.csv"
    assert main(["bench", "--suite", "spec-bench:1", "--methods", "hf-lookup:4", "--out", str(out)]) == 0
    assert seen["prompts"] == spec_bench.select(1) and seen["methods"] == ["hf-lookup:4"]
    printed = capsys.readouterr().out
    assert "mean accepted tokens" in printed and "math_reasoning" in printed
    assert {"lookup_tokens", "model_tokens", "category"} <= set(pd.read_csv(out).columns)


def test_accepted_tokens_are_counted_by_source():
    events = [
        SimpleNamespace(accepted=3, draft_sources=("lookup", "lookup", "model", "model")),
        SimpleNamespace(accepted=2, draft_sources=()),  # an older event: every draft is the model's
        SimpleNamespace(accepted=1),  # before the field existed
    ]
    assert accepted_by_source(events) == {"lookup_tokens": 2, "model_tokens": 4}


def test_history_without_a_chat_template_comes_first(tiny_pair):
    ids = prompt_ids(tiny_pair, "c", history=[("a", "b")])
    assert ids == prompt_ids(tiny_pair, "a\n\nb\n\nc")
    with pytest.raises(SpecScopeError, match="pair of strings"):
        prompt_ids(tiny_pair, "c", history=[("a", None)])


@pytest.mark.embedded
def test_every_question_fits_the_embedded_context(embedded_f32):
    """The longest Spec-Bench prompts (summarization, RAG: ≈ 1,600 and 900 tokens) leave room for 1,024 new
    tokens, and an MT-bench second turn for two answers of 1,024."""
    limit = embedded_f32.target.config.max_position_embeddings
    for row in spec_bench.select(80):
        history = [(user, "") for user, _ in row.get("history", ())] or None
        n = len(prompt_ids(embedded_f32, row["prompt"], history=history))
        assert n + (2 if history else 1) * 1024 + DRAFT_OVERSHOOT <= limit, row["id"]


@pytest.mark.embedded
def test_the_second_turn_sees_the_first_turn_and_its_answer(embedded_f32, one_thread):
    first, second = [r for r in spec_bench.select(1) if r["category"] == "mt_bench"]
    (filled,) = [r for r in spec_bench.answer_first_turns(embedded_f32, [first, second], 8) if "history" in r]
    user, answer = filled["history"][0]
    assert user == first["prompt"] and answer.strip()
    text = embedded_f32.tokenizer.decode(prompt_ids(embedded_f32, second["prompt"], history=filled["history"]))
    assert text.index(user) < text.index(answer) < text.index(second["prompt"])


@pytest.mark.embedded
def test_a_tiny_spec_bench_run_with_hf_lookup(embedded_f32, one_thread):
    prompts = spec_bench.select(1)  # `--suite spec-bench:1`: 6 questions, 7 prompts (one MT-bench second turn)
    df = run_bench(embedded_f32, prompts, ["hf-lookup:4"], max_new_tokens=8, repeats=1, warmup=False, progress=False)
    assert set(df["category"]) == set(spec_bench.CATEGORIES)
    assert df["first_divergence"].isna().all()  # transformers' prompt lookup is greedy-exact in float32
    lookup = df[df["method"] == "hf-lookup:4"]
    assert lookup["lookup_tokens"].isna().all() and (df[df["method"] == "ar"]["model_tokens"] == 0).all()
    board = spec_bench.leaderboard(df)
    assert list(board.columns) == [*spec_bench.CATEGORIES, "mean accepted tokens", "overall"]
    assert board.loc["hf-lookup:4", "mean accepted tokens"] >= 1.0
    ids = list(prompt_ids(embedded_f32, prompts[2]["prompt"]))
    sampled = [run_peer(embedded_f32, "hf-lookup:4", ids, 8, temperature=0.8, seed=3) for _ in range(2)]
    assert sampled[0].token_ids == sampled[1].token_ids and 1 <= len(sampled[0].token_ids) <= 8
    assert not math.isnan(sampled[0].wall_s) and sampled[0].target_forwards >= 1


def test_the_analyzer_runs_spec_bench_and_shows_its_table(monkeypatch, one_thread):
    """The Analyzer's "Spec-Bench" prompt set, end to end on the app's tiny pair (the embedded tokenizer and chat
    template, random weights): every category runs, the second turn after its answer, and the table shows."""
    from conftest_app import tiny_loader

    import app

    monkeypatch.setattr(spec_bench, "DEFAULT_PER_CATEGORY", 1)  # 7 prompts, not 14: the wiring, not the numbers
    demo = app.build_demo(tiny_loader)
    by_elem = {getattr(b, "elem_id", None): i for i, b in demo.blocks.items()}
    deps = demo.config["dependencies"]
    (run,) = [k for k, d in enumerate(deps) if [by_elem["an-run"]] == [t[0] for t in d["targets"]]]
    prompt_set = demo.blocks[deps[run]["inputs"][0]]
    assert spec_bench.ANALYZER_CHOICE in [value for _, value in prompt_set.choices]
    outs = list(demo.fns[run].fn(spec_bench.ANALYZER_CHOICE, None, "fixed:2", 1, 4, 0.0, 1.0, 0, "embedded", "float32"))
    status, table, board = outs[-1][0], outs[-1][2], outs[-1][-1]
    assert status.startswith("Done: 7 prompts")
    assert set(table["category"]) == set(spec_bench.CATEGORIES) and "81-t2" in set(table["prompt id"])
    assert list(board.columns) == ["method", *spec_bench.CATEGORIES, "τ", "median speedup vs ar"]


def test_the_bench_summary_gives_the_median_and_the_pooled_speedup():
    """By hand: a lane twice as fast on one prompt and half as fast on a longer-running one. The median of its
    per-prompt ratios is 1.25; pooled over both (20 tokens in 2.5 s against ar's 20 in 2 s) it is 0.8."""
    rows = []
    for method, walls in (("ar", (1.0, 1.0)), ("fixed:2", (0.5, 2.0))):
        for k, wall in enumerate(walls):
            ratio = 1.0 / wall
            rows.append(
                {"method": method, "prompt_id": f"p{k}", "new_tokens": 10, "wall_s": wall, "tokens_per_s": 10 / wall}
                | {"speedup_vs_ar": ratio, "speedup_vs_best_ar": ratio, "tau": 1.0, "acceptance_rate": 0.5}
                | {"first_divergence": None}
            )
    summary = bench.summarize(pd.DataFrame(rows, columns=bench.COLUMNS))
    assert summary.loc["fixed:2", "speedup_vs_ar (median)"] == 1.25
    assert summary.loc["fixed:2", "speedup_vs_ar (pooled)"] == 0.8
    assert summary.loc["ar", "speedup_vs_ar (pooled)"] == 1.0
