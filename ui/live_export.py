"""The Live tab's export: a finished run's rounds (JSONL) and tokens (CSV) to download, and why drafts were rejected.

Wiring only (docs/STYLE.md §6): the files and the counts come from :mod:`spec_core.serve.live_export`, the
figure from :mod:`visuals.rejections`. The buttons appear once a run has rounds and hide while the next one runs,
so a file never belongs to another run than the lanes shown. The rounds file loads back in the Analyzer tab.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from spec_core.serve import live_export
from visuals.rejections import why_rejected_figure


@dataclass(frozen=True)
class LiveExport:
    """The panel's components."""

    rounds: gr.DownloadButton  # the events file (JSONL), one line per round per lane
    tokens: gr.DownloadButton  # the token table (CSV), one row per drafted or emitted token
    why: gr.Plot  # rejections per cause and lane

    @property
    def outputs(self) -> list[Any]:
        return [self.rounds, self.tokens, self.why]


def export_panel() -> LiveExport:
    """Two download buttons and the "why rejected" figure, hidden until a run has finished."""
    with gr.Row(elem_id="live-export"):
        rounds = gr.DownloadButton("Download rounds (JSONL)", visible=False, elem_id="dl-rounds")
        tokens = gr.DownloadButton("Download tokens (CSV)", visible=False, elem_id="dl-tokens")
    return LiveExport(rounds, tokens, gr.Plot(show_label=False, visible=False, elem_id="why-rejected"))


def hidden() -> list[Any]:
    return [gr.update(value=None, visible=False)] * 3


def export_outputs(frame, prompt: str) -> list[Any]:
    """After a run: [the rounds file, the tokens file, the figure] (hidden when no lane has a round; the figure
    only when some lane drafted)."""
    if frame is None or not any(frame.lanes.values()):
        return hidden()
    rounds, tokens, table = live_export.write_live_downloads(frame.lanes, prompt or "", frame.temperature)
    counts = live_export.cause_counts(table)
    return [
        gr.update(value=rounds, visible=True),
        gr.update(value=tokens, visible=True),
        gr.update(value=why_rejected_figure(counts), visible=not counts.empty),
    ]


def wire_export(panel: LiveExport, run: gr.Button, done, frame: gr.State, prompt: gr.Textbox) -> None:
    """``run``: the Generate button (hides the last run's files); ``done``: its event, followed when it ends."""
    run.click(hidden, None, panel.outputs, api_visibility="private", show_progress="hidden")
    done.then(export_outputs, [frame, prompt], panel.outputs, api_visibility="private", show_progress="hidden")
