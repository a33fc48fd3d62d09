"""The Live tab: up to three methods side by side on one prompt, streamed token by token, then its figures.

Layout and wiring only (docs/STYLE.md §6): requests are parsed by :mod:`spec_core.serve.requests`, frames come from
:mod:`spec_core.serve.live`, HTML from :mod:`visuals.live_page`; the step-through panel is :mod:`ui.live_steps`. Inputs
are named (:class:`LiveInputs`), never read by position. A finished greedy run goes to the Playground through the
page's :class:`ui.shared.Visitor`. On ZeroGPU the stream runs in a GPU slot sized by :func:`live_slot_s`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from spec_core.core.types import MAX_TEMPERATURE
from spec_core.serve import gpu_slot, live, requests
from ui.live_baseline import with_baseline
from ui.live_export import LiveExport, export_panel, wire_export
from ui.live_steps import StepThrough, after_run, step_through_panel, wire_step_through
from ui.playground_record import remember_greedy
from ui.shared import (
    N_VIEW_SLOTS,
    UI_MAX_NEW_TOKENS,
    Visitor,
    alert,
    figure_updates,
    lane_columns,
    setting_box,
    shown_errors,
    view_slots,
)
from visuals import live_page, tokens
from visuals.glossary import glossary_html
from visuals.menus import EXAMPLE_LABELS, EXAMPLES, PRESETS, live_method_choices

DEFAULT_METHODS = PRESETS[0].methods  # the first task's: the hybrid draft · PACER with DIVERSED · plain decoding
N_LANES = 3  # methods side by side


@dataclass(frozen=True)
class LiveInputs:
    """The Live tab's request, one component per field. :meth:`components` lists them in the order of the ``/live``
    API's parameters (scripts call it positionally: never reorder), which ``on_live`` names one by one."""

    prompt: gr.Textbox
    methods: tuple[gr.Dropdown, ...]  # lanes A, B, C (requests.NONE_METHOD leaves one empty)
    temperature: gr.Number
    top_p: gr.Number
    seed: gr.Number
    max_new: gr.Number
    pair: gr.Dropdown
    precision: gr.Radio

    def components(self) -> list[Any]:
        p = self
        return [p.prompt, *p.methods, p.temperature, p.top_p, p.seed, p.max_new, p.pair, p.precision]


@dataclass(frozen=True)
class LiveTab:
    """The Live tab's components that handlers read or write."""

    inputs: LiveInputs
    run: gr.Button
    stop: gr.Button
    status: gr.Markdown
    show_rejected: gr.Checkbox
    lanes: list[Any]  # [header, tokens, counters] × N_LANES
    slots: list[Any]  # [column, caption, plot] × N_VIEW_SLOTS
    frame: gr.State  # the last frame shown (spec_core.serve.live.LiveFrame)
    steps: StepThrough
    export: LiveExport  # the finished run's downloads and "why rejected" figure


def live_tab(visitor: Visitor, pair_loader: live.PairLoader, pairs: list[str]) -> None:
    """The tab, laid out and wired; after each run it writes ``visitor.live_greedy``."""
    wire(layout(pairs), visitor, pair_loader, pairs)


def layout(pairs: list[str]) -> LiveTab:
    methods = live_method_choices()
    with gr.Row():
        prompt = gr.Textbox(label="Prompt", lines=3, max_lines=8, scale=4, value=EXAMPLES[0][0], elem_id="prompt")
        with gr.Column(scale=1, min_width=160):
            run, stop = gr.Button("Generate", variant="primary", elem_id="run"), gr.Button("Stop", elem_id="stop")
    with gr.Row():
        boxes = tuple(
            gr.Dropdown(
                [*methods, requests.NONE_METHOD],
                value=DEFAULT_METHODS[i],
                label=f"Method {'ABC'[i]}",
                allow_custom_value=True,
                elem_id=f"method-{i}",
                info="e.g. pacer, fixed:K, heuristic, fixed:4+diversed, static:W, tree, block:dpace, ar",
            )
            for i in range(N_LANES)
        )
    with gr.Accordion("Settings", open=False), gr.Row():
        inputs = LiveInputs(
            prompt,
            boxes,
            temperature=setting_box("temperature (0 = greedy)", 0.0, 0, MAX_TEMPERATURE, "temperature", step=0.05),
            top_p=setting_box("top-p", 1.0, 0, 1, "top-p", step=0.05, info="above 0, at most 1"),
            seed=setting_box("seed", 0, 0, requests.MAX_SEED, "seed"),
            max_new=setting_box("max new tokens", 96, 1, UI_MAX_NEW_TOKENS, "max-new"),
            pair=gr.Dropdown(pairs, value=pairs[0], label="model pair (target,draft)"),
            precision=gr.Radio(
                list(requests.PRECISIONS),
                value="auto",
                label="precision",
                elem_id="precision",
                info=live_page.PRECISION_INFO,
            ),
        )
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
        exact = gr.Checkbox(False, label="exact arithmetic (float32)", scale=0, elem_id="exact")
    exact.input(lambda on: "float32" if on else "auto", exact, inputs.precision, api_visibility="private")
    inputs.precision.change(lambda p: p == "float32", inputs.precision, exact, api_visibility="private")
    lanes, export = lane_columns(N_LANES, "lane"), export_panel()
    with gr.Accordion("Glossary: ar, τ, α, recovered, bonus, the method families", open=True, elem_id="glossary-box"):
        gr.HTML(glossary_html())
    slots = view_slots("live")
    return LiveTab(inputs, run, stop, status, show_rej, lanes, slots, gr.State(None), step_through_panel(), export)


def wire(tab: LiveTab, visitor: Visitor, pair_loader: live.PairLoader, pairs: list[str]) -> None:
    stop_request = gr.State(live.StopRequest())  # one per visitor: Stop asks the run to end after its round

    def on_live(
        prompt, method_a, method_b, method_c, temperature, top_p, seed, max_new, pair, precision, show_rejected,
        stop_request=None,
    ):  # fmt: skip
        methods = [method_a, method_b, method_c]
        request = requests.parse_live_request(
            prompt, methods, temperature, top_p, seed, max_new, pair, precision, pairs, max_new=UI_MAX_NEW_TOKENS
        )
        if not isinstance(stop_request, live.StopRequest):  # an API call without the page's state
            stop_request = live.StopRequest()
        stop_request.requested = False
        for k, frame in enumerate(live.live_frames(pair_loader, request, should_stop=stop_request.asked)):
            lanes = live_page.lanes_parts(frame, N_LANES, show_rejected)
            if frame.done:  # text and counters first, then the replayed baseline and the figures (they take a while)
                yield [frame.status, *lanes, *[gr.update()] * (3 * N_VIEW_SLOTS), frame]
                frame = with_baseline(frame, pair_loader, request, stop_request.asked())
            yield [frame.status, *lanes, *figure_updates(frame, k == 0), frame]

    plots, outputs = tab.slots[2::3], [tab.status, *tab.lanes, *tab.slots, tab.frame]

    def slot_ended(last, note):  # ZeroGPU took the GPU back mid-run: the lanes keep their text, the status says so
        frame = last[-1] if last else None
        made = live.stopped(frame).removeprefix("Stopped.") if frame is not None and not frame.done else ""
        return [alert(f"{note}{made}"), *[gr.update()] * (len(outputs) - 1)]

    tab.run.click(None, js=live_page.SCROLL_TO_STATUS)  # in the browser, at the click
    event = tab.run.click(
        gpu_slot.until_slot_end(gpu_slot.gpu_slot(shown_errors(on_live, len(outputs)), live_slot_s), slot_ended),
        [*tab.inputs.components(), tab.show_rejected, stop_request],
        outputs,
        api_name="live",
        api_visibility="undocumented",
        show_progress="hidden",
    )

    def on_stop(frame, stop_request):
        stop_request.requested = True  # the run ends itself after its round and says what it made (no cancel:
        return live.stopped(frame)  # a cancelled event can leave Gradio's "Error" on the outputs)

    tab.stop.click(on_stop, [tab.frame, stop_request], tab.status, api_visibility="private")
    tab.show_rejected.change(
        lambda frame, show: live_page.lanes_parts(frame, N_LANES, show) if frame else [gr.update()] * (3 * N_LANES),
        [tab.frame, tab.show_rejected],
        tab.lanes,
        api_visibility="private",
        show_progress="hidden",
    )

    done = lambda frame, step, greedy, p, n: [*after_run(frame, step), remember_greedy(greedy, frame, p, n)]  # noqa: E731
    event.then(  # the step-through, and the Playground's run
        done,
        [tab.frame, tab.steps.step, visitor.live_greedy, tab.inputs.prompt, tab.inputs.max_new],
        [tab.steps.lane, tab.steps.round, tab.steps.card, *plots, visitor.live_greedy],
        api_visibility="private",
    )
    wire_step_through(tab.steps, tab.frame, plots)
    wire_export(tab.export, tab.run, event, tab.frame, tab.inputs.prompt)


def live_slot_s(prompt, method_a, method_b, method_c, temperature, top_p, seed, max_new, *rest) -> int:
    """The Live tab's GPU slot on ZeroGPU (:mod:`spec_core.serve.gpu_slot`): ``max_new`` tokens in each chosen lane."""
    lanes = sum(bool(m) and m != requests.NONE_METHOD for m in (method_a, method_b, method_c))
    return gpu_slot.budget_s(max_new, lanes)
