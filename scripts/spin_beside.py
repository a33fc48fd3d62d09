"""One 48-token ``fixed:2`` generation (int8, the embedded pair), timed ``LOOPS`` times after a warm-up: the probe
behind docs/LOG.md's "Threads beside another job". Run it alone, then beside a second copy with many loops,
under the OpenMP settings to compare (set in the environment: they take effect before torch loads):

    GOMP_SPINCOUNT=1000 PYTHONPATH=. .venv/bin/python scripts/spin_beside.py 2 400 &   # the other job
    GOMP_SPINCOUNT=1000 PYTHONPATH=. .venv/bin/python scripts/spin_beside.py 2 4       # the one timed
"""

from __future__ import annotations

import os
import sys
import time

import torch


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(a.isdigit() and int(a) > 0 for a in argv):
        print("usage: spin_beside.py THREADS LOOPS (both positive integers)")
        return 2
    threads, loops = int(argv[0]), int(argv[1])
    said = f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')} GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '-')}"
    torch.set_num_threads(threads)
    from spec_core.core.types import SamplingConfig
    from spec_core.engine.loop import Generation
    from spec_core.model.models import load_pair

    pair = load_pair("embedded", dtype="int8")
    Generation(pair, "Hello", "fixed:2", 8, SamplingConfig()).run()
    prompt = "Write a short story about a robot who learns to paint."
    for _ in range(loops):
        t0 = time.perf_counter()
        Generation(pair, prompt, "fixed:2", 48, SamplingConfig()).run()
        print(f"threads={threads} {said} {time.perf_counter() - t0:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
