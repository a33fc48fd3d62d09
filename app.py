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

from spec_core import gpu_slot, guards, live, requests
from spec_core.analysis.bench import prompt_sets
from ui.analyzer import analyzer_tab, replay_outputs  # noqa: F401  (replay_outputs: tests drive it through app)
from ui.playground import playground_tab
from ui.playground_record import remember_greedy
from ui.shared import (
    N_VIEW_SLOTS,
    UI_MAX_NEW_TOKENS,
    alert,
    lane_columns,
    shown_errors,
    ui_errors,
    view_slots,
    view_updates,
)
from visuals import lens, live_page, menus, stepthrough, tokens, views
from visuals.glossary import glossary_html
from visuals.intro import intro_html
from visuals.menus import EXAMPLE_LABELS, EXAMPLES, PRESETS, live_method_choices

ROOT = Path(__file__).resolve().parent
CSS_PATH = ROOT / "assets" / "app.css"
DEFAULT_METHODS = PRESETS[0].methods  # the first task's: the hybrid draft · a fixed window · plain decoding
N_LANES = 3  # methods side by side
STEP_DELAY_S = 1.2  # pause between the steps of a slow replay

PairLoader = live.PairLoader  # (pair name, precision) → spec_core.models.ModelPair
get_pair = live.warm_pair  # the default loader: load once, warm up, cache
pair_choices = requests.offered_pairs

prompt_files = functools.partial(prompt_sets, ROOT)  # the project's prompt sets (paths relative to ROOT)


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
    greedy: gr.State  # the last finished greedy run (ui.playground_record.LiveGreedyRun), for the Playground


def live_tab(pairs: list[str]) -> LiveTab:
    methods = live_method_choices()
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=3, max_lines=8, scale=4, value=EXAMPLES[0][0], elem_id="prompt")
        with gr.Column(scale=1, min_width=160):
            run, stop = gr.Button("Generate", variant="primary", elem_id="run"), gr.Button("Stop", elem_id="stop")
    with gr.Row():
        boxes = [
            gr.Dropdown(
                [*methods, requests.NONE_METHOD],
                value=DEFAULT_METHODS[i],
                label=f"Method {'ABC'[i]}",
                allow_custom_value=True,
                elem_id=f"method-{i}",
                info="e.g. pacer, fixed:K, heuristic, fixed:4+diversed, static:W, tree, block:dpace, ar",
            )
            for i in range(N_LANES)
        ]
    with gr.Accordion("Settings", open=False), gr.Row():
        settings = [
            gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)", elem_id="temperature"),
            gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p"),
            gr.Number(value=0, precision=0, label="seed", minimum=0),
            gr.Slider(1, UI_MAX_NEW_TOKENS, value=96, step=1, label="max new tokens", elem_id="max-new"),
            gr.Dropdown(pairs, value=pairs[0], label="model pair (target,draft)"),
            gr.Radio(
                list(requests.PRECISIONS),
                value="auto",
                label="precision",
                elem_id="precision",
                info=live_page.PRECISION_INFO,
            ),
        ]
    gr.Examples(
        EXAMPLES,
        inputs=[prompt, *boxes],
        label="Tasks (Spec-Bench's categories): why each accepts more or fewer drafts",
        example_labels=EXAMPLE_LABELS,
    )
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
    return LiveTab(
        [prompt, *boxes, *settings],
        run,
        stop,
        status,
        show_rej,
        lanes,
        slots,
        gr.State(None),
        st_lane,
        st_round,
        st_step,
        st_play,
        st_html,
        gr.State(None),
    )


def figure_updates(frame: live.LiveFrame, first: bool) -> list[Any]:
    """Figures are drawn once, when the run is done (drawing them at every update cost the models their cores)."""
    if frame.done:
        return view_updates(frame.lanes)
    return [gr.update(visible=False), "", None] * N_VIEW_SLOTS if first else [gr.update()] * (3 * N_VIEW_SLOTS)


def wire_live(tab: LiveTab, pair_loader: PairLoader, pairs: list[str]) -> None:
    stop_request = gr.State(live.StopRequest())  # one per visitor: Stop asks the run to end after its round

    def on_live(p, m1, m2, m3, t, tp, s, n, pname, precision, show, stop_request=None):
        request = requests.parse_live_request(p, [m1, m2, m3], t, tp, s, n, pname, precision, pairs)
        if not isinstance(stop_request, live.StopRequest):  # an API call without the page's state
            stop_request = live.StopRequest()
        stop_request.requested = False
        for k, frame in enumerate(live.live_frames(pair_loader, request, should_stop=stop_request.asked)):
            lanes = live_page.lanes_parts(frame, N_LANES, show)
            if frame.done:  # text and counters first, the figures right after (drawing them takes a while)
                yield [frame.status, *lanes, *[gr.update()] * (3 * N_VIEW_SLOTS), frame]
            yield [frame.status, *lanes, *figure_updates(frame, k == 0), frame]

    plots, outputs = tab.slots[2::3], [tab.status, *tab.lanes, *tab.slots, tab.state]

    def slot_ended(last, note):  # ZeroGPU took the GPU back mid-run: the lanes keep their text, the status says so
        frame = last[-1] if last else None
        made = live.stopped(frame).removeprefix("Stopped.") if frame is not None and not frame.done else ""
        return [alert(f"{note}{made}"), *[gr.update()] * (len(outputs) - 1)]

    event = tab.run.click(
        gpu_slot.until_slot_end(gpu_slot.gpu_slot(shown_errors(on_live, len(outputs)), live_slot_s), slot_ended),
        [*tab.inputs, tab.show_rejected, stop_request],
        outputs,
        api_name="live",
        api_visibility="undocumented",
        show_progress="hidden",
    )

    def on_stop(frame, stop_request):
        stop_request.requested = True  # the run ends itself after its round and says what it made (no cancel:
        return live.stopped(frame)  # a cancelled event can leave Gradio's "Error" on the outputs)

    tab.stop.click(on_stop, [tab.state, stop_request], tab.status, api_visibility="private")
    tab.show_rejected.change(
        lambda frame, show: live_page.lanes_parts(frame, N_LANES, show) if frame else [gr.update()] * (3 * N_LANES),
        [tab.state, tab.show_rejected],
        tab.lanes,
        api_visibility="private",
        show_progress="hidden",
    )

    card = stepthrough.frame_card  # (frame, lane, round, step) → HTML

    def lens_slots(frame, lane, rnd) -> list[Any]:
        """The figure slots, with the round-following views (the training lens) redrawn for this round."""
        if frame is None or not lane or lane not in frame.lanes:
            return [gr.update()] * N_VIEW_SLOTS
        active = views.views_for(list(frame.lanes))[:N_VIEW_SLOTS]
        figs = [views.build_for_round(v, frame.lanes, lane, int(rnd)) for v in active]
        return [f if f is not None else gr.update() for f in figs] + [gr.update()] * (N_VIEW_SLOTS - len(active))

    def focus(frame, lane, step) -> list[Any]:
        """``lane``'s first round with a block the training lens can weigh (else round 0): the slider spans
        exactly its rounds, the card and the lens follow."""
        events = frame.lanes.get(lane, ()) if frame is not None and lane else ()
        last, first = live_page.last_round(events), next(iter(lens.block_rounds(events)), 0)
        return [
            gr.update(maximum=max(last, 1), value=first),
            card(frame, lane, first, step),
            *lens_slots(frame, lane, first),
        ]

    def after_run(frame, step, greedy, prompt, max_new) -> list[Any]:
        lanes = live_page.step_lanes(frame)
        lane = lanes[0] if lanes else None
        return [
            gr.update(choices=lanes, value=lane),
            *focus(frame, lane, step),
            remember_greedy(greedy, frame, prompt, max_new),
        ]

    step_in = [tab.state, tab.st_lane, tab.st_round, tab.st_step]
    event.then(
        after_run,
        [tab.state, tab.st_step, tab.greedy, tab.inputs[0], tab.inputs[7]],
        [tab.st_lane, tab.st_round, tab.st_html, *plots, tab.greedy],
        api_visibility="private",
    )
    tab.st_lane.input(
        focus, [tab.state, tab.st_lane, tab.st_step], [tab.st_round, tab.st_html, *plots], api_visibility="private"
    )
    gr.on(
        [tab.st_round.input, tab.st_round.release],  # typing a round number (Enter or not), or dragging
        lambda f, lane, r, s: [card(f, lane, r, s), *lens_slots(f, lane, r)],
        step_in,
        [tab.st_html, *plots],
        api_visibility="private",
        trigger_mode="always_last",
        show_progress="hidden",
    )
    tab.st_step.input(card, step_in, tab.st_html, api_visibility="private")

    def on_play(frame, lane, rnd):
        for step in stepthrough.STEPS:
            yield step, card(frame, lane, rnd, step)
            time.sleep(STEP_DELAY_S)

    tab.st_play.click(on_play, step_in[:3], [tab.st_step, tab.st_html], api_visibility="private")


def live_slot_s(prompt, m1, m2, m3, temperature, top_p, seed, max_new, *rest) -> int:
    """The Live tab's GPU slot on ZeroGPU (:mod:`spec_core.gpu_slot`): ``max_new`` tokens in each chosen lane."""
    return gpu_slot.budget_s(max_new, sum(bool(m) and m != requests.NONE_METHOD for m in (m1, m2, m3)))


def generate_slot_s(prompt, method="heuristic", max_new_tokens=64, *rest, **kwargs) -> int:
    """``/generate``'s GPU slot on ZeroGPU: one lane of ``max_new_tokens`` tokens."""
    return gpu_slot.budget_s(kwargs.get("max_new_tokens", max_new_tokens))


def build_demo(pair_loader: PairLoader = get_pair) -> gr.Blocks:
    """The whole app. ``pair_loader(name, precision) -> ModelPair`` is the only way handlers reach a model."""
    pairs = pair_choices()
    with gr.Blocks(title="SpecScope — speculative decoding, visualised") as demo:
        gr.HTML(intro_html(), elem_id="intro-block")
        with gr.Tab("Live", id="live"):
            tab = live_tab(pairs)
        with gr.Tab("Analyzer", id="analyzer"):
            analyzer_tab(pair_loader, pairs, prompt_files, ROOT)
        with gr.Tab("Playground", id="playground"):
            playground_tab(pair_loader, pairs, tab.greedy)
        wire_live(tab, pair_loader, pairs)

        @ui_errors
        def generate(
            prompt: str, method: str = "heuristic", max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0
        ) -> Iterator[dict]:
            """Generate with one method, streaming stats dicts; the last one has new_tokens, tau, tokens_per_s, text."""
            request = requests.parse_generate_request(prompt, method, max_new_tokens, temperature, seed)
            yield from live.stats_stream(pair_loader("embedded", request.spec.precision or "auto"), request)

        def ended(last: dict | None, note: str) -> dict:  # ZeroGPU took the GPU back: the stats so far, and why
            return {
                **(last or {"new_tokens": 0, "tau": 0.0, "tokens_per_s": 0.0, "text": ""}),
                "finished": False,
                "error": note,
            }

        gr.api(gpu_slot.until_slot_end(gpu_slot.gpu_slot(generate, generate_slot_s), ended), api_name="generate")
    return demo


launch_kwargs = functools.partial(menus.launch_kwargs, CSS_PATH)  # shared by __main__ and the tests
demo = build_demo()
gpu_slot.place_on_gpu()  # ZeroGPU only: the embedded pair on cuda at import (elsewhere it loads on first use)

if __name__ == "__main__":
    limits = guards.serving_limits()  # 1 request at a time on a CPU, 4 on CUDA, 16 waiting; env overrides
    demo.queue(default_concurrency_limit=limits.concurrency, max_size=limits.queue_size).launch(**launch_kwargs())
