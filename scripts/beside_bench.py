"""The app's ``/generate`` quiet and beside a ``bench`` on the same machine, as one ratio in one run.

Starts the app's server in this process (the app's own thread choice, ``spec_core/core/threads.py``), times
``/generate`` of one method (default a 48-token ``fixed:2``) ``--repeats`` times on a quiet machine, then starts a
``python -m spec_core bench`` beside it (its own process, its own default threads) and times the same calls again.
Prints each call's seconds, the medians and their ratio, and the rounds of both (they must be identical: the rounds
never follow the load). Pass ``--spin 300000`` (libgomp's default) to see what a long spin costs beside another job.

    PYTHONPATH=. .venv/bin/python scripts/beside_bench.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="fixed:2")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--spin", default="1000", help="GOMP_SPINCOUNT for both processes (libgomp's default: 300000)")
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.max_new_tokens < 1:
        print("error: --repeats and --max-new-tokens must be at least 1")
        return 2
    os.environ["GOMP_SPINCOUNT"] = a.spin  # before spec_core and torch load (spec_core/core/threads.py)

    from gradio_client import Client

    import app
    from spec_core.core import guards
    from spec_core.core.threads import apply_threads

    threads = apply_threads(at_once=guards.serving_limits().concurrency)
    app.get_pair("embedded", a.precision)  # loaded and warmed before anything is timed
    demo = app.build_demo(app.get_pair)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.launch_kwargs())
    client = Client(demo.local_url, verbose=False)
    prompt = app.EXAMPLES[0][0]

    def calls() -> tuple[list[float], list[tuple]]:
        took, rounds = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            out = client.predict(prompt, a.method, a.max_new_tokens, 0.0, 0, api_name="/generate")
            took.append(time.perf_counter() - t0)
            rounds.append((out["new_tokens"], out.get("target_forwards"), out["text"]))
        return took, rounds

    calls()  # warm-up: the first call pays for the server's lazy paths
    quiet, quiet_rounds = calls()
    bench = subprocess.Popen(
        [sys.executable, "-m", "spec_core", "bench", "--methods", "ar,fixed:2,fixed:4,lookup", "--repeats", "50"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        time.sleep(20)  # the bench has loaded its pair and is decoding
        busy, busy_rounds = calls()
    finally:
        bench.kill()
        demo.close()
    q, b = statistics.median(quiet), statistics.median(busy)
    print(f"app threads {threads}, GOMP_SPINCOUNT {a.spin}, {a.method}, {a.max_new_tokens} tokens")
    print("quiet s:", " ".join(f"{t:.2f}" for t in quiet))
    print("beside a bench s:", " ".join(f"{t:.2f}" for t in busy))
    print(f"median quiet {q:.2f} s, beside a bench {b:.2f} s: {b / q:.2f}x")
    print("same rounds quiet and beside the bench:", quiet_rounds == busy_rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
