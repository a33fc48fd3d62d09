"""Where a round's time goes: per method, the draft's, the target's and the rest of a round, and PACER's head.

Usage: ``PYTHONPATH=. .venv/bin/python scripts/round_costs.py --methods fixed:1,pacer [--prompts 14] [--repeats 3]``

Runs the embedded pair at int8 on one thread over the first ``--prompts`` of ``prompts/specscope.jsonl`` (64 new
tokens, greedy), the methods interleaved per prompt after one warm-up each, and sums each round's event: ``draft_s``
(the drafter's and the policy's work, PACER's pre-verifier among it), ``verify_s`` (the target's pass) and the
pre-verifier's own time (``policy_trace["head_ms"]``). It prints tokens/s, ms a round and its parts, and τ. Wall
times: run it on a quiet core (``taskset -c 0``); the rounds themselves do not depend on the load.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from spec_core.core.cost_tables import run_costs
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.model.models import load_pair


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", required=True, help="comma-separated method names, e.g. fixed:1,pacer")
    ap.add_argument("--prompts", type=int, default=14, help="how many of the benchmark prompts (1-14)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    a = ap.parse_args(argv)
    if not 1 <= a.prompts <= 14 or a.repeats < 1 or a.max_new_tokens < 1:
        ap.error("--prompts takes 1-14, --repeats and --max-new-tokens at least 1")
    torch.set_num_threads(1)
    pair = load_pair("embedded", dtype="int8")
    costs = run_costs(pair)[0]
    lines = Path("prompts/specscope.jsonl").read_text(encoding="utf-8").splitlines()
    prompts = [json.loads(line)["prompt"] for line in lines if line.strip()][: a.prompts]
    greedy = SamplingConfig(temperature=0.0, seed=0).validate()
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]

    def run(method: str, prompt: str, n: int):
        return Generation(pair, prompt, method, n, greedy, display=False, costs=costs).run()

    for m in methods:
        run(m, prompts[0], 16)  # warm-up
    sums = {m: [0.0] * 6 for m in methods}  # wall, tokens, rounds, draft, verify, head (seconds)
    for _ in range(a.repeats):
        for prompt in prompts:
            for m in methods:
                r, s = run(m, prompt, a.max_new_tokens), sums[m]
                s[0] += r.stats.wall_s
                s[1] += r.stats.new_tokens
                s[2] += r.stats.target_forwards
                s[3] += sum(e.draft_s for e in r.events)
                s[4] += sum(e.verify_s for e in r.events)
                s[5] += sum((e.policy_trace or {}).get("head_ms", 0.0) for e in r.events) / 1000
    print("method        tok/s  ms/round  draft (head)  target  other    tau")
    for m, (wall, tokens, rounds, draft, verify, head) in sums.items():
        per = 1000 / rounds
        print(
            f"{m:12s} {tokens / wall:6.1f}  {wall * per:8.2f}  {draft * per:5.2f} ({head * per:4.2f})"
            f"  {verify * per:6.2f}  {(wall - draft - verify) * per:5.2f}  {tokens / rounds:5.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
