"""Feature drafts side by side on the benchmark prompts: first-token acceptance (fixed:1), τ at fixed:4 and 6.

Usage: ``PYTHONPATH=. .venv/bin/python scripts/compare_drafts.py THREADS DIR:NAME [DIR:NAME ...]``, for example
``scripts/compare_drafts.py 2 runs/old_assets/drafts:feature assets/drafts:feature``. Acceptance and τ are
counts, not timings, so the figures do not depend on the machine's load.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from spec_core.core.jsonl import read_objects
from spec_core.engine.loop import generate
from spec_core.model.draft_assets import load_draft
from spec_core.model.models import ModelPair, load_pair


def main(threads: int, specs: list[str]) -> None:
    torch.set_num_threads(threads)
    base = load_pair("embedded", device="cpu", dtype="bfloat16")
    prompts = [o["prompt"] for _, o in read_objects(Path("prompts/specscope.jsonl"), "prompt file")]
    for spec in specs:
        directory, name = spec.split(":")
        draft, card = load_draft(base.target, name, Path(directory))
        pair = ModelPair(name, base.target, draft, card["design"], base.tokenizer, base.device, base.dtype)
        for method in ("fixed:1", "fixed:4", "fixed:6"):
            drafted = accepted = forwards = tokens = 0
            for prompt in prompts:
                s = generate(pair, prompt, method, max_new_tokens=64).stats
                drafted, accepted = drafted + s.drafted_tokens, accepted + s.accepted_tokens
                forwards, tokens = forwards + s.target_forwards, tokens + s.new_tokens
            print(f"{spec:40s} {method:8s} alpha {accepted / drafted:.3f} tau {tokens / forwards:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
