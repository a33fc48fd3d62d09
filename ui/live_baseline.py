"""The Live tab's replayed baseline: ``fixed:2`` on a finished greedy run's text, when no fixed-window lane ran.

The seeds' views (draft length, PACER's threshold, DIVERSED's w_t, the training lens) draw their method beside a
fixed window (:mod:`visuals.baseline`). The default trio (``hybrid``, ``pacer+diversed``, ``ar``) keeps its third
lane for ``ar``, against which every speedup is measured, so no lane runs a fixed window. Rather than a fourth
lane, the finished run's greedy text is recorded once (:func:`spec_core.serve.playground.record_lanes`: one
target pass over the text and :data:`WINDOW` draft passes over every position at once) and the window is replayed
on it (:func:`spec_core.engine.replay.replay_policy`), which at temperature 0 gives its rounds exactly. A sampled, stopped
or all-lossy run gets no replay (its text is not the target's greedy one), and the views then say they have no
baseline. No gradio here: ``ui/live.py`` wires it.
"""

from __future__ import annotations

import dataclasses
import time

from spec_core.core.errors import SpecScopeError
from spec_core.engine.methods import is_fixed_window, is_plain
from spec_core.serve import live
from spec_core.serve.live import LiveFrame
from spec_core.serve.requests import LiveRequest

WINDOW = 2  # the replayed window: fixed:2, the tab's former default baseline (the draft's first two tokens)


def wants_replay(frame: LiveFrame, stopped: bool) -> bool:
    """A finished greedy run with drafting lanes and no fixed-window lane of its own."""
    if stopped or not frame.done or frame.temperature != 0:
        return False
    ran = [m for m, ev in frame.lanes.items() if ev]
    return any(not is_plain(m) for m in ran) and not any(is_fixed_window(m) for m in ran)


def with_baseline(
    frame: LiveFrame, pair_loader: live.PairLoader, request: LiveRequest, stopped: bool = False
) -> LiveFrame:
    """``frame`` with :attr:`~spec_core.serve.live.LiveFrame.baseline` set (and its cost said in the status), or as it
    was when there is nothing to replay or the run has no greedy lossless text to replay on."""
    if not wants_replay(frame, stopped):
        return frame
    from spec_core.serve.playground import record_lanes, replay_policy

    t0 = time.perf_counter()
    try:
        pair = pair_loader(request.pair_name, request.precision)
        record = record_lanes(pair, request.prompt, frame.lanes, 0.0, request.max_new_tokens, max_len=WINDOW)
    except SpecScopeError as err:
        return dataclasses.replace(frame, status=f"{frame.status} No fixed-window baseline: {err}.")
    replay = replay_policy(record, f"fixed:{WINDOW}")
    said = (
        f" The views' fixed:{WINDOW} baseline is replayed on {record.meta.get('source', 'this text')} "
        f"({replay.rounds} rounds; recorded in {time.perf_counter() - t0:.1f} s)."
    )
    return dataclasses.replace(frame, baseline=replay, status=frame.status + said)
