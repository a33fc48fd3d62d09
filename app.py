"""SpecScope: watch speculative decoding work — live side by side, token by token, round by round.

Wiring only (docs/STYLE.md §6): requests are parsed at the edge (:mod:`spec_core.requests`), live runs are
:mod:`spec_core.live`, the analyzer's records :mod:`spec_core.analysis.records`, and :mod:`visuals` makes the HTML
and plotly figures; this file lays out the Gradio Blocks, one small function per tab. No model loads at import:
the pair is loaded on first use, warmed up and cached (:func:`get_pair`); ``build_demo(pair_loader=...)`` lets
tests inject a tiny pair. Run: ``python app.py`` (honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from spec_core import guards, live, precision, requests
from spec_core.analysis import pareto
from spec_core.analysis import records as rec
from spec_core.analysis.bench import load_prompts, prompt_sets
from visuals import diversed as diversed_view
from visuals import hardware, live_page, menus, playground, stepthrough, tokens, views
from visuals.glossary import glossary_html
from visuals.menus import EXAMPLES, live_method_choices

ROOT = Path(__file__).resolve().parent
CSS_PATH = ROOT / "assets" / "app.css"
DEFAULT_METHODS = ("pacer", "fixed:4", "ar")  # PACER (adaptive, trained) · fixed window · plain decoding
N_LANES = 3  # methods side by side
N_VIEW_SLOTS = 8  # figure slots filled from the view registry (visuals.views), generic views first
UI_MAX_NEW_TOKENS = 512
STEP_DELAY_S = 1.2  # pause between the steps of a slow replay

PairLoader = live.PairLoader  # (pair name, precision) → spec_core.models.ModelPair
get_pair = live.warm_pair  # the default loader: load once, warm up, cache
pair_choices = requests.offered_pairs

prompt_files = functools.partial(prompt_sets, ROOT)  # the project's prompt sets (paths relative to ROOT)
ui_errors = guards.ui_errors  # SpecScopeError → a gr.Error the page shows


def view_updates(lanes, slots: int = N_VIEW_SLOTS) -> list[Any]:
    """For each figure slot: (visibility, caption, figure) from the view registry; unused slots hidden."""
    active = views.views_for(list(lanes))[:slots]
    out: list[Any] = []
    for i in range(slots):
        v = active[i] if i < len(active) else None
        out += [gr.update(visible=v is not None), f"**{v.title}** — {v.caption}" if v else "",
                views.build(v, lanes) if v else None]  # fmt: skip
    return out


def view_slots(prefix: str) -> list[Any]:
    """Figure slots: [column, caption, plot] × N_VIEW_SLOTS, two per row."""
    comps: list[Any] = []
    for row in range(0, N_VIEW_SLOTS, 2):
        with gr.Row(equal_height=False):
            for i in range(row, row + 2):
                with gr.Column(visible=False, elem_classes="spec-view", elem_id=f"{prefix}-view-{i}") as col:
                    comps += [col, gr.Markdown(), gr.Plot(show_label=False)]
    return comps


def lane_columns(n: int, prefix: str) -> list[Any]:
    comps: list[Any] = []
    with gr.Row(equal_height=False):
        for i in range(n):
            with gr.Column(elem_classes="spec-lane", elem_id=f"{prefix}-{i}"):
                comps += [gr.Markdown(), gr.HTML(), gr.HTML()]
    return comps


@dataclass
class LiveTab:
    """The live tab's components that handlers read or write."""

    inputs: list[Any]  # prompt, 3 methods, temperature, top_p, seed, max new, pair, precision
    run: gr.Button
    stop: gr.Button
    status: gr.Markdown
    show_rejected: gr.Checkbox
    lanes: list[Any]
    slots: list[Any]
    state: gr.State
    st_lane: gr.Dropdown
    st_round: gr.Slider
    st_step: gr.Radio
    st_play: gr.Button
    st_html: gr.HTML


def live_tab(pairs: list[str]) -> LiveTab:
    methods = live_method_choices()
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=2, scale=4, value=EXAMPLES[0][0], elem_id="prompt")
        with gr.Column(scale=1, min_width=160):
            run, stop = gr.Button("Generate", variant="primary", elem_id="run"), gr.Button("Stop", elem_id="stop")
    with gr.Row():
        boxes = [gr.Dropdown([*methods, requests.NONE_METHOD], value=DEFAULT_METHODS[i], label=f"Method {'ABC'[i]}",
                             allow_custom_value=True, elem_id=f"method-{i}",
                             info="e.g. pacer, fixed:K, heuristic, fixed:4+diversed, static:W, tree, block:dpace, ar")
                 for i in range(N_LANES)]  # fmt: skip
    with gr.Accordion("Settings", open=False), gr.Row():
        settings = [
            gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)", elem_id="temperature"),
            gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p"),
            gr.Number(value=0, precision=0, label="seed", minimum=0),
            gr.Slider(1, UI_MAX_NEW_TOKENS, value=96, step=1, label="max new tokens", elem_id="max-new"),
            gr.Dropdown(pairs, value=pairs[0], label="model pair (target,draft)"),
            gr.Radio(list(requests.PRECISIONS), value="auto", label="precision", elem_id="precision",
                     info=live_page.PRECISION_INFO),
        ]  # fmt: skip
    gr.Examples(EXAMPLES, inputs=[prompt, *boxes], label="Examples")
    status = gr.Markdown(elem_id="status")
    with gr.Row():
        gr.HTML(tokens.legend_html())
        show_rej = gr.Checkbox(False, label="show rejected drafts", scale=0, min_width=200, elem_id="show-rej")
        exact = gr.Checkbox(False, label="exact (float32): lossless lanes write ar's text", scale=0, elem_id="exact")
    exact.input(lambda on: "float32" if on else "auto", exact, settings[-1], api_visibility="private")
    settings[-1].change(lambda p: p == "float32", settings[-1], exact, api_visibility="private")
    lanes = lane_columns(N_LANES, "lane")
    with gr.Accordion("Glossary: ar, τ, α, recovered, bonus, the method families", open=True):
        gr.HTML(glossary_html())
    slots = view_slots("live")
    with gr.Accordion("Step through one round (teaching)", open=False):
        with gr.Row():
            st_lane = gr.Dropdown([], label="method", elem_id="st-lane")
            st_round = gr.Slider(0, 1, value=0, step=1, label="round", elem_id="st-round")
            st_step = gr.Radio(list(stepthrough.STEPS), value="draft", label="step")
            st_play = gr.Button("Replay this round slowly")
        st_html = gr.HTML(elem_id="stepthrough")
    return LiveTab([prompt, *boxes, *settings], run, stop, status, show_rej, lanes, slots, gr.State(None),
                   st_lane, st_round, st_step, st_play, st_html)  # fmt: skip


def figure_updates(frame: live.LiveFrame, first: bool) -> list[Any]:
    """Figures are drawn once, when the run is done (drawing them at every update cost the models their cores)."""
    if frame.done:
        return view_updates(frame.lanes)
    return [gr.update(visible=False), "", None] * N_VIEW_SLOTS if first else [gr.update()] * (3 * N_VIEW_SLOTS)


def wire_live(tab: LiveTab, pair_loader: PairLoader, pairs: list[str]) -> None:
    @ui_errors
    def on_live(p, m1, m2, m3, t, tp, s, n, pname, precision, show):
        request = requests.parse_live_request(p, [m1, m2, m3], t, tp, s, n, pname, precision, pairs)
        for k, frame in enumerate(live.live_frames(pair_loader, request)):
            lanes = live_page.lanes_parts(frame, N_LANES, show)
            if frame.done:  # text and counters first, the figures right after (drawing them takes a while)
                yield [frame.status, *lanes, *[gr.update()] * (3 * N_VIEW_SLOTS), frame]
            yield [frame.status, *lanes, *figure_updates(frame, k == 0), frame]

    plots = tab.slots[2::3]
    event = tab.run.click(on_live, [*tab.inputs, tab.show_rejected], [tab.status, *tab.lanes, *tab.slots, tab.state],
                          api_name="live", api_visibility="undocumented", show_progress="hidden")  # fmt: skip
    tab.stop.click(live.stopped, tab.state, tab.status, cancels=[event], api_visibility="private")
    tab.show_rejected.change(
        lambda frame, show: live_page.lanes_parts(frame, N_LANES, show) if frame else [gr.update()] * (3 * N_LANES),
        [tab.state, tab.show_rejected], tab.lanes, api_visibility="private", show_progress="hidden",
    )  # fmt: skip

    card = stepthrough.frame_card  # (frame, lane, round, step) → HTML

    def lens_slots(frame, lane, rnd) -> list[Any]:
        """The figure slots, with the round-following views (the training lens) redrawn for this round."""
        if frame is None or not lane or lane not in frame.lanes:
            return [gr.update()] * N_VIEW_SLOTS
        active = views.views_for(list(frame.lanes))[:N_VIEW_SLOTS]
        figs = [views.build_for_round(v, frame.lanes, lane, int(rnd)) for v in active]
        return [f if f is not None else gr.update() for f in figs] + [gr.update()] * (N_VIEW_SLOTS - len(active))

    def focus(frame, lane, step) -> list[Any]:
        """Round 0 of ``lane``: the slider spans exactly its rounds, the card and the lens follow."""
        last = live_page.last_round(frame.lanes.get(lane, ())) if frame is not None and lane else 0
        return [gr.update(maximum=max(last, 1), value=0), card(frame, lane, 0, step), *lens_slots(frame, lane, 0)]

    def after_run(frame, step) -> list[Any]:
        lanes = live_page.step_lanes(frame)
        lane = lanes[0] if lanes else None
        return [gr.update(choices=lanes, value=lane), *focus(frame, lane, step)]

    step_in = [tab.state, tab.st_lane, tab.st_round, tab.st_step]
    event.then(after_run, [tab.state, tab.st_step], [tab.st_lane, tab.st_round, tab.st_html, *plots],
               api_visibility="private")  # fmt: skip
    tab.st_lane.input(focus, [tab.state, tab.st_lane, tab.st_step], [tab.st_round, tab.st_html, *plots],
                      api_visibility="private")  # fmt: skip
    tab.st_round.release(lambda f, lane, r, s: [card(f, lane, r, s), *lens_slots(f, lane, r)], step_in,
                         [tab.st_html, *plots], api_visibility="private")  # fmt: skip
    tab.st_step.input(card, step_in, tab.st_html, api_visibility="private")

    def on_play(frame, lane, rnd):
        for step in stepthrough.STEPS:
            yield step, card(frame, lane, rnd, step)
            time.sleep(STEP_DELAY_S)

    tab.st_play.click(on_play, step_in[:3], [tab.st_step, tab.st_html], api_visibility="private")


def analyzer_tab(pair_loader: PairLoader, pairs: list[str], live_tab_: LiveTab) -> None:
    files = prompt_files()
    with gr.Row():
        prompt_file = gr.Dropdown(files, value=files[0] if files else None, label="prompt set")
        upload = gr.File(label="…or upload a prompt JSONL (id, category, prompt)", file_types=[".jsonl"],
                         type="filepath")  # fmt: skip
    with gr.Row():
        method = gr.Dropdown(live_method_choices(), value="pacer", label="method (compared with ar)",
                             allow_custom_value=True)  # fmt: skip
        limit = gr.Slider(1, 200, value=5, step=1, label="prompts to run (first N)")
        max_new = gr.Slider(1, UI_MAX_NEW_TOKENS, value=64, step=1, label="max new tokens")
        run, stop = gr.Button("Run prompt set", variant="primary"), gr.Button("Stop", variant="stop")
    status = gr.Markdown()
    summary = gr.Dataframe(headers=rec.SUMMARY_COLUMNS, interactive=False, label="summary (all prompts pooled)",
                           elem_id="an-summary")  # fmt: skip
    table = gr.Dataframe(headers=rec.TABLE_COLUMNS, interactive=False, elem_id="an-table",
                         label="per-prompt results (click a header to sort, a row to replay)")  # fmt: skip
    with gr.Row():
        csv_dl, jsonl_dl = gr.DownloadButton("Download table (CSV)"), gr.DownloadButton("Download events (JSONL)")
        events_up = gr.UploadButton("Load a saved events file", file_types=[".jsonl"], type="filepath")
    title = gr.Markdown()
    lanes, slots, state = lane_columns(2, "an-lane"), view_slots("an"), gr.State(None)
    results = [status, summary, table, state, csv_dl, jsonl_dl]

    def finished(records, note: str) -> list[Any]:
        df = rec.table_rows(records)
        return [note, rec.summary_rows(records), df, records, *rec.write_downloads(records, df)]

    @ui_errors
    def on_analyze(*values):
        req = requests.parse_analyzer_request(*values, pairs=pairs, prompt_sets=prompt_files(), root=ROOT,
                                              max_new=UI_MAX_NEW_TOKENS)  # fmt: skip
        pair, spec, n, sampling = pair_loader(req.pair_name, req.precision), req.spec, req.max_new_tokens, req.sampling
        prompts = load_prompts(req.source)[: req.n_prompts]
        yield [f"Running {len(prompts)} prompts × (ar, {spec.name})…", None, None, None, None, None]
        records: dict = {}
        for k, records in enumerate(rec.run_records(pair, prompts, spec, n, sampling), 1):
            yield [f"{k}/{len(prompts)} prompts done…", rec.summary_rows(records), rec.table_rows(records),
                   records, None, None]  # fmt: skip
        yield finished(records, f"Done: {len(records)} prompts. Pick a row to replay it.")

    settings = live_tab_.inputs[4:7] + live_tab_.inputs[8:10]  # temperature, top_p, seed · pair, precision
    event = run.click(on_analyze, [prompt_file, upload, method, limit, max_new, *settings], results,
                      api_visibility="private")  # fmt: skip
    stop.click(None, cancels=[event])
    load = lambda path: rec.records_from_file(guards.check_upload(path, "the events file"))  # noqa: E731
    events_up.upload(ui_errors(lambda path: finished(load(path), "Loaded. Pick a row to replay it.")), events_up,
                     results, api_visibility="private")  # fmt: skip

    @ui_errors
    def on_pick(records, evt: gr.SelectData):
        return replay_outputs(records, str(evt.row_value[0]) if getattr(evt, "row_value", None) else "")

    table.select(on_pick, state, [title, *lanes, *slots], api_visibility="private")
    pareto_panel()


def pareto_panel() -> None:
    """DIVERSED's acceptance-vs-quality sweep (``python -m spec_core pareto``): a shipped one, or the user's CSV."""
    sweeps = pareto.shipped_sweeps()
    show = lambda path: diversed_view.sweep_view(pareto.read_sweep(path))  # noqa: E731
    first = show(next(iter(sweeps.values()))) if sweeps else ["", None]
    with gr.Accordion("DIVERSED: acceptance vs quality (Pareto sweep)", open=False, elem_id="an-pareto"):
        with gr.Row():  # a measured sweep (embedded pair), or the user's own
            sweep = gr.Dropdown(list(sweeps), value=next(iter(sweeps), None), label="measured sweep")
            upload = gr.UploadButton("Load a pareto CSV", file_types=[".csv"], type="filepath")
        outputs = [gr.Markdown(first[0]), gr.Plot(first[1], show_label=False)]
    pick = lambda key: show(sweeps[requests.parse_choice(key, "sweep", list(sweeps))])  # noqa: E731
    sweep.change(ui_errors(pick), sweep, outputs, api_visibility="private")
    upload.upload(
        ui_errors(lambda p: show(guards.check_upload(p, "the sweep"))), upload, outputs, api_visibility="private"
    )


def replay_outputs(records, pid: str) -> list[Any]:
    """The analyzer's replay of one prompt: title, two lanes (the method, then ar), figure slots."""
    record = rec.record_for(records, pid)
    frame = rec.replay_frame(record)
    title = f"#### Prompt {pid} ({record.category})\n> {record.prompt[:400]}"
    return [title, *live_page.lanes_parts(frame, 2), *view_updates(record.lanes)]


def playground_tab(pair_loader: PairLoader, pairs: list[str], live_tab_: LiveTab) -> None:
    """Policy playground: record the Live tab's last greedy text once, then every knob replays it (no model call)."""
    gr.Markdown(playground.INTRO)
    with gr.Row(equal_height=True):  # record · load · the policy drawn · its knobs (K, T, b, t, ρ, max)
        record, upload = gr.Button("Record this text", variant="primary", elem_id="pg-record"), gr.UploadButton(
            "Load a record (.json) / events (.jsonl)", file_types=[".json", ".jsonl"], type="filepath")  # fmt: skip
        knobs = [gr.Radio(list(playground.FAMILIES), value="pacer", label="policy drawn", elem_id="pg-policy"), *(
            gr.Slider(lo, hi, v, step=st, label=lb, elem_id=f"pg-{k}") for k, lb, lo, hi, st, v in playground.SLIDERS)]  # fmt: skip
    outs, state = [gr.Markdown(playground.EMPTY, elem_id="pg-text"), gr.Plot(show_label=False, elem_id="pg-rounds")], gr.State()  # fmt: skip
    with gr.Row(equal_height=False):
        outs += [gr.Plot(show_label=False, elem_id=f"pg-{k}") for k in ("speed", "grid")]
    live_in = [live_tab_.state, *(live_tab_.inputs[i] for i in (0, 7, 8, 9))]  # frame, prompt, max new, pair, precision
    on = lambda fn: ui_errors(functools.partial(fn, pair_loader, pairs))  # noqa: E731
    record.click(on(playground.on_record), [*live_in, *knobs], [state, *outs], api_visibility="private")
    upload.upload(on(playground.on_upload), [upload, *live_in[3:], *knobs], [state, *outs], api_visibility="private")
    gr.on([k.change for k in knobs], ui_errors(playground.playground_view), [state, *knobs], outs,
          api_visibility="private", show_progress="hidden")  # fmt: skip
    with gr.Accordion("Hardware lens: the same record on other machines", open=False, elem_id="pg-lens"):
        lens = [gr.Plot(show_label=False, elem_id="pg-lens-plot"), gr.Markdown(hardware.INTRO, elem_id="pg-lens-text")]
    gr.on([state.change, *(k.change for k in knobs)], ui_errors(lambda *v: hardware.lens_view(
        precision.cached_machine_costs(), *v)), [state, *knobs], lens, api_visibility="private", show_progress="hidden")  # fmt: skip


def build_demo(pair_loader: PairLoader = get_pair) -> gr.Blocks:
    """The whole app. ``pair_loader(name, precision) -> ModelPair`` is the only way handlers reach a model."""
    pairs = pair_choices()
    with gr.Blocks(title="SpecScope — speculative decoding, visualised") as demo:
        gr.Markdown(live_page.INTRO)
        with gr.Tab("Live", id="live"):
            tab = live_tab(pairs)
        with gr.Tab("Analyzer", id="analyzer"):
            analyzer_tab(pair_loader, pairs, tab)
        with gr.Tab("Playground", id="playground"):
            playground_tab(pair_loader, pairs, tab)
        wire_live(tab, pair_loader, pairs)

        @ui_errors
        def generate(prompt: str, method: str = "heuristic", max_new_tokens: int = 64, temperature: float = 0.0,
                     seed: int = 0) -> Iterator[dict]:  # fmt: skip
            """Generate with one method, streaming stats dicts; the last one has new_tokens, tau, tokens_per_s, text."""
            request = requests.parse_generate_request(prompt, method, max_new_tokens, temperature, seed)
            yield from live.stats_stream(pair_loader("embedded", request.spec.precision or "auto"), request)

        gr.api(generate, api_name="generate")
    return demo


launch_kwargs = functools.partial(menus.launch_kwargs, CSS_PATH)  # shared by __main__ and the tests
demo = build_demo()

if __name__ == "__main__":
    limits = guards.serving_limits()  # 1 request at a time on a CPU, 4 on CUDA, 16 waiting; env overrides
    demo.queue(default_concurrency_limit=limits.concurrency, max_size=limits.queue_size).launch(**launch_kwargs())
