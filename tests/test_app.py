"""The app's handlers called directly, then the app launched in-process and driven through gradio_client.

A tiny random-weight pair (tests/conftest_app.py) stands in for the embedded one, so the file runs in seconds;
one test marked ``embedded`` runs the real pair end to end.
"""

from __future__ import annotations

import socket

import gradio as gr
import pytest
from conftest_app import MIXED, tiny_loader

import app
from spec_core.types import SamplingConfig

PROMPT = "Why is the sky blue?"
SAMPLING = SamplingConfig(temperature=MIXED["temperature"], seed=MIXED["seed"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def frames():
    return list(app.live_frames(tiny_loader, PROMPT, ["heuristic", "fixed:4", "ar"], 24, SAMPLING, every_s=0.0))


def test_import_builds_demo_without_loading_a_model():
    assert isinstance(app.demo, gr.Blocks)
    assert app.get_pair.cache_info().currsize == 0
    assert not any(m.startswith("hf-") for m in app.live_method_choices())
    assert {"heuristic", "fixed:4", "ar"} <= set(app.live_method_choices())
    assert app.pair_choices()[0] == "embedded"


def test_hub_pairs_only_when_allowed(monkeypatch):
    monkeypatch.delenv(app.ALLOW_HUB_ENV, raising=False)
    assert app.pair_choices() == ["embedded"]
    monkeypatch.setenv(app.ALLOW_HUB_ENV, "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert app.pair_choices()[1:] == list(app.HUB_PAIRS)
    with pytest.raises(gr.Error, match="not offered"):
        app.check_pair_name("someone/else", ["embedded"])


def test_live_frames_interleave_every_method(frames):
    last = frames[-1]
    assert last.done and "Done" in last.status and not last.errors
    for method, events in last.lanes.items():
        assert sum(len(e.emitted) for e in events) == 24, method
        assert all(e.method == method for e in events)
    assert len(last.lanes["ar"]) == 24  # one target pass per token
    assert len(last.lanes["fixed:4"]) < 24  # speculative rounds emit more than one token on average
    assert frames[0].status.startswith("Loading")


def test_lane_view_counters_and_tokens(frames):
    header, counters, body = app.lane_view(frames[-1], "fixed:4")
    assert header == "### fixed:4"
    assert 'data-method="fixed:4"' in counters and 'data-state="done"' in counters and "×" in counters
    assert 'data-kind="accepted"' in body and ('data-kind="recovered"' in body or 'data-kind="bonus"' in body)
    _, _, ar_body = app.lane_view(frames[-1], "ar")
    assert 'data-kind="target"' in ar_body and 'data-kind="accepted"' not in ar_body


def test_view_updates_fill_slots_from_the_registry(frames):
    out = app.view_updates(frames[-1].lanes)
    assert len(out) == 3 * app.N_VIEW_SLOTS
    visible = [u["visible"] for u in out[0::3]]
    n = sum(visible)
    assert visible == [True] * n + [False] * (app.N_VIEW_SLOTS - n) and n == 5  # 4 generic + heuristic's own
    assert "Draft length" in out[1] and out[2].data  # a figure with traces


def test_a_method_with_missing_assets_gets_a_message_not_a_crash():
    frames = list(app.live_frames(tiny_loader, PROMPT, ["block:dpace", "fixed:2"], 8, SAMPLING, every_s=0.0))
    last = frames[-1]
    assert "block:dpace" in last.errors and "cannot run" in last.errors["block:dpace"]
    assert sum(len(e.emitted) for e in last.lanes["fixed:2"]) == 8
    _, _, body = app.lane_view(last, "block:dpace")
    assert "spec-error" in body


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: app.check_method("nonsense"), "unknown method part"),
        (lambda: app.check_method("hf-ar"), "bench-only"),
        (lambda: app.check_method(""), "empty"),
        (lambda: app.check_int(0, "max_new_tokens", 1, 10), r"in \[1, 10\]"),
        (lambda: app.check_int(2.5, "max_new_tokens", 1, 10), "integer"),
        (lambda: app.check_sampling(-1.0, 1.0, 0), "temperature"),
        (lambda: app.check_sampling(0.0, 0.0, 0), "top_p"),
        (lambda: app.check_sampling(0.0, 1.0, -3), "seed"),
        (lambda: app.check_prompt("   "), "prompt is empty"),
        (lambda: app.selected_methods(app.NONE_METHOD, "", app.NONE_METHOD), "at least one"),
    ],
)
def test_bad_arguments_raise_gr_error(call, message):
    with pytest.raises(gr.Error, match=message):
        call()


def test_selected_methods_dedupes():
    assert app.selected_methods("fixed:4", "fixed:4", app.NONE_METHOD) == ["fixed:4"]


def test_api_stream_last_output_is_stats():
    outs = list(app.api_stream(tiny_loader, PROMPT, "fixed:4", 12, 1.0, 1))
    assert len(outs) >= 2
    last = outs[-1]
    assert {"new_tokens", "tau", "tokens_per_s", "text", "acceptance_rate"} <= set(last)
    assert last["new_tokens"] == 12 and last["finished"] and last["tau"] >= 1.0 and last["text"]


def test_analyzer_table_and_event_files_round_trip(tmp_path):
    prompts = [{"id": "a", "category": "x", "prompt": PROMPT}, {"id": "b", "category": "y", "prompt": "Say hi."}]
    records = list(app.analyze_records(tiny_loader, prompts, "fixed:4", 10, SAMPLING))[-1]
    table = app.table_rows(records)
    assert list(table.columns) == app.TABLE_COLUMNS
    assert list(table["prompt_id"]) == ["a", "b"] and set(table["method"]) == {"fixed:4"}
    assert (table["new_tokens"] == 10).all() and (table["speedup_vs_ar"] > 0).all()
    csv_path, jsonl_path = app.write_downloads(records, table)
    assert open(csv_path).readline().strip() == ",".join(app.TABLE_COLUMNS)
    back = app.records_from_file(jsonl_path)
    assert back.keys() == records.keys() and back["a"]["prompt"] == PROMPT
    assert app.table_rows(back).equals(table)
    out = app.replay_outputs(back, "b")
    assert out[0].startswith("#### Prompt b") and 'data-kind="accepted"' in "".join(map(str, out[1:7]))
    with pytest.raises(gr.Error, match="no run"):
        app.replay_outputs(back, "zzz")


def test_bad_events_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(Exception, match="not a SpecScope event"):
        app.records_from_file(bad)


# -- through the server ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    demo = app.build_demo(tiny_loader)
    port = free_port()
    demo.queue().launch(prevent_thread_lock=True, server_port=port, server_name="127.0.0.1", quiet=True,
                        **app.launch_kwargs())  # fmt: skip
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        demo.close()


def test_client_generate_streams_and_ends_with_stats(client):
    assert "/generate" in client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    job = client.submit(PROMPT, "heuristic", 16, 1.0, 1, api_name="/generate")
    final = job.result(timeout=120)
    assert len(job.outputs()) >= 2  # streamed
    assert final["new_tokens"] == 16 and final["tau"] >= 1 and final["tokens_per_s"] > 0 and final["text"]
    again = client.predict(PROMPT, "heuristic", 16, 1.0, 1, api_name="/generate")
    assert again["text"] == final["text"]  # seeded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "fixed:4", 8, 0.0, 0), "prompt is empty"),
        ((PROMPT, "warp:9", 8, 0.0, 0), "unknown method"),
        ((PROMPT, "hf-assisted:4", 8, 0.0, 0), "bench-only"),
        ((PROMPT, "fixed:4", 0, 0.0, 0), "max_new_tokens"),
        ((PROMPT, "fixed:4", 8, -2.0, 0), "temperature"),
    ],
)
def test_client_bad_arguments(client, args, message):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=message):
        client.predict(*args, api_name="/generate")


@pytest.mark.embedded
def test_embedded_pair_end_to_end():
    from spec_core.errors import SpecScopeError
    from spec_core.models import embedded_target_dir

    try:
        embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    outs = list(app.api_stream(app.get_pair, "What is the capital of France?", "fixed:4", 16, 0.0, 0))
    last = outs[-1]
    assert 1 <= last["new_tokens"] <= 16 and last["tau"] >= 1.0 and last["text"].strip()
    from spec_core.models import load_pair

    # lossless at temperature 0: the speculative lane emits exactly plain decoding's tokens — in float32, since
    # in bf16 a multi-token verification pass and a one-token step round differently (README, Benchmark)
    float32 = lambda name: load_pair(name, dtype="float32")  # noqa: E731
    frames = list(app.live_frames(float32, "Name a colour.", ["heuristic", "ar"], 12, SamplingConfig()))
    lanes = frames[-1].lanes
    assert frames[-1].done and not frames[-1].errors
    heur = [t for e in lanes["heuristic"] for t in e.emitted]
    plain = [t for e in lanes["ar"] for t in e.emitted]
    assert heur == plain


def test_client_live_tab_streams_lanes_and_figures(client):
    job = client.submit(PROMPT, "heuristic", "fixed:4", "ar", 1.0, 1.0, 1, 20, "embedded", True, api_name="/live")
    final = job.result(timeout=120)
    status, lanes = final[0], final[1 : 1 + 3 * app.N_LANES]
    assert "Done" in status
    assert [lanes[0], lanes[3], lanes[6]] == ["### heuristic", "### fixed:4", "### ar"]
    assert 'data-kind="accepted"' in lanes[2] and 'data-kind="target"' in lanes[8]
    plot = final[1 + 3 * app.N_LANES + 2]  # the first figure slot's plot
    assert plot and "draft" in str(plot).lower()


def test_stop_really_stops(client):
    """Cancelling the live run (what the Stop button does) stops the engine: no target passes afterwards."""
    import time

    pair = tiny_loader()
    calls = []

    def slow(*_):
        calls.append(time.perf_counter())
        time.sleep(0.02)

    hook = pair.target.register_forward_hook(slow)
    try:
        job = client.submit(PROMPT, "fixed:4", app.NONE_METHOD, "ar", 1.0, 1.0, 1, 400, "embedded", True,
                            api_name="/live")  # fmt: skip
        deadline = time.time() + 60
        while len(calls) < 10 and time.time() < deadline:
            time.sleep(0.05)
        job.cancel()
        time.sleep(1.0)  # the handler stops at its next yield (every 0.25 s)
        settled = len(calls)
        time.sleep(1.0)
        print("target passes before the stop took effect:", settled)
        assert len(calls) == settled, "generation went on after Stop"
        assert settled < 200, f"the run went too far before it was stopped ({settled} target passes)"
    finally:
        hook.remove()
