"""The Live tab's "Step through one round" panel: one round of one lane, step by step, with the training lens.

The card is :func:`visuals.stepthrough.frame_card`: every step of the round, of which the page's style sheet shows
the one the step radio has checked, so a step change runs no handler (one lagged the radio by seconds while the
server drew a run's figures). The views that follow a round (the training lens) are redrawn for the round shown
(:func:`visuals.views.build_for_round`). After a run the panel opens on the first drafting lane with a block the
lens can weigh, on the block the target kept the most of (:func:`visuals.lens.telling_round`), else its round 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gradio as gr

from ui.shared import N_VIEW_SLOTS
from visuals import lens, live_page, stepthrough, views

STEP_DELAY_S = 1.2  # pause between the steps of a slow replay
card = stepthrough.frame_card  # (frame, lane, round, step) → HTML


@dataclass(frozen=True)
class StepThrough:
    """The panel's components."""

    lane: gr.Dropdown  # the lane (method) stepped through
    round: gr.Slider  # its round
    step: gr.Radio  # draft, verify, accept, ... (visuals.stepthrough.STEPS)
    play: gr.Button  # every step of the round, slowly
    card: gr.HTML


def step_through_panel() -> StepThrough:
    """The panel, in a closed accordion."""
    with gr.Accordion("Step through one round (teaching)", open=False):
        with gr.Row():
            lane = gr.Dropdown([], label="method", elem_id="st-lane")
            rnd = gr.Slider(0, 1, value=0, step=1, label="round", elem_id="st-round")
            step = gr.Radio(list(stepthrough.STEPS), value="draft", label="step", elem_id=stepthrough.STEP_RADIO_ID)
            play = gr.Button("Replay this round slowly")
        html = gr.HTML(elem_id="stepthrough")
    return StepThrough(lane, rnd, step, play, html)


def lens_slots(frame, lane, rnd) -> list[Any]:
    """The figure slots, with the round-following views (the training lens) redrawn for this round."""
    if frame is None or not lane or lane not in frame.lanes:
        return [gr.update()] * N_VIEW_SLOTS
    active = views.views_with_data(frame.lanes)[:N_VIEW_SLOTS]
    figs = [views.build_for_round(v, frame.lanes, lane, int(rnd), frame.baseline) for v in active]
    return [f if f is not None else gr.update() for f in figs] + [gr.update()] * (N_VIEW_SLOTS - len(active))


def focus(frame, lane, step) -> list[Any]:
    """``lane``'s most telling block for the training lens (:func:`visuals.lens.telling_round`: the one the target
    kept the most of; else round 0): the slider spans exactly
    its rounds, the card and the lens follow → [round, card, *plots]."""
    events = frame.lanes.get(lane, ()) if frame is not None and lane else ()
    last, first = live_page.last_round(events), lens.telling_round(events)
    return [
        gr.update(maximum=max(last, 1), value=first),
        card(frame, lane, first, step),
        *lens_slots(frame, lane, first),
    ]


def after_run(frame, step) -> list[Any]:
    """After a run: its lanes to choose from, the first with a block the training lens can weigh focused (else the
    first) → [lane, round, card, *plots]. Focusing lane A always left the lens empty when A only copied."""
    lanes = live_page.step_lanes(frame)
    lane = next((m for m in lanes if lens.block_rounds(frame.lanes[m])), lanes[0] if lanes else None)
    return [gr.update(choices=lanes, value=lane), *focus(frame, lane, step)]


def wire_step_through(panel: StepThrough, frame: gr.State, plots: list[Any]) -> None:
    """The panel's own events: ``frame`` is the Live tab's last frame, ``plots`` its figure slots' plots."""
    step_in = [frame, panel.lane, panel.round, panel.step]
    panel.lane.input(
        focus, [frame, panel.lane, panel.step], [panel.round, panel.card, *plots], api_visibility="private"
    )
    gr.on(
        [panel.round.input, panel.round.release],  # typing a round number (Enter or not), or dragging
        lambda f, lane, r, s: [card(f, lane, r, s), *lens_slots(f, lane, r)],
        step_in,
        [panel.card, *plots],
        api_visibility="private",
        trigger_mode="always_last",
        show_progress="hidden",
    )
    # no handler on panel.step: the card holds every step and the style sheet shows the radio's (stepthrough.step_css)

    def on_play(frame, lane, rnd):  # the round's card once, then the radio moves and the card follows it
        for k, step in enumerate(stepthrough.STEPS):
            yield step, card(frame, lane, rnd, step) if k == 0 else gr.update()
            time.sleep(STEP_DELAY_S)

    panel.play.click(on_play, step_in[:3], [panel.step, panel.card], api_visibility="private")
