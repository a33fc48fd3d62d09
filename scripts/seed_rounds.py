"""What the seeds find to act on, on the Live tab's default task: counts of kept drafts per drafting round.

Issue #43 judges the draft by what PACER and the block drafters keep on the app's first task ("Summarize a
passage", ``visuals.menus.PRESETS[0]``): the share of drafting rounds that keep at least one draft, and the
acceptance at each drafted position. Greedy, the app's default length, counts only (no clock), so the figures are
the same on any machine at one precision.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/seed_rounds.py --methods pacer,block:dpace,fixed:2,pacer+diversed
"""

from __future__ import annotations

import argparse
import sys

from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import generate
from spec_core.model.models import load_pair
from visuals.menus import PRESETS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="pacer,block:dpace,fixed:2")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="the Live tab's default")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--draft", default=None, help="draft asset name (default: the shipped default)")
    args = ap.parse_args(argv)
    if args.max_new_tokens < 1:
        ap.error("--max-new-tokens must be at least 1")
    try:
        pair = load_pair("embedded", device="cpu", dtype=args.dtype, draft=args.draft)
    except SpecScopeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    prompt = PRESETS[0].prompt
    print(f"task {PRESETS[0].task!r}, {args.max_new_tokens} new tokens, precision {pair.precision}, greedy")
    for method in args.methods.split(","):
        try:
            events = generate(pair, prompt, method, max_new_tokens=args.max_new_tokens).events
        except SpecScopeError as err:
            print(f"{method}: error: {err}")
            continue
        drafting = [e for e in events if e.draft_tokens]
        kept_some = sum(e.accepted > 0 for e in drafting)
        depth = max((len(e.draft_tokens) for e in drafting), default=0)
        at = []
        for i in range(min(depth, 4)):
            reached = [e for e in drafting if len(e.draft_tokens) > i and e.accepted >= i]
            at.append(f"{sum(e.accepted > i for e in reached)}/{len(reached)}")
        share = kept_some / len(drafting) if drafting else float("nan")
        print(
            f"{method:16s} drafting rounds {len(drafting):3d}  keep ≥ 1: {share:.2f}  "
            f"kept at position 1..{len(at)} (of those reached): {' '.join(at)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
