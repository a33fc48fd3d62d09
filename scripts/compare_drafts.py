"""Feature drafts side by side, in one run: acceptance and τ of fixed windows on held-out prompts.

Counts, not timings: acceptance (kept ÷ drafted), τ (new tokens ÷ target forwards) and the kept drafts that lie
outside the draft's trimmed head (proposed through the head the text's own words widen) of each draft, on the same
target, precision and prompts, so the figures do not depend on the machine's load. Every run is checked to write
``ar``'s text (the methods are lossless and greedy). Two prompt sets, the ones issue #43 is judged on:

- ``chat``: the benchmark prompts (``prompts/specscope.jsonl``, never trained on), 64 new tokens;
- ``spec-bench``: held-out Spec-Bench first turns (``spec_bench.select(N, offset)``; offset 70 is past every
  question the project has tuned on), 128 new tokens, with a row per category;
- ``default``: the Live tab's first task (its passage to summarize), 96 new tokens.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/compare_drafts.py assets/drafts:feature runs/s18/out:feature \\
        --set chat --methods fixed:1,fixed:2,fixed:4
    PYTHONPATH=. .venv/bin/python scripts/compare_drafts.py assets/drafts:feature runs/s18/out:feature \\
        --set spec-bench --per-category 3 --offset 70 --methods fixed:2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pandas as pd
import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.jsonl import read_objects
from spec_core.engine.loop import generate
from spec_core.model.draft_assets import load_draft
from spec_core.model.int8 import int8_draft
from spec_core.model.models import INT8, load_pair
from spec_core.serve import spec_bench
from visuals.menus import PRESETS


def prompts_of(args) -> list[dict]:
    if args.set == "chat":
        return [{"category": "chat", **o} for _, o in read_objects(Path("prompts/specscope.jsonl"), "prompt file")]
    if args.set == "default":
        return [{"category": "default", "id": PRESETS[0].label, "prompt": PRESETS[0].prompt}]
    return [p for p in spec_bench.select(args.per_category, args.offset) if not p.get("history")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("drafts", nargs="+", help="DIR:NAME of each draft (NAME.safetensors with its NAME.json)")
    ap.add_argument("--set", choices=["chat", "spec-bench", "default"], default="chat")
    ap.add_argument("--methods", default="fixed:1,fixed:2,fixed:4")
    ap.add_argument(
        "--max-new-tokens", type=int, default=None, help="default: 64 (chat), 128 (spec-bench), 96 (default)"
    )
    ap.add_argument("--per-category", type=int, default=3)
    ap.add_argument("--offset", type=int, default=70)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--draft-bf16",
        action="store_true",
        help="beside an int8 target, keep the draft in bf16 (the pair loader quantizes it to int8)",
    )
    ap.add_argument("--out", type=Path, default=None, help="CSV of every (draft, method, prompt)")
    args = ap.parse_args(argv)
    specs = []
    for spec in args.drafts:
        directory, sep, name = spec.rpartition(":")
        if not sep or not (Path(directory) / f"{name}.json").is_file():
            ap.error(f"{spec!r}: give DIR:NAME with DIR/NAME.json and DIR/NAME.safetensors")
        specs.append((spec, Path(directory), name))
    tokens = args.max_new_tokens or {"chat": 64, "spec-bench": 128, "default": 96}[args.set]
    if tokens < 1 or args.per_category < 1 or args.offset < 0:
        ap.error("--max-new-tokens and --per-category must be at least 1, --offset at least 0")
    torch.set_num_threads(args.threads)
    try:
        base = load_pair("embedded", device="cpu", dtype=args.dtype)
    except SpecScopeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    prompts = prompts_of(args)
    ar = {p["id"]: generate(base, p["prompt"], "ar", max_new_tokens=tokens).token_ids for p in prompts}
    rows = []
    for spec, directory, name in specs:
        draft, card = load_draft(base.parts_target, name, directory)
        if base.precision == INT8 and not args.draft_bf16:  # as the pair loader does: the engine's draft step
            draft = int8_draft(draft)
        pair = dataclasses.replace(base, name=name, draft=draft.to(base.device), draft_card=card, extras={})
        head = set(draft.vocab_subset.tolist()) if getattr(draft, "vocab_subset", None) is not None else set()
        for method in args.methods.split(","):
            for p in prompts:
                run = generate(pair, p["prompt"], method, max_new_tokens=tokens)
                if run.token_ids != ar[p["id"]]:
                    raise SystemExit(f"{spec} {method} wrote another text than ar on {p['id']}: not lossless")
                s = run.stats
                rows.append(
                    {
                        "draft": spec,
                        "method": method,
                        "category": p["category"],
                        "id": p["id"],
                        "drafted": s.drafted_tokens,
                        "accepted": s.accepted_tokens,
                        "forwards": s.target_forwards,
                        "tokens": s.new_tokens,
                        # kept drafts the trimmed head lacks: proposed through the widened head (the text's words)
                        "kept_outside": sum(t not in head for e in run.events for t in e.draft_tokens[: e.accepted])
                        if head
                        else 0,
                    }
                )
            print(f"{spec} {method} done", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    groups = ["draft", "method"] + (["category"] if args.set == "spec-bench" else [])
    for keys in (groups, ["draft", "method"]) if args.set == "spec-bench" else (groups,):
        g = df.groupby(keys, sort=False)[["drafted", "accepted", "forwards", "tokens", "kept_outside"]].sum()
        g["acceptance"] = (g.accepted / g.drafted).round(3)
        g["tau"] = (g.tokens / g.forwards).round(3)
        print(g[["acceptance", "tau", "kept_outside"]].to_string())
    kept = " (the draft kept in bf16)" if args.draft_bf16 and base.precision == INT8 else ""
    print(f"{len(prompts)} prompts, {tokens} new tokens, precision {base.precision}{kept}; every run wrote ar's text")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
