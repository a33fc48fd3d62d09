"""How much each Live-tab task copies, at each precision: the tab's Generate of every preset (or of prompts given
with ``--prompt``) with ``hybrid``, ``lookup`` and ``ar``, one line per task and precision.

Each line gives, per lane, its rounds, its new tokens, its kept drafts and how many of them were copied from the
prompt or the text (prompt lookup), and its speed over ``ar``'s by the run's own clock (the lanes' draft, verify
and engine seconds; one run, no repeats: a rough figure, the counts are exact). It is how the default task was
chosen: one whose text quotes the passage at every precision, so that a new visitor sees speculation pay
(docs/LOG.md, 2026-12-02):

    PYTHONPATH=. OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python scripts/preset_survey.py --precisions int8,bfloat16,float32
"""

from __future__ import annotations

import argparse
import sys

from spec_core.analysis.bench import accepted_by_source
from spec_core.core.errors import SpecScopeError
from spec_core.serve import live, requests
from visuals.menus import PRESETS

METHODS = ["hybrid", "lookup", "ar"]


def lane_line(events) -> tuple[str, float]:
    """A lane's counts and its seconds by its own clock."""
    seconds = sum(e.draft_s + e.verify_s + e.engine_s for e in events)
    kept = sum(e.accepted for e in events)
    copied = accepted_by_source(events)["lookup_tokens"]
    tokens = sum(len(e.emitted) for e in events)
    return f"{len(events)} rounds, {tokens} tokens, {kept} kept ({copied} copied)", seconds


def main() -> None:
    try:
        survey()
    except SpecScopeError as err:  # a bad precision, an empty prompt, an absurd length: one line, exit 2
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def survey() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precisions", default="auto", help="comma-separated: auto, int8, bfloat16, float32")
    ap.add_argument("--prompt", action="append", default=[], help="a prompt to survey instead of the presets")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    args = ap.parse_args()
    tasks = [(f"prompt {i + 1}", p) for i, p in enumerate(args.prompt)] or [(p.task, p.prompt) for p in PRESETS]
    for precision in args.precisions.split(","):
        for task, prompt in tasks:
            request = requests.parse_live_request(
                prompt, METHODS, 0.0, 1.0, 0, args.max_new_tokens, "embedded", precision.strip(), ["embedded"]
            )
            frame = list(live.live_frames(live.warm_pair, request))[-1]
            if frame.errors:
                print(f"{task} · {precision}: {'; '.join(frame.errors.values())}")
                continue
            ar_line, ar_s = lane_line(frame.lanes["ar"])
            parts = []
            for method in METHODS[:-1]:
                line, seconds = lane_line(frame.lanes[method])
                parts.append(f"{method}: {line}, {ar_s / seconds:.2f}× ar")
            text = "".join(e.next_piece for e in frame.lanes["ar"])[:60].replace("\n", " ")
            print(f"{task} · {frame.arithmetic}: {'; '.join(parts)}; ar: {ar_line}; text {text!r}", flush=True)


if __name__ == "__main__":
    main()
