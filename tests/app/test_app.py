"""The app's wiring: built at import without a model, handlers turn bad input into gr.Error, and the app launched
in-process and driven through gradio_client. The computations behind it are tested where they live
(tests/app/test_live.py, tests/engine/test_records.py, tests/unit/test_visuals.py).

A tiny random-weight pair (tests/conftest_app.py) stands in for the embedded one, so the file runs in seconds;
one test marked ``embedded`` runs the real pair end to end.
"""

from __future__ import annotations

import inspect
import socket

import gradio as gr
import pytest
from conftest_app import tiny_loader

import app
from spec_core.core.errors import SpecScopeError
from spec_core.serve import live, requests
from ui import analyzer, shared
from ui.live import N_LANES
from visuals.menus import live_method_choices

PROMPT = "Why is the sky blue?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_import_builds_demo_without_loading_a_model():
    assert isinstance(app.demo, gr.Blocks)
    assert app.get_pair is live.warm_pair and live._warm_pair.cache_info().currsize == 0  # nothing loaded
    assert not any(m.startswith("hf-") for m in live_method_choices())
    assert {"heuristic", "fixed:4", "ar"} <= set(live_method_choices())
    assert app.pair_choices()[0] == "embedded"


def test_app_stays_wiring_only():
    from pathlib import Path

    source = open(app.__file__).read()
    assert len(source.splitlines()) <= 120  # the three tabs and /generate, wired
    assert "import torch" not in source and "import plotly" not in source
    for module in (Path(app.__file__).parent / "ui").glob("*.py"):  # the wiring app.py builds on
        text = module.read_text()
        assert len(text.splitlines()) <= 200 and "import torch" not in text and "import plotly" not in text, module


def test_the_live_api_names_its_inputs_in_order():
    """``/live``'s parameters (scripts call it positionally) are the Live tab's inputs, each named by its handler."""
    demo = app.build_demo(tiny_loader)
    (k,) = [k for k, f in demo.fns.items() if f.api_name == "live"]
    params = list(inspect.signature(demo.fns[k].fn).parameters)
    assert params == [
        *("prompt", "method_a", "method_b", "method_c", "temperature", "top_p", "seed", "max_new", "pair"),
        *("precision", "show_rejected", "stop_request"),
    ]
    inputs = [demo.blocks[i] for i in demo.config["dependencies"][k]["inputs"]]
    named = [b.elem_id or b.label for b in inputs[:-1]]
    assert named == [
        *("prompt", "method-0", "method-1", "method-2", "temperature", "top-p", "seed", "max-new"),
        *("model pair (target,draft)", "precision", "show-rej"),
    ]
    assert isinstance(inputs[-1], gr.State)


def test_hub_pairs_only_when_allowed(monkeypatch):
    monkeypatch.delenv("SPECSCOPE_HUB_PAIRS", raising=False)
    assert app.pair_choices() == ["embedded"]
    monkeypatch.setenv("SPECSCOPE_HUB_PAIRS", "a/t,a/d")  # the operator's allowlist, never the visitor's
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert app.pair_choices()[1:] == ["a/t,a/d"]


def test_ui_errors_turn_specscope_errors_into_gr_errors():
    def bad(x):
        raise SpecScopeError(f"bad {x}")

    def bad_stream(x):
        yield 1
        raise SpecScopeError(f"bad stream {x}")

    with pytest.raises(gr.Error, match="bad 1"):
        shared.ui_errors(bad)(1)
    stream = shared.ui_errors(bad_stream)
    assert stream.__wrapped__ is bad_stream
    with pytest.raises(gr.Error, match="bad stream 2"):
        list(stream(2))


def test_view_updates_fill_slots_from_the_registry():
    frames = list(
        live.live_frames(
            tiny_loader,
            requests.parse_live_request(
                PROMPT, ["heuristic", "fixed:4", "ar"], 1.0, 1.0, 1, 12, "embedded", "bfloat16", ["embedded"]
            ),
            0.0,
            0.0,
        )
    )
    out = shared.view_updates(frames[-1].lanes)
    assert len(out) == 3 * shared.N_VIEW_SLOTS
    visible = [u["visible"] for u in out[0::3]]
    n = sum(visible)
    assert visible == [True] * n + [False] * (shared.N_VIEW_SLOTS - n) and n == 5  # 4 generic + heuristic's own
    assert "Draft length" in out[1] and out[2].data  # a figure with traces
    during = shared.figure_updates(frames[1], first=False)
    assert len(during) == 3 * shared.N_VIEW_SLOTS and all(u == gr.update() for u in during)  # no drawing mid-run


def test_replay_outputs_route_a_record_to_the_analyzer_slots():
    from test_visuals import AR, LANE

    from spec_core.serve.records import PromptRecord

    records = {"p1": PromptRecord("p1", "Why is the sky blue?", "qa", 0.0, {"ar": tuple(AR), "fixed:4": tuple(LANE)})}
    out = analyzer.replay_outputs(records, "p1")
    assert len(out) == 1 + 3 * 2 + 3 * shared.N_VIEW_SLOTS
    assert out[0].startswith("#### Prompt p1 (qa)") and "sky" in out[0]
    assert out[1].startswith("### fixed:4") and out[4].startswith("### ar")  # the method first, then ar
    assert 'data-kind="accepted"' in out[3] and 'data-kind="target"' in out[6]
    with pytest.raises(SpecScopeError, match="no run"):
        analyzer.replay_outputs(records, "zzz")


# -- through the server ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    demo = app.build_demo(tiny_loader)
    port = free_port()
    demo.queue().launch(
        prevent_thread_lock=True, server_port=port, server_name="127.0.0.1", quiet=True, **app.launch_kwargs()
    )
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
    # the final stats carry the verdict: from the run's own rounds and a plain step timed beside them
    for method in ("fixed:4", "confidence:0.4", "pacer"):
        stats = client.predict(PROMPT, method, 24, 0.0, 0, api_name="/generate")
        assert stats["verdict"] and "than ar" in stats["verdict"], (method, stats)
        assert 0 < stats["predicted_speedup"] <= stats["tau"] + 1e-9, (method, stats)
        assert stats["breakeven_acceptance"] is None or stats["breakeven_acceptance"] >= 0
        assert "breakeven_acceptance" in stats and stats["precision"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "fixed:4", 8, 0.0, 0), "prompt is empty"),
        ((PROMPT, "warp:9", 8, 0.0, 0), "unknown method"),
        ((PROMPT, "hf-assisted:4", 8, 0.0, 0), "bench-only"),
        ((PROMPT, "fixed:4", 0, 0.0, 0), "max_new_tokens"),
        ((PROMPT, "fixed:4", 8, -2.0, 0), "temperature"),
        ((PROMPT, "fixed:4", 100_000, 0.0, 0), r"max_new_tokens must be in \[1, 4096\], got 100000"),
        ((PROMPT, "fixed:4", 8, -1.0, 0), "temperature must be >= 0"),
    ],
)
def test_client_bad_arguments(client, args, message):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=message):
        client.predict(*args, api_name="/generate")


@pytest.mark.embedded
def test_embedded_pair_end_to_end():
    from spec_core.core.errors import SpecScopeError
    from spec_core.model.models import embedded_target_dir

    try:
        embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    request = requests.parse_generate_request("What is the capital of France?", "fixed:4", 16, 0.0, 0)
    last = list(live.stats_stream(app.get_pair(), request))[-1]
    assert 1 <= last["new_tokens"] <= 16 and last["tau"] >= 1.0 and last["text"].strip()
    # lossless at temperature 0: the speculative lane emits exactly plain decoding's tokens in float32 (the
    # precision setting's "exact"); in bf16 a multi-token verification pass and a one-token step round
    # differently (docs/LOG.md, Benchmark)
    exact = requests.parse_live_request(
        "Name a colour.", ["heuristic", "ar"], 0.0, 1.0, 0, 12, "embedded", "float32", ["embedded"]
    )
    frames = list(live.live_frames(app.get_pair, exact))
    lanes = frames[-1].lanes
    assert frames[-1].done and not frames[-1].errors and not frames[-1].divergences
    heur = [t for e in lanes["heuristic"] for t in e.emitted]
    plain = [t for e in lanes["ar"] for t in e.emitted]
    assert heur == plain


def test_client_live_tab_streams_lanes_and_figures(client):
    job = client.submit(
        PROMPT, "heuristic", "warp:9", "ar", 1.0, 1.0, 1, 20, "embedded", "bfloat16", True, api_name="/live"
    )
    final = job.result(timeout=120)
    status, lanes = final[0], final[1 : 1 + 3 * N_LANES]
    assert "Done" in status and "warp:9" in status
    assert [lane.split("\n")[0] for lane in lanes[0::3]] == ["### heuristic", "### warp:9", "### ar"]
    assert 'data-kind="accepted"' in lanes[2] and 'data-kind="target"' in lanes[8]
    assert "spec-error" in lanes[5] and "unknown method part" in lanes[5]  # the bad name fails its lane only
    plot = final[1 + 3 * N_LANES + 2]  # the first figure slot's plot
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
        job = client.submit(
            PROMPT,
            "fixed:4",
            requests.NONE_METHOD,
            "ar",
            1.0,
            1.0,
            1,
            400,
            "embedded",
            "bfloat16",
            True,
            api_name="/live",
        )
        deadline = time.time() + 60
        while len(calls) < 10 and time.time() < deadline:
            time.sleep(0.05)
        job.cancel()
        time.sleep(1.5)  # the handler stops at its next yield (every 0.5 s of model time)
        settled = len(calls)
        time.sleep(1.0)
        print("target passes before the stop took effect:", settled)
        assert len(calls) == settled, "generation went on after Stop"
        assert settled < 200, f"the run went too far before it was stopped ({settled} target passes)"
    finally:
        hook.remove()


def test_the_analyzer_has_an_intro_and_worded_headers_before_a_run():
    """Issue 45, item 7: one intro line, and before any run every table's headers are words (the per-category table
    read "1 | 2 | 3"), none in snake_case."""
    demo = app.build_demo(tiny_loader)
    by_elem = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    assert by_elem["an-intro"].value.startswith("Run one method and ar on every prompt")
    for elem in ("an-summary", "an-table", "an-leaderboard"):
        headers = by_elem[elem].value["headers"]
        assert headers and not any(h.isdigit() or "_" in h for h in map(str, headers)), (elem, headers)


SEED_TITLES = ("Draft length and accepted length", "PACER: threshold per block", "Ensemble weight w_t", "Training lens")


@pytest.mark.embedded
def test_the_default_generate_fills_the_four_seed_views():
    """Issue 45: the default Generate, as the Live handler runs it (frames, then the replayed fixed window, then the
    figures), on the real pair: the four seed views are shown with this run's data, each beside a fixed:2 trace,
    each caption opening with what to look for."""
    from spec_core.model.models import embedded_target_dir
    from ui.live_baseline import with_baseline

    try:
        embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    request = requests.parse_live_request(
        app.EXAMPLES[0][0], list(app.DEFAULT_METHODS), 0.0, 1.0, 0, 48, "embedded", "bfloat16", ["embedded"]
    )
    frame = with_baseline(list(live.live_frames(app.get_pair, request, 0.0, 0.0))[-1], app.get_pair, request)
    assert frame.baseline is not None and frame.baseline.policy == "fixed:2", frame.status
    assert "fixed:2 baseline is replayed" in frame.status
    out = shared.figure_updates(frame, first=False)
    shown = {out[i + 1]: out[i + 2] for i in range(0, len(out), 3) if out[i]["visible"]}
    for title in SEED_TITLES:
        caption, fig = next(((c, f) for c, f in shown.items() if title in c), (None, None))
        assert fig is not None, (title, list(shown))
        names = [t.name or "" for t in fig.data]
        assert any(n.startswith("fixed:2") for n in names), (title, names)
        assert any(t.x is not None and len(t.x) for t in fig.data if not (t.name or "").startswith("fixed:2")), title
        assert caption.split("— ", 1)[1].startswith("Look for"), caption
    assert frame.speeds["hybrid"].measured is not None  # the payoff: hybrid's speedup against ar
