"""Pieces every tab uses: the visitor's cross-tab state, figure slots filled from the view registry, lane columns,
and errors shown in place.

Errors in the page's own handlers (a bad upload, nothing to record, an empty prompt) are shown as one message
inside the tab (:func:`shown_errors`): a ``gr.Error`` would also mark every output of the event with a red
"Error" badge, four or thirty of them for one mistake. The ``/generate`` API keeps ``gr.Error``
(:func:`ui_errors`), which is how an API client hears of it.
"""

from __future__ import annotations

import functools
import html
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from spec_core.core.errors import SpecScopeError
from visuals import views
from visuals.captions import folded

N_VIEW_SLOTS = 10  # figure slots filled from the view registry (visuals.views), generic views first
UI_MAX_NEW_TOKENS = 512


@dataclass(frozen=True)
class Visitor:
    """Everything that flows from one tab to another, for one visitor's page: the cross-tab ``gr.State``s.

    ``app.build_demo`` creates it once (:meth:`create`, inside the Blocks) and hands it to every tab function; a
    tab reaches another only through these fields. A state only one tab uses (the Live tab's last frame and Stop,
    the Analyzer's records, the Playground's record) stays in that tab.

    - ``live_greedy``: the Live tab's last *finished greedy* run (:class:`ui.playground_record.LiveGreedyRun`, or
      None). The Live tab writes it after each run (a sampled or stopped run keeps the previous one); the
      Playground reads it to say what *Record this text* will record, and reuses it when the prompt matches.
    """

    live_greedy: gr.State

    @classmethod
    def create(cls) -> Visitor:
        """The states, empty: call it once, inside ``gr.Blocks``."""
        return cls(live_greedy=gr.State(None))


def ui_errors(fn: Callable) -> Callable:
    """Turn :class:`SpecScopeError` (bad input, an unavailable model) into a ``gr.Error`` (the API's way)."""

    def stream(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except SpecScopeError as err:
            raise gr.Error(str(err)) from err

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SpecScopeError as err:
            raise gr.Error(str(err)) from err

    return functools.wraps(fn)(stream if inspect.isgeneratorfunction(fn) else call)


def setting_box(label: str, value: float, low: float, high: float, elem_id: str | None = None, **kw: Any) -> gr.Number:
    """A numeric setting the handler checks (:mod:`spec_core.serve.requests`), with its range in its info. No minimum or
    maximum goes to the browser: a slider or a bounded box there snaps what was typed into range without a word
    (0 new tokens ran 1, temperature −1 ran greedy); here an out-of-range value stays in the box and the run is
    refused with a message."""
    kw.setdefault("info", f"{low:g} to {high:g}")
    return gr.Number(value=value, label=label, elem_id=elem_id, **kw)


def alert(message: str) -> str:
    """One visible error message, for a Markdown or HTML output."""
    return f'<div class="spec-alert" role="alert">⚠ {html.escape(message)}</div>'


def shown_errors(fn: Callable, outputs: int, at: int = 0) -> Callable:
    """A handler whose :class:`SpecScopeError` becomes one message in output ``at`` (of ``outputs``), every other
    output left as it was; a stream keeps what it already showed."""

    def failed(err: SpecScopeError) -> list[Any]:
        out: list[Any] = [gr.update()] * outputs
        out[at] = alert(str(err))
        return out

    def stream(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except SpecScopeError as err:
            yield failed(err)

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SpecScopeError as err:
            return failed(err)

    return functools.wraps(fn)(stream if inspect.isgeneratorfunction(fn) else call)


def named_upload(load: Callable) -> Callable:
    """A loader ``path → outputs`` whose errors start with the file's name (unless they already say it), so
    the message says which file it is about."""

    def call(path, *args):
        try:
            return load(path, *args)
        except SpecScopeError as err:
            name = Path(str(path)).name if path else "the file"
            raise SpecScopeError(str(err) if name in str(err) else f"{name}: {err}") from err

    return functools.wraps(load)(call)


def view_updates(lanes, slots: int = N_VIEW_SLOTS, replayed=None) -> list[Any]:
    """For each figure slot: (visibility, caption, figure) from the view registry; unused slots hidden. The
    caption says what to look for, what this run's data shows (with its counts), then how to read the figure.
    ``replayed``: the run's fixed window replayed on its text (:attr:`spec_core.serve.live.LiveFrame.baseline`)."""
    active = views.views_with_data(lanes)[:slots]
    out: list[Any] = []
    for i in range(slots):
        v = active[i] if i < len(active) else None
        out += [
            gr.update(visible=v is not None),
            f"**{v.title}** — {folded(views.caption_for(v, lanes, replayed))}" if v else "",
            views.build(v, lanes, replayed) if v else None,
        ]
    return out


def figure_updates(frame, first: bool) -> list[Any]:
    """A live stream's figure slots (``frame``: a :class:`spec_core.serve.live.LiveFrame`): hidden at its first update,
    untouched while it runs, drawn once when it is done (drawing them at every update cost the models their cores)."""
    if frame.done:
        return view_updates(frame.lanes, replayed=frame.baseline)
    return [gr.update(visible=False), "", None] * N_VIEW_SLOTS if first else [gr.update()] * (3 * N_VIEW_SLOTS)


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


def pair_and_precision(pairs: list[str], prefix: str, precisions: list[str]) -> list[Any]:
    """A tab's own model pair (shown only when there is a choice) and precision."""
    from visuals.live_page import PRECISION_INFO

    return [
        gr.Dropdown(
            pairs, value=pairs[0], label="model pair (target,draft)", visible=len(pairs) > 1, elem_id=f"{prefix}-pair"
        ),
        gr.Radio(precisions, value="auto", label="precision", elem_id=f"{prefix}-precision", info=PRECISION_INFO),
    ]
