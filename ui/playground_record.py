"""Where the Playground's text comes from: its own prompt, recorded greedily, never whatever the Live tab did last.

The Playground replays draft-length policies on one greedy text (:mod:`spec_core.serve.playground`). It used to
record "the Live tab's last run", so a later sampled or stopped Live run made *Record this text* answer "nothing
to record yet" after earlier greedy runs had finished. Now the tab owns its text: its prompt, its number of new
tokens and its precision. *Record* reuses the Live tab's last **finished greedy** run when that run had the same
prompt and precision (its text and the forward costs its rounds measured: :class:`LiveGreedyRun`, which only a
finished temperature-0 run replaces); otherwise it decodes the prompt greedily here (``ar``) and prices rounds
with the default forward costs, and the summary says which.

No gradio here: ``ui/playground.py`` wires it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spec_core.serve import requests
from spec_core.serve.live import LiveFrame
from spec_core.serve.playground import costs_from_events, live_quotes, record_frame, record_text, record_upload
from visuals.playground import SLIDERS, playground_view

PLAYGROUND_MAX_NEW = 256  # the recording pass grows with the text; 96 (the default) records in seconds on a CPU


@dataclass(frozen=True, eq=False)  # hashed by identity: Gradio hashes a state to see whether it changed
class LiveGreedyRun:
    """The Live tab's last finished greedy run: what the Playground may reuse."""

    frame: LiveFrame
    prompt: str
    max_new_tokens: int


def remember_greedy(
    previous: LiveGreedyRun | None, frame: LiveFrame | None, prompt: str, max_new
) -> LiveGreedyRun | None:
    """After a Live run: keep it if it finished at temperature 0, else keep the previous one."""
    if frame is None or not frame.done or frame.temperature != 0 or not any(frame.lanes.values()):
        return previous
    return LiveGreedyRun(frame, prompt, int(max_new))


def source_text(live: LiveGreedyRun | None, prompt: str, precision: str) -> str:
    """What *Record this text* will record, said before it is pressed."""
    if live is not None and live.frame.precision == precision:
        if live.prompt == prompt:
            return (
                "Will reuse the Live tab's finished greedy run of this prompt: its text and the forward costs its "
                "rounds measured."
            )
        return (
            "Will decode this prompt greedily (temperature 0, the target alone) and record it; speed comes from the "
            "forward costs the Live tab's last greedy run measured (another prompt, the same precision)."
        )
    return (
        "Will decode this prompt greedily (temperature 0, the target alone) and record it; speed comes from "
        "this machine's cost table (or a reference machine's). Generate on the Live tab at temperature 0 first "
        "to use that run's own costs."
    )


T_KNOB = 1 + [k for k, *_ in SLIDERS].index("t")  # the knobs: the policy drawn, then visuals.playground.SLIDERS


def pacer_threshold(pair, t_now: float) -> float:
    """The t that ``pacer`` runs with on ``pair`` (``t=auto``: tuned to this machine's costs for its precision), so
    the Playground's t slider starts where the Live tab's ``pacer`` was; ``t_now`` when there is no head to tune."""
    from spec_core.core.errors import SpecScopeError
    from spec_core.policies.pacer import PacerLength, PacerParams

    try:
        return float(PacerLength.build(PacerParams(auto_t=True), pair).params.threshold)
    except SpecScopeError:  # no pre-verifier for this pair's draft
        return float(t_now)


def on_record(pair_loader, pairs: list[str], live: LiveGreedyRun | None, prompt, max_new, pair_name, precision, *knobs):
    """*Record this text*: the Playground's own prompt, greedy → [record, markdown, three figures, PACER's t]."""
    prompt = requests.parse_prompt(prompt)
    max_new = requests.parse_int(max_new, "max new tokens", 1, PLAYGROUND_MAX_NEW)
    pair_name = requests.parse_choice(pair_name, "model pair", pairs)
    precision = requests.parse_choice(precision, "precision", requests.PRECISIONS)
    pair_for = lambda p: pair_loader(pair_name, p)  # noqa: E731
    if live is not None and live.prompt == prompt and live.frame.precision == precision:
        record = record_frame(pair_for, live.frame, prompt, max(max_new, live.max_new_tokens))
    else:  # priced by the Live tab's last greedy run at this precision when there is one: the lanes' own prices
        same = live is not None and live.frame.precision == precision
        costs = costs_from_events(live.frame.lanes) if same and live is not None else None
        record = record_text(pair_for(precision), prompt, max_new, costs=costs)
        meta = {**record.meta, "source": "this prompt, decoded greedily by the target alone (ar) in the Playground"}
        if costs is not None and live is not None:
            meta |= {
                "costs": "measured in the Live tab's last run",
                "live_quotes": live_quotes(live.frame.lanes, live.prompt),
            }
        record = dataclasses.replace(record, meta=meta)
    knobs = list(knobs)
    knobs[T_KNOB] = pacer_threshold(pair_for(precision), knobs[T_KNOB])
    record = dataclasses.replace(record, meta={**record.meta, "pacer_t": knobs[T_KNOB]})  # the heatmap's mark
    return [record, *playground_view(record, *knobs), knobs[T_KNOB]]


def _pair_for(pair_loader, pairs: list[str], name: str):
    """``precision → pair`` for the pair chosen on the Live tab (validated as every request is)."""
    from spec_core.serve import requests

    pair = requests.parse_choice(name, "model pair", pairs)
    return lambda precision: pair_loader(pair, requests.parse_choice(precision, "precision", requests.PRECISIONS))


def on_upload(pair_loader, pairs: list[str], path, pair_name: str, precision: str, *knobs):
    """A saved record (no model call) or an events file (recorded on the Live tab's pair) → [record, *view]."""
    from spec_core.core.guards import check_upload

    pair_for = _pair_for(pair_loader, pairs, pair_name)
    record = record_upload(check_upload(path, "the record"), lambda: pair_for(precision))
    return [record, *playground_view(record, *knobs)]
