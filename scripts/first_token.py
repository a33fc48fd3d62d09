"""How soon a fresh app answers: start ``python app.py`` with a fresh cache (the converted target copied in, no
cost table), wait for its page, then time the first ``/generate`` call's first streamed token.

The app preloads the default pair in the background as it starts (``spec_core.serve.live.start_background``) and times
nothing on a request's path, so the first call waits only for whatever of that preload is left. Prints the seconds
from launch to the page, from the call to its first token and to its end, and whether the app left a cost table
measurement running in the background (it does on a CPU with no table of its own, niced).

    PYTHONPATH=. .venv/bin/python scripts/first_token.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait-s", type=float, default=0.0, help="seconds between the page answering and the call")
    a = ap.parse_args(argv)
    from gradio_client import Client

    from spec_core.core.assets import cache_dir
    from spec_core.model.models import EMBEDDED_NAME

    converted = cache_dir() / EMBEDDED_NAME
    if not converted.exists():
        print(f"error: run the app once first: {converted} holds the converted target this copies")
        return 2
    fresh = Path(tempfile.mkdtemp(prefix="specscope-fresh-"))
    shutil.copytree(converted, fresh / EMBEDDED_NAME)
    port = free_port()
    env = {**os.environ, "SPECSCOPE_CACHE": str(fresh), "GRADIO_SERVER_PORT": str(port), "PYTHONPATH": str(ROOT)}
    env.pop("SPECSCOPE_PRECISION", None)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.perf_counter() - t0 > 300:
                    print("error: the app did not start")
                    return 1
                time.sleep(0.2)
        page_s = time.perf_counter() - t0
        time.sleep(a.wait_s)
        client = Client(url, verbose=False)
        t1 = time.perf_counter()
        job = client.submit("Hi", "fixed:2", 16, 0.0, 0, api_name="/generate")
        first = None
        for _ in job:
            first = first or time.perf_counter() - t1
        done = time.perf_counter() - t1
        final = job.outputs()[-1]
        measuring = (fresh / "machine-costs" / "measure.log").exists()
        print(f"page after {page_s:.1f} s; first /generate: first token after {first:.1f} s, done after {done:.1f} s")
        print(f"precision {final.get('precision')}; background cost measurement started: {measuring}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(fresh, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
