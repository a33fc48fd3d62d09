"""The Playground tab: its own text to record (prompt, new tokens, precision), then every knob replays it.

The text is the tab's own (:mod:`ui.playground_record`): nothing the Live tab does later (a sampled run, a
stopped one) can take it away; the Live tab's last finished greedy run of the same prompt is reused when there
is one (read from the page's :class:`ui.shared.Visitor`). Errors (an empty prompt, a bad file) show as one
message in the tab's text, not as badges on every figure. Recording runs the model: on ZeroGPU it runs in a GPU
slot sized by :func:`record_slot_s` (:mod:`spec_core.serve.gpu_slot`).
"""

from __future__ import annotations

import gradio as gr

from spec_core.core.cost_tables import machine_table
from spec_core.serve import gpu_slot, requests
from ui import playground_record
from ui.playground_record import PLAYGROUND_MAX_NEW, T_KNOB, on_upload, source_text
from ui.shared import Visitor, named_upload, pair_and_precision, setting_box, shown_errors
from visuals import hardware, lookup, playground
from visuals.menus import EXAMPLES


def playground_tab(visitor: Visitor, pair_loader, pairs: list[str]) -> None:
    """Reads ``visitor.live_greedy``: the Live tab's last finished greedy run, to reuse when the prompt matches."""
    live_greedy = visitor.live_greedy
    gr.Markdown(playground.INTRO)
    with gr.Row(equal_height=True):  # the text this tab records, and its settings
        prompt = gr.Textbox(
            EXAMPLES[0][0], label="Prompt to record (answered greedily)", lines=2, scale=3, elem_id="pg-prompt"
        )
        with gr.Column(scale=2):
            max_new = setting_box("max new tokens", 96, 1, PLAYGROUND_MAX_NEW, "pg-max-new")
            pair, precision = pair_and_precision(pairs, "pg", list(requests.PRECISIONS))
    source = gr.Markdown(source_text(None, EXAMPLES[0][0], "bfloat16"), elem_id="pg-source")
    with gr.Row(equal_height=True):  # record · load · the policy drawn · its knobs (K, T, b, t, ρ, max)
        record, upload = (
            gr.Button("Record this text", variant="primary", elem_id="pg-record"),
            gr.UploadButton(
                "Load a record (.json) / events (.jsonl)",
                file_types=[".json", ".jsonl"],
                type="filepath",
                elem_id="pg-upload",
            ),
        )
        knobs = [
            gr.Radio(list(playground.FAMILIES), value="pacer", label="policy drawn", elem_id="pg-policy"),
            *(
                gr.Slider(lo, hi, v, step=st, label=lb, elem_id=f"pg-{k}")
                for k, lb, lo, hi, st, v in playground.SLIDERS
            ),
        ]
    outs, state = (
        [gr.Markdown(playground.EMPTY, elem_id="pg-text"), gr.Plot(show_label=False, elem_id="pg-rounds")],
        gr.State(),
    )
    with gr.Row(equal_height=False):
        outs += [gr.Plot(show_label=False, elem_id=f"pg-{k}") for k in ("speed", "grid")]
    n_out = 1 + len(outs)  # the record state, the text, three figures
    t_knob = knobs[T_KNOB]  # a recorded text sets it to the t the Live tab's pacer ran with
    gr.on(
        [prompt.change, precision.change, live_greedy.change],
        source_text,
        [live_greedy, prompt, precision],
        source,
        api_visibility="private",
        show_progress="hidden",
    )

    def on_record(live_run, prompt, max_new, pair, precision, *knobs):
        return playground_record.on_record(pair_loader, pairs, live_run, prompt, max_new, pair, precision, *knobs)

    recorded = record.click(
        gpu_slot.gpu_slot(shown_errors(on_record, n_out + 1, at=1), record_slot_s),
        [live_greedy, prompt, max_new, pair, precision, *knobs],
        [state, *outs, t_knob],
        api_visibility="private",
    )
    loaded = named_upload(lambda path, *rest: on_upload(pair_loader, pairs, path, *rest))
    uploaded = upload.upload(
        shown_errors(loaded, n_out, at=1), [upload, pair, precision, *knobs], [state, *outs], api_visibility="private"
    )
    gr.on(
        [k.change for k in knobs],
        shown_errors(playground.playground_view, len(outs)),
        [state, *knobs],
        outs,
        api_visibility="private",
        show_progress="hidden",
    )
    with gr.Accordion("Hardware lens: the same record on other machines", open=False, elem_id="pg-lens"):
        lens = [gr.Plot(show_label=False, elem_id="pg-lens-plot"), gr.Markdown(hardware.INTRO, elem_id="pg-lens-text")]
    lens_fn = shown_errors(lens_view, len(lens), at=1)  # (a State's own .change would hash the record: not hashable)
    for then in (recorded.then, uploaded.then):
        then(lens_fn, [state, *knobs], lens, api_visibility="private", show_progress="hidden")
    gr.on([k.change for k in knobs], lens_fn, [state, *knobs], lens, api_visibility="private", show_progress="hidden")
    with gr.Accordion("Prompt lookup: what a longer or shorter copy would have paid", open=False, elem_id="pg-copy"):
        copy = [gr.Plot(show_label=False, elem_id="pg-copy-plot"), gr.Markdown(lookup.INTRO, elem_id="pg-copy-text")]
    copy_fn = shown_errors(lookup.copy_view, len(copy), at=1)
    for then in (recorded.then, uploaded.then):
        then(copy_fn, [state], copy, api_visibility="private", show_progress="hidden")


def record_slot_s(live_greedy, prompt, max_new, *rest) -> int:
    """*Record this text*'s GPU slot on ZeroGPU (:mod:`spec_core.serve.gpu_slot`): one lane of ``max_new`` tokens."""
    return gpu_slot.budget_s(max_new)


def lens_view(*values):
    """This machine's measured table (when it was measured already on a quiet machine: never measured here, and a
    provisional one is left out) and the knobs → lens."""
    table = machine_table()
    return hardware.lens_view(dict(table.profiles) if table and table.origin == "measured" else None, *values)
