"""SpecScope: watch speculative decoding work — live side by side, token by token, round by round.

Wiring only (STYLE.md §6): the engine (:mod:`spec_core`) yields one :class:`~spec_core.types.RoundEvent` per
round; :mod:`visuals` turns events into token HTML and plotly figures; this file lays out the Gradio Blocks and
routes events between them. No model is loaded at import time: the pair is loaded on first use, warmed up and
cached (:func:`get_pair`). ``build_demo(pair_loader=...)`` lets tests inject a tiny pair.

Side by side on a small CPU, methods do not run in threads (they would fight for the cores and distort every
speed figure): :func:`spec_core.session.interleave` advances each method one round at a time in turn, and each
method's tokens/s is timed on its own clock (Σ draft_s + verify_s of its rounds).

Run: ``python app.py`` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT).
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from spec_core.analysis.bench import load_prompts
from spec_core.engine import MAX_NEW_TOKENS_LIMIT, Generation
from spec_core.errors import SpecScopeError
from spec_core.methods import known_methods, parse_method
from spec_core.session import (
    event_record,
    events_to_jsonl,
    interleave,
    lane_stats,
    read_events_jsonl,
    speedup,
)
from spec_core.types import RoundEvent, SamplingConfig
from visuals import stepthrough, tokens, views

ROOT = Path(__file__).resolve().parent
CSS_PATH = ROOT / "assets" / "app.css"
PROMPTS_DIR = ROOT / "prompts"
PROJECT_PROMPTS = PROMPTS_DIR / "specscope.jsonl"
EXAMPLE_PROMPTS = PROMPTS_DIR / "examples.jsonl"

DEFAULT_METHODS = ("heuristic", "fixed:4", "ar")  # best adaptive policy available · fixed window · plain decoding
NONE_METHOD = "(none)"
N_LANES = 3  # methods side by side
N_VIEW_SLOTS = 8  # figure slots filled from the view registry (visuals.views), generic views first
UI_MAX_NEW_TOKENS = 512
YIELD_EVERY_S = 0.25  # UI refresh period while streaming (a refresh per round would flood the browser)
STEP_DELAY_S = 1.2  # pause between the steps of a slow replay
ALLOW_HUB_ENV = "SPECSCOPE_ALLOW_HUB"  # "1": offer the hub pairs of HUB_PAIRS (needs network and memory)
HUB_PAIRS = (  # target,draft pairs that share a tokenizer
    "HuggingFaceTB/SmolLM2-360M-Instruct,HuggingFaceTB/SmolLM2-135M-Instruct",
    "HuggingFaceTB/SmolLM2-1.7B-Instruct,HuggingFaceTB/SmolLM2-135M-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct,Qwen/Qwen2.5-0.5B-Instruct",
)
EXAMPLES = [
    ["Explain in three sentences why the sky is blue.", "heuristic", "fixed:4", "ar"],
    ["Write a Python function that checks whether a number is prime.", "heuristic", "fixed:2", "ar"],
    ["List five fruits, one per line.", "confidence:0.4", "fixed:4", "ar"],
    ["What is the capital of France? Answer in one word.", "heuristic", "fixed:6", "ar"],
]

PairLoader = Callable[[str], Any]  # pair name → spec_core.models.ModelPair


# -- the model pair: loaded lazily, warmed up, cached ---------------------------------------------------------


@functools.lru_cache(maxsize=2)
def get_pair(name: str = "embedded"):
    """Load a pair (CUDA when present, else CPU) and warm it up once, so the first timed rounds are honest."""
    from spec_core.models import load_pair

    pair = load_pair(name)
    warm = Generation(pair, "Hello", "fixed:2", max_new_tokens=4, sampling=SamplingConfig())
    for _ in warm.rounds():
        pass
    return pair


def pair_choices() -> list[str]:
    """The embedded pair, plus the hub allowlist when the environment allows it."""
    hub_ok = os.environ.get(ALLOW_HUB_ENV) == "1" and os.environ.get("HF_HUB_OFFLINE") != "1"
    return ["embedded", *(HUB_PAIRS if hub_ok else ())]


def live_method_choices() -> list[str]:
    """Every engine method the live tab can run (peers, which run transformers' own generate, are bench-only)."""
    return [m for m in known_methods() if not m.startswith("hf-")]


# -- argument checks: every bad input becomes a clear gr.Error ------------------------------------------------


def check_method(method: str) -> str:
    method = (method or "").strip()
    try:
        spec = parse_method(method)
    except SpecScopeError as err:
        raise gr.Error(str(err)) from err
    if spec.kind == "peer":
        raise gr.Error(f"{method!r} runs transformers' own generate: it is bench-only (`make bench`)")
    return method


def check_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise gr.Error(f"{name} must be an integer, got {value!r}")
    if int(value) != value:
        raise gr.Error(f"{name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise gr.Error(f"{name} must be in [{low}, {high}], got {int(value)}")
    return int(value)


def check_sampling(temperature: Any, top_p: Any, seed: Any) -> SamplingConfig:
    for name, v in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise gr.Error(f"{name} must be a number, got {v!r}")
    seed = check_int(seed, "seed", 0, 2**31 - 1)
    try:
        return SamplingConfig(temperature=float(temperature), top_p=float(top_p), seed=seed).validate()
    except SpecScopeError as err:
        raise gr.Error(str(err)) from err


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise gr.Error("the prompt is empty; type something or click an example")
    return prompt


def check_pair_name(name: str, allowed: Sequence[str]) -> str:
    if name not in allowed:
        raise gr.Error(f"model pair {name!r} is not offered here; choose one of {list(allowed)}")
    return name


def load(pair_loader: PairLoader, name: str):
    try:
        return pair_loader(name)
    except SpecScopeError as err:
        raise gr.Error(f"cannot load the model pair {name!r}: {err}") from err


# -- live runs: several methods, interleaved round by round ---------------------------------------------------


@dataclass
class LiveFrame:
    """What the live tab shows at one moment."""

    methods: list[str]
    lanes: dict[str, list[RoundEvent]]
    errors: dict[str, str] = field(default_factory=dict)  # method → why it could not run
    status: str = ""
    done: bool = False
    temperature: float = 0.0

    def snapshot(self) -> LiveFrame:
        """A copy that later rounds do not change (events themselves are frozen)."""
        lanes = {m: list(ev) for m, ev in self.lanes.items()}
        return LiveFrame(list(self.methods), lanes, dict(self.errors), self.status, self.done, self.temperature)


def _guarded(method: str, rounds: Iterator[RoundEvent], errors: dict[str, str]) -> Iterator[RoundEvent]:
    """A lane's rounds; a method whose assets are missing (e.g. an untrained block drafter) ends with a note."""
    try:
        yield from rounds
    except (SpecScopeError, ImportError, FileNotFoundError) as err:
        errors[method] = f"{method} cannot run here: {err}"


def live_frames(
    pair_loader: PairLoader,
    prompt: str,
    methods: Sequence[str],
    max_new_tokens: int,
    sampling: SamplingConfig,
    pair_name: str = "embedded",
    progress: Callable[..., Any] | None = None,
    every_s: float = YIELD_EVERY_S,
) -> Iterator[LiveFrame]:
    """Run ``methods`` on one prompt, interleaved; yield a frame every ``every_s`` seconds and at the end."""
    frame = LiveFrame(list(methods), {m: [] for m in methods}, temperature=sampling.temperature)
    frame.status = f"Loading the model pair {pair_name!r} (first use: de-quantize, load, warm up)…"
    yield frame.snapshot()
    if progress is not None:
        progress(0.0, desc=f"Loading and warming up {pair_name}…")
    pair = load(pair_loader, pair_name)
    generations = []
    for m in methods:
        try:
            generations.append(Generation(pair, prompt, m, max_new_tokens, sampling))
        except SpecScopeError as err:
            raise gr.Error(str(err)) from err
    device = f"{pair.device.type} · {str(pair.dtype).removeprefix('torch.')}"
    frame.status = f"Generating on {pair.name} ({device})…"
    yield frame.snapshot()
    lanes = [_guarded(m, g.rounds(), frame.errors) for m, g in zip(methods, generations)]
    last = time.perf_counter()
    for i, event in interleave(lanes):
        frame.lanes[methods[i]].append(event)
        if time.perf_counter() - last >= every_s:
            last = time.perf_counter()
            yield frame.snapshot()
    frame.done = True
    frame.status = f"Done on {pair.name} ({device})." + "".join(f" ⚠ {e}" for e in frame.errors.values())
    yield frame.snapshot()


def lane_view(frame: LiveFrame, method: str, show_rejected: bool = True) -> tuple[str, str, str]:
    """(header markdown, counters html, tokens html) of one lane."""
    events = frame.lanes.get(method, [])
    baseline = lane_stats(frame.lanes["ar"], "ar") if frame.lanes.get("ar") else None
    stats = lane_stats(events, method)
    header = f"### {method}"
    body = tokens.tokens_html(events, show_rejected, placeholder="waiting for the first round…")
    if method in frame.errors:
        body = f'<div class="spec-error">{frame.errors[method]}</div>'
    return header, tokens.counters_html(stats, speedup(stats, baseline) if method != "ar" else 1.0), body


def view_updates(lanes: dict[str, Sequence[RoundEvent]], slots: int = N_VIEW_SLOTS) -> list[Any]:
    """For each figure slot: (visibility update, caption markdown, figure). Views come from the registry."""
    active = views.views_for(list(lanes))[:slots]
    out: list[Any] = []
    for i in range(slots):
        if i < len(active):
            v = active[i]
            out += [gr.update(visible=True), f"**{v.title}** — {v.caption}", views.build(v, lanes)]
        else:
            out += [gr.update(visible=False), "", None]
    return out


def selected_methods(*choices: str) -> list[str]:
    methods: list[str] = []
    for c in choices:
        if c and c.strip() and c != NONE_METHOD:
            m = check_method(c)
            if m not in methods:
                methods.append(m)
    if not methods:
        raise gr.Error("choose at least one method")
    return methods


# -- the /generate API ----------------------------------------------------------------------------------------


def api_stream(
    pair_loader: PairLoader,
    prompt: str,
    method: str,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    pair_name: str = "embedded",
) -> Iterator[dict[str, Any]]:
    """Stream stats dicts; the last one holds the whole text and the final ``new_tokens, tau, tokens_per_s``."""
    prompt = check_prompt(prompt)
    method = check_method(method)
    max_new = check_int(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS_LIMIT)
    sampling = check_sampling(temperature, 1.0, seed)
    pair = load(pair_loader, pair_name)
    try:
        run = Generation(pair, prompt, method, max_new, sampling)
        for event in run.rounds():
            stats = lane_stats(run.events, method)
            text = pair.tokenizer.decode(run.new_tokens, skip_special_tokens=True)
            yield {**stats.as_dict(), "text": text, "round": event.index, "finished": event.finished}
    except (SpecScopeError, ImportError, FileNotFoundError) as err:
        raise gr.Error(f"{method} cannot run: {err}") from err
    result = run.result()
    final = lane_stats(run.events, method).as_dict()
    yield {**final, "text": result.text, "wall_s": result.stats.wall_s, "finished": True}


# -- the analyzer ---------------------------------------------------------------------------------------------

TABLE_COLUMNS = ["prompt_id", "category", "method", "new_tokens", "tau", "alpha", "tokens_per_s", "ar_tokens_per_s",
                 "speedup_vs_ar"]  # fmt: skip


def table_rows(records: dict[str, dict[str, Any]], method: str | None = None) -> pd.DataFrame:
    """One row per prompt and non-ar method: τ, α, tokens/s and speedup against the same prompt's ar run."""
    rows = []
    for pid, rec in records.items():
        lanes = rec["lanes"]
        base = lane_stats(lanes["ar"], "ar") if lanes.get("ar") else None
        for m, events in lanes.items():
            if (m == "ar" and len(lanes) > 1) or (method and m != method):
                continue
            s = lane_stats(events, m)
            sp = speedup(s, base)
            rows.append([pid, rec.get("category", ""), m, s.new_tokens, round(s.tau, 3), round(s.acceptance_rate, 3),
                         round(s.tokens_per_s, 2), round(base.tokens_per_s, 2) if base else None,
                         round(sp, 3) if sp is not None else None])  # fmt: skip
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def analyze_records(
    pair_loader: PairLoader,
    prompts: Sequence[dict[str, str]],
    method: str,
    max_new_tokens: int,
    sampling: SamplingConfig,
    pair_name: str = "embedded",
) -> Iterator[dict[str, dict[str, Any]]]:
    """Run ``ar`` and ``method`` on every prompt (one after the other); yield the records after each prompt."""
    pair = load(pair_loader, pair_name)
    records: dict[str, dict[str, Any]] = {}
    for row in prompts:
        lanes: dict[str, list[RoundEvent]] = {}
        for m in dict.fromkeys(["ar", method]):
            try:
                run = Generation(pair, row["prompt"], m, max_new_tokens, sampling)
                lanes[m] = list(run.rounds())
            except (SpecScopeError, ImportError, FileNotFoundError) as err:
                raise gr.Error(f"prompt {row['id']!r}, {m}: {err}") from err
        records[row["id"]] = {"prompt": row["prompt"], "category": row.get("category", ""), "lanes": lanes,
                              "temperature": sampling.temperature}  # fmt: skip
        yield records


def records_jsonl(records: dict[str, dict[str, Any]]) -> str:
    lines = []
    for pid, rec in records.items():
        for events in rec["lanes"].values():
            meta = {"prompt_id": pid, "category": rec.get("category", ""), "prompt": rec.get("prompt", ""),
                    "temperature": rec.get("temperature", 0.0)}  # fmt: skip
            lines += [event_record(e, **meta) for e in events]
    return events_to_jsonl(lines)


def records_from_file(path: str | Path) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for meta, event in read_events_jsonl(path):
        pid = str(meta.get("prompt_id", "run"))
        rec = records.setdefault(pid, {"prompt": meta.get("prompt", ""), "category": meta.get("category", ""),
                                       "lanes": {}, "temperature": meta.get("temperature", 0.0)})  # fmt: skip
        rec["lanes"].setdefault(event.method, []).append(event)
    return records


def prompt_files() -> list[str]:
    files = [p for p in (PROJECT_PROMPTS, EXAMPLE_PROMPTS) if p.exists()]
    files += sorted(p for p in PROMPTS_DIR.glob("*.jsonl") if p not in files) if PROMPTS_DIR.exists() else []
    return [str(p.relative_to(ROOT)) for p in files]


def write_downloads(records: dict[str, dict[str, Any]], table: pd.DataFrame) -> tuple[str, str]:
    out = Path(tempfile.mkdtemp(prefix="specscope-"))
    csv_path, jsonl_path = out / "specscope_analyzer.csv", out / "specscope_events.jsonl"
    table.to_csv(csv_path, index=False)
    jsonl_path.write_text(records_jsonl(records), encoding="utf-8")
    return str(csv_path), str(jsonl_path)


# -- the UI ---------------------------------------------------------------------------------------------------


def _view_slots(prefix: str) -> list[Any]:
    """Figure slots: [column, caption, plot] × N_VIEW_SLOTS, two per row."""
    comps: list[Any] = []
    for row in range(0, N_VIEW_SLOTS, 2):
        with gr.Row(equal_height=False):
            for i in range(row, min(row + 2, N_VIEW_SLOTS)):
                with gr.Column(visible=False, elem_classes="spec-view", elem_id=f"{prefix}-view-{i}") as col:
                    caption = gr.Markdown()
                    plot = gr.Plot(show_label=False)
                comps += [col, caption, plot]
    return comps


def build_demo(pair_loader: PairLoader = get_pair) -> gr.Blocks:
    """The whole app. ``pair_loader(name) -> ModelPair`` is the only way handlers reach a model."""
    pairs = pair_choices()
    methods = live_method_choices()
    with gr.Blocks(title="SpecScope — speculative decoding, visualised") as demo:
        gr.Markdown(
            "# SpecScope\nA small **draft** model proposes tokens; the **target** checks them all in one forward "
            "pass and keeps the longest prefix it agrees with. Same output as the target alone, fewer target passes."
        )
        with gr.Tab("Live", id="live"):
            with gr.Row():
                prompt = gr.Textbox(label="Prompt", lines=2, scale=4, value=EXAMPLES[0][0], elem_id="prompt")
                with gr.Column(scale=1, min_width=160):
                    run_btn = gr.Button("Generate", variant="primary", elem_id="run")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
            with gr.Row():
                method_boxes = [
                    gr.Dropdown(
                        [*methods, NONE_METHOD],
                        value=DEFAULT_METHODS[i],
                        label=f"Method {'ABC'[i]}",
                        allow_custom_value=True,
                        elem_id=f"method-{i}",
                        info="e.g. fixed:K, heuristic, confidence:T, block:dpace, ar",
                    )  # fmt: skip
                    for i in range(N_LANES)
                ]
            with gr.Accordion("Settings", open=False):
                with gr.Row():
                    temperature = gr.Slider(
                        0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)", elem_id="temperature"
                    )
                    top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p")
                    seed = gr.Number(value=0, precision=0, label="seed", minimum=0)
                    max_new = gr.Slider(
                        1, UI_MAX_NEW_TOKENS, value=96, step=1, label="max new tokens", elem_id="max-new"
                    )
                    pair_box = gr.Dropdown(pairs, value=pairs[0], label="model pair (target,draft)")
            gr.Examples(EXAMPLES, inputs=[prompt, *method_boxes], label="Examples")
            status = gr.Markdown(elem_id="status")
            with gr.Row():
                gr.HTML(tokens.legend_html())
                show_rej = gr.Checkbox(True, label="show rejected drafts", scale=0, min_width=200, elem_id="show-rej")
            lane_comps = []
            with gr.Row(equal_height=False):
                for i in range(N_LANES):
                    with gr.Column(elem_classes="spec-lane", elem_id=f"lane-{i}"):
                        lane_comps += [gr.Markdown(f"### {DEFAULT_METHODS[i]}"), gr.HTML(), gr.HTML()]
            live_slots = _view_slots("live")
            with gr.Accordion("Step through one round (teaching)", open=False):
                with gr.Row():
                    st_lane = gr.Dropdown([], label="method", elem_id="st-lane")
                    st_round = gr.Slider(0, 1, value=0, step=1, label="round")
                    st_step = gr.Radio(list(stepthrough.STEPS), value="draft", label="step")
                    st_play = gr.Button("Replay this round slowly")
                st_html = gr.HTML(elem_id="stepthrough")
            live_state = gr.State(None)

        with gr.Tab("Analyzer", id="analyzer"):
            files = prompt_files()
            with gr.Row():
                prompt_file = gr.Dropdown(files, value=files[0] if files else None, label="prompt set",
                                          allow_custom_value=False)  # fmt: skip
                upload = gr.File(label="…or upload a prompt JSONL (id, category, prompt)", file_types=[".jsonl"],
                                 type="filepath")  # fmt: skip
            with gr.Row():
                an_method = gr.Dropdown(methods, value="heuristic", label="method (compared with ar)",
                                        allow_custom_value=True)  # fmt: skip
                an_limit = gr.Slider(1, 200, value=5, step=1, label="prompts to run (first N)")
                an_max_new = gr.Slider(1, UI_MAX_NEW_TOKENS, value=64, step=1, label="max new tokens")
                an_run = gr.Button("Run prompt set", variant="primary")
                an_stop = gr.Button("Stop", variant="stop")
            an_status = gr.Markdown()
            table = gr.Dataframe(headers=TABLE_COLUMNS, interactive=False, label="per-prompt results (click a "
                                 "header to sort, a row to replay)", elem_id="an-table")  # fmt: skip
            with gr.Row():
                csv_dl = gr.DownloadButton("Download table (CSV)", value=None)
                jsonl_dl = gr.DownloadButton("Download events (JSONL)", value=None)
                events_up = gr.UploadButton("Load a saved events file", file_types=[".jsonl"], type="filepath")
            an_title = gr.Markdown()
            an_lanes = []
            with gr.Row(equal_height=False):
                for _ in range(2):
                    with gr.Column(elem_classes="spec-lane"):
                        an_lanes += [gr.Markdown(), gr.HTML(), gr.HTML()]
            an_slots = _view_slots("an")
            an_state = gr.State(None)

        # -- handlers (closures over pair_loader: no globals) ----------------------------------------------

        def lane_values(frame: LiveFrame, show: bool) -> list[Any]:
            vals: list[Any] = []
            for i in range(N_LANES):
                vals += list(lane_view(frame, frame.methods[i], show)) if i < len(frame.methods) else ["### –", "", ""]
            return vals

        def on_live(p, m1, m2, m3, t, tp, s, n, pname, show, progress=gr.Progress()):  # noqa: B008 (gradio's idiom)
            check_prompt(p)
            chosen = selected_methods(m1, m2, m3)
            sampling = check_sampling(t, tp, s)
            n = check_int(n, "max new tokens", 1, MAX_NEW_TOKENS_LIMIT)
            check_pair_name(pname, pairs)
            for frame in live_frames(pair_loader, p, chosen, n, sampling, pname, progress):
                lane_vals = lane_values(frame, show)
                drafting = [m for m in chosen if m != "ar"] or chosen
                longest = max((len(ev) for ev in frame.lanes.values()), default=1)
                lane_pick = gr.update(choices=chosen, value=drafting[0])
                round_pick = gr.update(maximum=max(longest - 1, 1))
                yield [frame.status, *lane_vals, *view_updates(frame.lanes), frame, lane_pick, round_pick]

        live_event = run_btn.click(
            on_live,
            [prompt, *method_boxes, temperature, top_p, seed, max_new, pair_box, show_rej],
            [status, *lane_comps, *live_slots, live_state, st_lane, st_round],
            api_name="live",
            api_visibility="undocumented",  # callable (the tests drive it), not advertised: /generate is the API
        )
        stop_btn.click(None, cancels=[live_event])
        show_rej.change(
            lambda frame, show: lane_values(frame, show) if frame is not None else [gr.update()] * (3 * N_LANES),
            [live_state, show_rej],
            lane_comps,
            api_visibility="private",
        )

        def on_step(frame, lane, rnd, step):
            if frame is None or not lane or not frame.lanes.get(lane):
                return "<p>Generate something first, then pick a method and a round.</p>"
            events = frame.lanes[lane]
            event = events[min(int(rnd), len(events) - 1)]
            return stepthrough.round_step_html(event, step, frame.temperature)

        for comp in (st_lane, st_round, st_step):
            comp.change(on_step, [live_state, st_lane, st_round, st_step], st_html, api_visibility="private")

        def on_play(frame, lane, rnd):
            for step in stepthrough.STEPS:
                yield step, on_step(frame, lane, rnd, step)
                time.sleep(STEP_DELAY_S)

        st_play.click(on_play, [live_state, st_lane, st_round], [st_step, st_html], api_visibility="private")

        def on_analyze(pfile, up, method, limit, n, t, tp, s, pname, progress=gr.Progress()):  # noqa: B008 (gradio's idiom)
            method = check_method(method)
            sampling = check_sampling(t, tp, s)
            n = check_int(n, "max new tokens", 1, MAX_NEW_TOKENS_LIMIT)
            limit = check_int(limit, "prompts to run", 1, 10_000)
            check_pair_name(pname, pairs)
            source = up or (str(ROOT / pfile) if pfile else None)
            if not source:
                raise gr.Error("no prompt set: upload a JSONL file (id, category, prompt per line)")
            try:
                prompts = load_prompts(source)[:limit]
            except SpecScopeError as err:
                raise gr.Error(str(err)) from err
            yield f"Loading {pname} and running {len(prompts)} prompts × (ar, {method})…", None, None, None, None
            records: dict[str, dict[str, Any]] = {}
            for k, records in enumerate(analyze_records(pair_loader, prompts, method, n, sampling, pname), 1):
                progress(k / len(prompts), desc=f"prompt {k}/{len(prompts)}")
                yield f"{k}/{len(prompts)} prompts done…", table_rows(records), records, None, None
            df = table_rows(records)
            csv_path, jsonl_path = write_downloads(records, df)
            yield f"Done: {len(records)} prompts. Pick a row to replay it.", df, records, csv_path, jsonl_path

        an_event = an_run.click(
            on_analyze,
            [prompt_file, upload, an_method, an_limit, an_max_new, temperature, top_p, seed, pair_box],
            [an_status, table, an_state, csv_dl, jsonl_dl],
            api_visibility="private",
        )
        an_stop.click(None, cancels=[an_event])

        def on_load_events(path):
            try:
                records = records_from_file(path)
            except SpecScopeError as err:
                raise gr.Error(str(err)) from err
            df = table_rows(records)
            csv_path, jsonl_path = write_downloads(records, df)
            return (
                f"Loaded {len(records)} runs from the file. Pick a row to replay it.",
                df,
                records,
                csv_path,
                jsonl_path,
            )

        events_up.upload(on_load_events, events_up, [an_status, table, an_state, csv_dl, jsonl_dl],
                         api_visibility="private")  # fmt: skip

        def on_pick(records, evt: gr.SelectData):
            if not records:
                raise gr.Error("run a prompt set or load an events file first")
            row = evt.row_value if getattr(evt, "row_value", None) else None
            pid = str(row[0]) if row else list(records)[evt.index[0]]
            return replay_outputs(records, pid)

        table.select(on_pick, an_state, [an_title, *an_lanes, *an_slots], api_visibility="private")

        def generate(
            prompt: str, method: str = "heuristic", max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0
        ) -> Iterator[dict]:
            """Generate with one method, streaming stats dicts; the last one has new_tokens, tau, tokens_per_s, text."""
            yield from api_stream(pair_loader, prompt, method, max_new_tokens, temperature, seed)

        gr.api(generate, api_name="generate")
    return demo


def replay_outputs(records: dict[str, dict[str, Any]], pid: str) -> list[Any]:
    """The analyzer's replay of one prompt: title, two lanes (ar and the method), figure slots."""
    if pid not in records:
        raise gr.Error(f"no run for prompt {pid!r}")
    rec = records[pid]
    frame = LiveFrame(list(rec["lanes"]), rec["lanes"], done=True, temperature=rec.get("temperature", 0.0))
    order = sorted(frame.methods, key=lambda m: m == "ar")[:2]
    lane_vals: list[Any] = []
    for i in range(2):
        lane_vals += list(lane_view(frame, order[i])) if i < len(order) else ["", "", ""]
    title = f"#### Prompt {pid} ({rec.get('category', '')})\n> {rec.get('prompt', '')[:400]}"
    return [title, *lane_vals, *view_updates(rec["lanes"])]


def launch_kwargs() -> dict[str, Any]:
    """Launch options shared by ``__main__`` and the tests (Gradio 6 takes CSS at launch)."""
    return {"css_paths": [CSS_PATH] if CSS_PATH.exists() else None, "ssr_mode": False}


demo = build_demo()

if __name__ == "__main__":
    # GRADIO_SERVER_NAME / GRADIO_SERVER_PORT are read by launch() itself.
    demo.queue(default_concurrency_limit=1).launch(**launch_kwargs())
