"""What batch invariance (spec_core/model/invariance.py) costs: target passes per width, then decoding, with and without.

Usage: ``PYTHONPATH=. taskset -c 0 .venv/bin/python scripts/invariance_cost.py PRECISIONS REPEATS TOKENS PROMPTS``,
e.g. ``scripts/invariance_cost.py int8,bfloat16 9 48 2`` (docs/LOG.md, "2026-12-02, commit b54161d"). One
thread; the two arms are switched on the same loaded pair and timed interleaved, medians over the repeats.
"""

import json
import statistics
import sys
import time

import torch

from spec_core.core.precision import target_calls
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.model.invariance import set_batch_invariant
from spec_core.model.models import load_pair

WIDTHS = (1, 2, 3, 5, 9, 33)
METHODS = ("ar", "fixed:2", "fixed:4")


def pass_costs(pair, repeats: int) -> None:
    calls = target_calls(pair, widths=WIDTHS, context=200)
    times = {(on, w): [] for on in (0, 1) for w in calls}
    for rep in range(repeats + 1):  # the first is a warm-up
        for on in (0, 1):
            set_batch_invariant(pair.target, bool(on))
            for w, fn in calls.items():
                t0 = time.perf_counter()
                fn()
                if rep:
                    times[(on, w)].append((time.perf_counter() - t0) * 1000)
    med = {k: statistics.median(v) for k, v in times.items()}
    for w in calls:
        print(
            f"{pair.precision:9s} width {w:2d}: plain {med[(0, w)]:7.2f} ms  invariant {med[(1, w)]:7.2f} ms  "
            f"ratio {med[(1, w)] / med[(0, w)]:.3f}",
            flush=True,
        )


def decode_speed(pair, repeats: int, tokens: int, prompts: list[str]) -> None:
    times, counts = {}, {}
    for rep in range(repeats + 1):
        for on in (0, 1):
            set_batch_invariant(pair.target, bool(on))
            for m in METHODS:
                for i, p in enumerate(prompts):
                    t0 = time.perf_counter()
                    run = Generation(pair, p, m, tokens, SamplingConfig(), display=False).run()
                    if rep:
                        times.setdefault((on, m, i), []).append(time.perf_counter() - t0)
                        counts[(on, m, i)] = len(run.token_ids)
    tps = {
        (on, m): sum(counts[(on, m, i)] for i in range(len(prompts)))
        / sum(statistics.median(times[(on, m, i)]) for i in range(len(prompts)))
        for on in (0, 1)
        for m in METHODS
    }
    for m in METHODS:
        print(
            f"{pair.precision:9s} {m:8s} plain {tps[(0, m)]:6.2f} tok/s  invariant {tps[(1, m)]:6.2f} tok/s  "
            f"invariant/plain {tps[(1, m)] / tps[(0, m)]:.3f}  ({tps[(1, m)] / tps[(1, 'ar')]:.3f}× invariant ar, "
            f"{tps[(0, m)] / tps[(0, 'ar')]:.3f}× plain ar)",
            flush=True,
        )


def main() -> None:
    torch.set_num_threads(1)
    precisions, repeats, tokens, n_prompts = (
        sys.argv[1].split(","),
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    with open("prompts/specscope.jsonl", encoding="utf-8") as f:
        prompts = [json.loads(line)["prompt"] for line in f][:n_prompts]
    for precision in precisions:
        pair = load_pair("embedded", "cpu", precision)
        pass_costs(pair, repeats)
        decode_speed(pair, max(1, repeats // 4), tokens, prompts)
        set_batch_invariant(pair.target, True)


if __name__ == "__main__":
    main()
