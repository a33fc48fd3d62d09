"""Issue #26: each tab shows and owns its settings, and a bad file is one clear message (no browser).

The Analyzer runs with its own temperature (it used to read the Live tab's, unseen); the Playground records its
own prompt and keeps the Live tab's last *finished greedy* run, so a later sampled or stopped Live run no longer
leaves "nothing to record"; every malformed upload of tests/malformed_uploads.py gives one readable message
through the same calls the page's handlers make, shown in place rather than as a badge on every output.
"""

from __future__ import annotations

import pytest
from conftest_app import tiny_loader
from malformed_uploads import CASES, write_case

import app
from spec_core.core import guards
from spec_core.core.errors import SpecScopeError
from spec_core.serve import live, requests
from ui import analyzer, playground_record, shared

PROMPT = "Why is the sky blue?"
KNOBS = ("pacer", 4, 0.4, 1, 0.6, 1.1, 8)  # policy drawn, K, T, b, t, ρ, max


def elem_ids_of_inputs(demo, trigger_elem: str) -> list[str]:
    """The elem_ids of the inputs of the event a component (by elem_id) triggers."""
    blocks = demo.blocks
    by_elem = {getattr(b, "elem_id", None): i for i, b in blocks.items()}
    for dep in demo.config["dependencies"]:
        if any(t[0] == by_elem[trigger_elem] for t in dep["targets"]):
            return [getattr(blocks[i], "elem_id", None) for i in dep["inputs"]]
    raise AssertionError(f"no event on {trigger_elem}")


def test_the_analyzer_reads_its_own_settings_not_the_live_tabs():
    demo = app.build_demo(tiny_loader)
    inputs = elem_ids_of_inputs(demo, "an-run")
    assert "an-temperature" in inputs and "an-precision" in inputs
    assert "temperature" not in inputs and "precision" not in inputs  # the Live tab's
    record_inputs = elem_ids_of_inputs(demo, "pg-record")
    assert {"pg-prompt", "pg-max-new", "pg-precision"} <= set(record_inputs)
    assert "prompt" not in record_inputs and "max-new" not in record_inputs


def test_analyzer_status_names_the_settings_it_ran_with():
    sampling = requests.parse_sampling(0.7, 0.9, 3)
    said = analyzer.settings_text(sampling, "float32", 64)
    assert said == "temperature 0.7, top-p 0.9, seed 3, float32, up to 64 new tokens"
    assert analyzer.settings_text(requests.parse_sampling(0, 1, 0), "bfloat16", 8).startswith("greedy (temperature 0)")


def live_frame(temperature: float, n: int = 12):
    request = requests.parse_live_request(
        PROMPT, ["fixed:4", "ar"], temperature, 1.0, 1, n, "embedded", "bfloat16", ["embedded"]
    )
    return list(live.live_frames(tiny_loader, request, 0.0, 0.0))


def test_a_sampled_or_stopped_live_run_keeps_the_last_greedy_one():
    greedy = live_frame(0.0)[-1]
    kept = playground_record.remember_greedy(None, greedy, PROMPT, 12)
    sampled = live_frame(1.0)[-1]
    stopped = live_frame(0.0)[1]  # a frame from before the end: what a Stop leaves
    assert "greedy (temperature 0)" in greedy.status and "temperature 1, top-p 1, seed 1" in sampled.status
    assert playground_record.remember_greedy(kept, sampled, PROMPT, 12) is kept
    assert playground_record.remember_greedy(kept, stopped, PROMPT, 12) is kept
    assert "reuse the Live tab's finished greedy run" in playground_record.source_text(kept, PROMPT, "bfloat16")
    assert "decode this prompt greedily" in playground_record.source_text(kept, "Another prompt", "bfloat16")
    record, text, *figures, t = playground_record.on_record(
        tiny_loader, ["embedded"], kept, PROMPT, 12, "embedded", "bfloat16", *KNOBS
    )
    assert record.meta["source"].startswith("the live run's") and "rounds" in text and len(figures) == 3
    assert t == KNOBS[playground_record.T_KNOB]  # the tiny pair has no pre-verifier to tune: t stays


def test_the_playground_records_its_own_prompt_without_a_live_run(one_thread):
    record, text, *_ = playground_record.on_record(
        tiny_loader, ["embedded"], None, "Name a colour.", 8, "embedded", "bfloat16", *KNOBS
    )
    assert "in the Playground" in record.meta["source"] and 1 <= len(record.tokens) <= 8 and "rounds" in text
    with pytest.raises(SpecScopeError, match="prompt is empty"):
        playground_record.on_record(tiny_loader, ["embedded"], None, "  ", 8, "embedded", "bfloat16", *KNOBS)


def test_errors_show_in_place_once():
    def refuses(_):
        raise SpecScopeError("nothing to record yet")

    out = shared.shown_errors(refuses, 5, at=1)(None)
    assert out[1] == shared.alert("nothing to record yet") and 'role="alert"' in out[1]
    assert all(u == {"__type__": "update"} for i, u in enumerate(out) if i != 1)  # the others left as they were

    def stream(_):
        yield ["first"]
        raise SpecScopeError("bad prompt set")

    assert list(shared.shown_errors(stream, 1)(None))[-1] == [shared.alert("bad prompt set")]


LOADERS = {
    "events": lambda path: analyzer.load_events(path),
    "sweep": lambda path: analyzer.load_sweep(path),
    "record": lambda path: playground_record.on_upload(tiny_loader, ["embedded"], path, "embedded", "bfloat16", *KNOBS),
}


@pytest.mark.parametrize(("loader", "name", "content"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_malformed_uploads_give_one_clear_message(tmp_path, loader, name, content):
    path = write_case(tmp_path, name, content)
    out = shared.shown_errors(LOADERS[loader], 3, at=0)(str(path))
    message = out[0]
    assert message.startswith('<div class="spec-alert"'), message
    assert "Traceback" not in message and len(message) < 400, message
    assert name in message or any(w in message for w in ("not a", "needs", "missing", "could not read", "no run"))


def test_a_huge_upload_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "huge.jsonl"
    big.write_bytes(b'{"a": 1}\n' * 300)
    with pytest.raises(SpecScopeError, match="takes files up to"):
        guards.check_upload(big, "the events file", max_bytes=1024)


def test_the_playground_t_starts_where_the_live_pacer_ran(embedded_f32):
    from spec_core.policies.pacer import PacerLength, parse_params

    t = playground_record.pacer_threshold(embedded_f32, 0.123)
    assert t != 0.123 and t == PacerLength.build(parse_params(None), embedded_f32).params.threshold
