"""A Live tab Generate taken away from the command line: the same two files as its download buttons, and the
"why rejected" counts per lane (docs/EXPORT.md).

Runs the tab's default Generate (its first task's prompt and methods, temperature 0, 96 new tokens, precision
``auto``) unless told otherwise, the way the app does (``spec_core.serve.live.live_frames`` on the warmed-up pair):

    PYTHONPATH=. .venv/bin/python scripts/live_export.py --out runs/live_export
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spec_core.engine.methods import split_methods
from spec_core.serve import live, live_export, requests
from ui.live import DEFAULT_METHODS
from visuals.menus import EXAMPLES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt", default=EXAMPLES[0][0])
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated, up to three")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--out", default="runs/live_export", help="folder for the JSONL and the CSV")
    args = ap.parse_args()
    methods = split_methods(args.methods)  # a name's own settings may hold commas (pacer:b=2,t=0.5)
    request = requests.parse_live_request(
        args.prompt,
        methods,
        args.temperature,
        1.0,
        args.seed,
        args.max_new_tokens,
        "embedded",
        args.precision,
        ["embedded"],
    )
    frame = list(live.live_frames(live.warm_pair, request))[-1]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rounds, tokens, table = live_export.write_live_downloads(frame.lanes, args.prompt, args.temperature, out)
    print(f"{frame.arithmetic}, {', '.join(methods)}: {rounds}, {tokens}")
    for error in frame.errors.values():
        print("  ", error)
    counts = live_export.cause_counts(table)
    for lane in dict.fromkeys(counts["lane"]):
        mine = counts[counts["lane"] == lane]
        causes = ", ".join(f"{c} {n}" for c, n in zip(mine["rejection_cause"], mine["count"]))
        print(f"{lane}: {int(mine['count'].sum())} rejected ({causes})")


if __name__ == "__main__":
    main()
