"""The Analyzer tab: a prompt set run with ``ar`` and one method, per-prompt records, replays, DIVERSED's panel.

The tab owns its settings and shows them: temperature, top-p, seed and precision sit beside the method (they
once came, unseen, from the Live tab's settings). Records are built by :mod:`spec_core.serve.records`. A run
uses the model: on ZeroGPU it runs in a GPU slot sized by :func:`analyzer_slot_s` (:mod:`spec_core.serve.gpu_slot`), and
when the slot ends first the prompts done so far stay, with a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from spec_core.core import guards
from spec_core.core.types import MAX_TEMPERATURE
from spec_core.serve import gpu_slot, live, requests, spec_bench, sweeps
from spec_core.serve import records as rec
from spec_core.serve.prompts import load_prompts
from ui.shared import (
    UI_MAX_NEW_TOKENS,
    Visitor,
    alert,
    lane_columns,
    named_upload,
    pair_and_precision,
    setting_box,
    shown_errors,
    view_slots,
    view_updates,
)
from visuals import diversed as diversed_view
from visuals import live_page
from visuals.captions import ANALYZER_INTRO
from visuals.menus import live_method_choices


def analyzer_tab(visitor: Visitor, pair_loader, pairs: list[str], prompt_files, root: Path) -> None:
    """``visitor``: the page's cross-tab state (:class:`ui.shared.Visitor`); this tab neither reads nor writes it."""

    def prompt_sets() -> list[str]:  # the project's files, and Spec-Bench's first questions of each category
        return [*prompt_files(), spec_bench.ANALYZER_CHOICE]

    files = prompt_sets()
    gr.Markdown(ANALYZER_INTRO, elem_id="an-intro")
    with gr.Row():
        prompt_file = gr.Dropdown(files, value=files[0] if files else None, label="prompt set")
        upload = gr.File(
            label="…or upload a prompt JSONL (id, category, prompt)", file_types=[".jsonl"], type="filepath"
        )
    with gr.Row():
        method = gr.Dropdown(
            live_method_choices(), value="pacer", label="method (compared with ar)", allow_custom_value=True
        )
        limit = setting_box("prompts to run (first N)", 5, 1, requests.MAX_PROMPTS, "an-limit")
        max_new = setting_box("max new tokens", 64, 1, UI_MAX_NEW_TOKENS, "an-max-new")
        run, stop = gr.Button("Run prompt set", variant="primary", elem_id="an-run"), gr.Button("Stop", variant="stop")
    with gr.Row(elem_id="an-settings"):  # this tab's own sampling settings, in view
        settings = [
            setting_box("temperature (0 = greedy)", 0.0, 0, MAX_TEMPERATURE, "an-temperature", step=0.05),
            setting_box("top-p", 1.0, 0, 1, "an-top-p", step=0.05, info="above 0, at most 1"),
            setting_box("seed", 0, 0, requests.MAX_SEED, "an-seed"),
            *pair_and_precision(pairs, "an", list(requests.PRECISIONS)),
        ]
    status = gr.Markdown(elem_id="an-status")
    summary = gr.Dataframe(
        headers=rec.headers(rec.SUMMARY_COLUMNS),
        interactive=False,
        label="summary (all prompts pooled)",
        elem_id="an-summary",
    )
    table = gr.Dataframe(
        headers=rec.headers(rec.TABLE_COLUMNS),
        interactive=False,
        elem_id="an-table",
        label="per-prompt results (click a header to sort, a row to replay)",
    )
    board = gr.Dataframe(
        headers=rec.headers(["method", "tau", "overall"]),  # the categories join them once a run has some
        interactive=False,
        elem_id="an-leaderboard",
        label="per category (Spec-Bench's table): median speedup vs ar in each, τ pooled as in the summary",
    )
    with gr.Row():
        csv_dl, jsonl_dl = gr.DownloadButton("Download table (CSV)"), gr.DownloadButton("Download events (JSONL)")
        events_up = gr.UploadButton(
            "Load a saved events file", file_types=[".jsonl"], type="filepath", elem_id="an-events-up"
        )
    title = gr.Markdown()
    lanes, slots, state = lane_columns(2, "an-lane"), view_slots("an"), gr.State(None)
    results = [status, summary, table, state, csv_dl, jsonl_dl, board]

    def finished(records, note: str) -> list[Any]:
        df = rec.table_rows(records)
        tables = [rec.shown(rec.summary_rows(records)), rec.shown(df)]
        return [note, *tables, records, *rec.write_downloads(records, df), rec.shown(rec.board_rows(records, df))]

    def on_analyze(*values):
        req = requests.parse_analyzer_request(
            *values, pairs=pairs, prompt_sets=prompt_sets(), root=root, max_new=UI_MAX_NEW_TOKENS
        )
        pair, spec, n, sampling = pair_loader(req.pair_name, req.precision), req.spec, req.max_new_tokens, req.sampling
        if req.source == str(root / spec_bench.ANALYZER_CHOICE):  # its own count per category, not the first N
            prompts = spec_bench.select(spec_bench.DEFAULT_PER_CATEGORY)
        else:
            prompts = load_prompts(req.source)[: req.n_prompts]
        how = settings_text(sampling, req.precision, n)
        yield [f"Running {len(prompts)} prompts × (ar, {spec.name}), {how}…", None, None, None, None, None, None]
        records: dict = {}
        for k, records in enumerate(rec.run_records(pair, prompts, spec, n, sampling), 1):
            yield [
                f"{k}/{len(prompts)} prompts done ({how})…",
                rec.shown(rec.summary_rows(records)),
                rec.shown(rec.table_rows(records)),
                records,
                None,
                None,
                None,
            ]
        yield finished(records, f"Done: {len(records)} prompts, {how}. Pick a row to replay it.")

    def slot_ended(last, note):  # ZeroGPU took the GPU back: the prompts done so far stay, the status says why
        return [alert(note), *[gr.update()] * (len(results) - 1)]

    event = run.click(
        gpu_slot.until_slot_end(gpu_slot.gpu_slot(shown_errors(on_analyze, len(results)), analyzer_slot_s), slot_ended),
        [prompt_file, upload, method, limit, max_new, *settings],
        results,
        api_visibility="private",
    )
    stop.click(None, cancels=[event])

    def on_events(path):
        records, note = load_events(path)
        return finished(records, note)

    events_up.upload(shown_errors(on_events, len(results)), events_up, results, api_visibility="private")

    def on_pick(records, evt: gr.SelectData):
        return replay_outputs(records, str(evt.row_value[0]) if getattr(evt, "row_value", None) else "")

    table.select(
        shown_errors(on_pick, 1 + 3 * 2 + len(slots)), state, [title, *lanes, *slots], api_visibility="private"
    )
    pareto_panel()


def analyzer_slot_s(prompt_set, upload, method, n_prompts, max_new, *rest) -> int:
    """The Analyzer's GPU slot on ZeroGPU (:mod:`spec_core.serve.gpu_slot`): ``max_new`` tokens for each prompt, twice (ar
    and the method); Spec-Bench's entry runs its own selection, not the first N."""
    if prompt_set == spec_bench.ANALYZER_CHOICE and not upload:
        n_prompts = len(spec_bench.select(spec_bench.DEFAULT_PER_CATEGORY))
    return gpu_slot.budget_s(max_new, 2 * n_prompts if isinstance(n_prompts, int | float) else n_prompts)


@named_upload
def load_events(path) -> tuple[dict, str]:
    """A saved events file (checked: size, UTF-8 text, every event's fields) → (records, the status line)."""
    records = rec.records_from_file(guards.check_upload(path, "the events file"))
    temps = ", ".join(f"{t:g}" for t in sorted({r.temperature for r in records.values()}))
    return records, f"Loaded {len(records)} prompts (temperature {temps}). Pick a row to replay it."


@named_upload
def load_sweep(path) -> list:
    """A pareto CSV (checked: size, UTF-8 text, columns, numbers) → [the sentence, the figure]."""
    return diversed_view.sweep_view(sweeps.read_sweep(guards.check_upload(path, "the sweep")))


def settings_text(sampling, precision: str, max_new: int) -> str:
    """The settings a run used, as the status line says them."""
    return f"{live.sampling_text(sampling)}, {precision}, up to {max_new} new tokens"


def pareto_panel() -> None:
    """DIVERSED's acceptance-vs-quality sweep (``python -m spec_core pareto``): a shipped one, or the user's CSV."""
    shipped = sweeps.shipped_sweeps()
    show = lambda path: diversed_view.sweep_view(sweeps.read_sweep(path))  # noqa: E731
    first = show(next(iter(shipped.values()))) if shipped else ["", None]
    with gr.Accordion("DIVERSED: acceptance vs quality (Pareto sweep)", open=False, elem_id="an-pareto"):
        with gr.Row():  # a measured sweep (embedded pair), or the user's own
            sweep = gr.Dropdown(list(shipped), value=next(iter(shipped), None), label="measured sweep")
            upload = gr.UploadButton("Load a pareto CSV", file_types=[".csv"], type="filepath", elem_id="an-pareto-up")
        outputs = [gr.Markdown(first[0], elem_id="an-pareto-text"), gr.Plot(first[1], show_label=False)]
    pick = lambda key: show(shipped[requests.parse_choice(key, "sweep", list(shipped))])  # noqa: E731
    sweep.change(shown_errors(pick, 2), sweep, outputs, api_visibility="private")
    upload.upload(shown_errors(load_sweep, 2), upload, outputs, api_visibility="private")


def replay_outputs(records, pid: str) -> list[Any]:
    """The analyzer's replay of one prompt: title, two lanes (the method, then ar), figure slots."""
    record = rec.record_for(records, pid)
    frame = rec.replay_frame(record)
    title = f"#### Prompt {pid} ({record.category})\n> {record.prompt[:400]}"
    return [title, *live_page.lanes_parts(frame, 2), *view_updates(record.lanes)]
