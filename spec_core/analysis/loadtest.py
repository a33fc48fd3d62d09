"""Load and soak test of a running app: N concurrent ``gradio_client`` users against its ``/generate`` API.

``python -m spec_core loadtest --url http://127.0.0.1:7860/ --users 8 --requests 5``

1. plan — ``users × requests`` requests, each with its own seed; methods and temperatures cycle over the
   lists given (greedy and sampled, several methods), prompts over the prompt set;
2. warm up — one request per method first, so the server has loaded its pair and every part the methods use
   before anything is timed or its memory read;
3. alone — every planned request once, one at a time: the reference output of each;
4. load — N threads, one ``gradio_client.Client`` each, each sending its M requests back to back; latency is
   measured per request from submission to the final stats dict;
5. report — p50 / p95 / max latency, throughput, errors (grouped by message), whether every output equals the
   same request run alone, and the server's resident memory (RSS) after the warm-up and after the load.

**How the server's memory is read.** The server is the process that listens on the URL's port on this machine:
:func:`server_pid` asks ``psutil`` for the listening socket's owner (``psutil`` comes with ``accelerate``), or
falls back to Linux's ``/proc/net/tcp{,6}`` (the socket's inode) and ``/proc/*/fd`` (who holds it). A server on
another machine has no RSS to read: the report says so.

A soak test is the same command with one user and many requests: ``--users 1 --requests 200 --skip-alone``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx
import psutil

from spec_core.core.errors import SpecScopeError
from spec_core.core.jsonl import read_objects
from spec_core.engine.methods import split_methods

DEFAULT_PROMPTS = (
    "What is the capital of France? Answer in one word.",
    "Explain in two sentences why the sky is blue.",
    "List three fruits, one per line.",
    "Write a Python function that adds two numbers.",
    "Give one tip for learning a new language.",
)
LOCAL_HOSTS = {"127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]"}


@dataclass(frozen=True)
class PlannedRequest:
    """One ``/generate`` call: the API's five arguments and who sends it."""

    index: int  # position in the plan (0 .. users × requests − 1)
    user: int
    prompt: str
    method: str
    max_new_tokens: int
    temperature: float
    seed: int  # each request its own


@dataclass(frozen=True)
class Outcome:
    """What one request returned: its text, or the error; latency from submission to the final dict."""

    index: int
    latency_s: float
    text: str | None
    new_tokens: int | None
    error: str = ""


@dataclass(frozen=True)
class LoadReport:
    users: int
    requests: int
    latencies_s: tuple[float, ...]
    errors: tuple[str, ...]  # one message per failed request
    mismatched: tuple[int, ...]  # plan indices whose output differs from the same request alone
    compared: int  # requests checked against their alone run (0 with --skip-alone)
    wall_s: float
    rss_before: int | None  # bytes, after the warm-up
    rss_after: int | None  # bytes, after the load
    server_pid: int | None

    @property
    def p50_s(self) -> float:
        return percentile(self.latencies_s, 50)

    @property
    def p95_s(self) -> float:
        return percentile(self.latencies_s, 95)

    @property
    def rss_growth(self) -> float | None:
        if not self.rss_before or self.rss_after is None:
            return None
        return self.rss_after / self.rss_before - 1.0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.mismatched

    def summary(self) -> str:
        n = self.users * self.requests
        mb = lambda b: f"{b / 2**20:.0f} MiB" if b else "n/a"  # noqa: E731
        growth = f"{100 * self.rss_growth:+.2f}%" if self.rss_growth is not None else "n/a"
        lines = [
            f"{self.users} users × {self.requests} requests = {n} requests in {self.wall_s:.1f} s "
            f"({n / self.wall_s:.2f} req/s)"
            if self.wall_s > 0
            else f"{n} requests",
            f"latency: p50 {self.p50_s:.2f} s, p95 {self.p95_s:.2f} s, max {max(self.latencies_s, default=0):.2f} s",
            f"errors: {len(self.errors)}"
            + "".join(f"\n  {k}× {msg}" for msg, k in Counter(self.errors).most_common(5)),
            f"equal to the same request alone: {self.compared - len(self.mismatched)}/{self.compared}"
            if self.compared
            else "equal to the same request alone: not checked (--skip-alone)",
            f"server RSS (pid {self.server_pid or 'not found on this machine'}): before {mb(self.rss_before)}, "
            f"after {mb(self.rss_after)}, growth {growth}",
        ]
        return "\n".join(lines)


def percentile(values, q: float) -> float:
    """The ``q``-th percentile by linear interpolation between order statistics (numpy's default rule)."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def plan_requests(
    users: int,
    requests: int,
    methods: list[str],
    temperatures: list[float],
    prompts: list[str],
    max_new_tokens: int,
    seed: int = 0,
) -> list[PlannedRequest]:
    """``users × requests`` requests: methods cycle fastest, then temperatures; seeds ``seed, seed+1, …``."""
    if users < 1 or requests < 1:
        raise SpecScopeError("--users and --requests must be >= 1")
    if not methods or not temperatures or not prompts:
        raise SpecScopeError("need at least one method, one temperature and one prompt")
    plan = []
    for user in range(users):
        for r in range(requests):
            i = user * requests + r
            plan.append(
                PlannedRequest(
                    index=i,
                    user=user,
                    prompt=prompts[i % len(prompts)],
                    method=methods[i % len(methods)],
                    max_new_tokens=max_new_tokens,
                    temperature=temperatures[(i // len(methods)) % len(temperatures)],
                    seed=seed + i,
                )
            )
    return plan


# -- the server's memory ----------------------------------------------------------------------------------------


def url_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise SpecScopeError(f"not a URL: {url!r}")
    return parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)


def server_pid(url: str) -> int | None:
    """The pid listening on the URL's port on this machine (None for a remote or unknown server)."""
    host, port = url_port(url)
    if host not in LOCAL_HOSTS and host != os.uname().nodename:
        return None
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return conn.pid
    except (ImportError, OSError, RuntimeError):  # psutil missing, or not allowed to see other users' sockets
        pass
    return _proc_listener(port)


def _proc_listener(port: int) -> int | None:
    """Linux without psutil: the inode of the socket listening on ``port``, then the process holding it."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(cols[9])
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    return None


def rss_bytes(pid: int | None) -> int | None:
    """Resident memory of ``pid`` in bytes (psutil, else ``/proc/PID/status``)."""
    if pid is None:
        return None
    try:
        return psutil.Process(pid).memory_info().rss
    except ImportError:
        pass
    except Exception:  # the process ended
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# -- running the plan ---------------------------------------------------------------------------------------------


def _call(client, req: PlannedRequest, timeout_s: float, log=None) -> Outcome:
    t0 = time.perf_counter()
    try:
        job = client.submit(req.prompt, req.method, req.max_new_tokens, req.temperature, req.seed, api_name="/generate")
        out = job.result(timeout=timeout_s)
        outcome = Outcome(req.index, time.perf_counter() - t0, out["text"], out.get("new_tokens"))
    except Exception as err:  # any failure is a result here: counted and reported, the test goes on
        message = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        outcome = Outcome(req.index, time.perf_counter() - t0, None, None, message)
    if log is not None:
        log(
            f"request {req.index} ({req.method}, T={req.temperature}, user {req.user}): {outcome.latency_s:.1f} s"
            + (f", error: {outcome.error}" if outcome.error else f", {outcome.new_tokens} tokens")
        )
    return outcome


HTTP_TIMEOUT_S = 60.0  # connecting / sending; httpx's own default of 5 s counted a busy server's queue join as failed


def _client(url: str):
    from gradio_client import Client  # optional: only a load test against a running app

    try:  # no read timeout: the result stream is bounded by --timeout per request (job.result)
        return Client(url, verbose=False, httpx_kwargs={"timeout": httpx.Timeout(HTTP_TIMEOUT_S, read=None)})
    except Exception as err:  # connection refused, DNS, not a Gradio app: one clear line instead of a traceback
        raise SpecScopeError(
            f"cannot reach a SpecScope app at {url}: {str(err).strip()[:160] or type(err).__name__}"
        ) from err


def run_alone(url: str, plan: list[PlannedRequest], timeout_s: float, log=None) -> dict[int, Outcome]:
    """Every planned request once, one at a time, on one client."""
    client = _client(url)
    return {req.index: _call(client, req, timeout_s, log) for req in plan}


def run_concurrent(
    url: str, plan: list[PlannedRequest], users: int, timeout_s: float, log=None
) -> tuple[dict[int, Outcome], float]:
    """One thread and one client per user, all started together; returns (outcomes, wall seconds)."""
    clients = [_client(url) for _ in range(users)]  # connected before the clock starts
    outcomes: dict[int, Outcome] = {}
    lock = threading.Lock()
    start = threading.Barrier(users + 1)

    def user_loop(user: int) -> None:
        start.wait()
        for req in (r for r in plan if r.user == user):
            outcome = _call(clients[user], req, timeout_s, log)
            with lock:
                outcomes[req.index] = outcome

    threads = [threading.Thread(target=user_loop, args=(u,), daemon=True) for u in range(users)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return outcomes, time.perf_counter() - t0


def run_loadtest(
    url: str,
    plan: list[PlannedRequest],
    users: int,
    skip_alone: bool = False,
    timeout_s: float = 600.0,
    log=None,
) -> tuple[LoadReport, dict[int, Outcome]]:
    """Warm up, run the plan alone (unless skipped), run it concurrently, read the server's RSS around it.

    RSS "before" is read after the warm-up, so it holds the loaded pair: growth is what serving adds.
    """
    pid = server_pid(url)
    client = _client(url)
    for req in {r.method: r for r in reversed(plan)}.values():  # one per method: lazily loaded parts load now
        warm = _call(client, req, timeout_s)
        if warm.error:
            raise SpecScopeError(f"the warm-up request ({req.method}) failed: {warm.error}")
    rss_before = rss_bytes(pid)
    if log is not None:
        log(f"warmed up; server pid {pid}, RSS {rss_before} bytes")
    alone = {} if skip_alone else run_alone(url, plan, timeout_s, log)
    if log is not None and alone:
        log("alone pass done; now the users together")
    outcomes, wall = run_concurrent(url, plan, users, timeout_s, log)
    rss_after = rss_bytes(pid)
    compared = [i for i, o in outcomes.items() if i in alone and not o.error and not alone[i].error]
    report = LoadReport(
        users=users,
        requests=len(plan) // users,
        latencies_s=tuple(o.latency_s for o in outcomes.values() if not o.error),
        errors=tuple(o.error for o in outcomes.values() if o.error)
        + tuple(f"(alone) {o.error}" for o in alone.values() if o.error),
        mismatched=tuple(sorted(i for i in compared if outcomes[i].text != alone[i].text)),
        compared=len(compared),
        wall_s=wall,
        rss_before=rss_before,
        rss_after=rss_after,
        server_pid=pid,
    )
    return report, outcomes


# -- command line ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m spec_core loadtest",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--url", required=True, help="the running app, e.g. http://127.0.0.1:7860/")
    ap.add_argument("--users", type=int, default=8, help="concurrent users (one thread and client each)")
    ap.add_argument("--requests", type=int, default=5, help="requests per user, sent back to back")
    ap.add_argument("--methods", default="ar,fixed:4,heuristic", help="comma-separated; cycled over requests")
    ap.add_argument("--temperatures", default="0,0.8", help="comma-separated; greedy and sampled by default")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--prompts", default=None, help="JSON lines with a 'prompt' field (default: five built in)")
    ap.add_argument("--seed", type=int, default=0, help="request i gets seed SEED + i")
    ap.add_argument("--skip-alone", action="store_true", help="do not run each request alone first (soak tests)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    ap.add_argument("--out", default=None, help="write the plan, every outcome and the summary as JSON here")
    ap.add_argument("--quiet", action="store_true", help="no progress line per request (on stderr)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        temperatures = [float(t) for t in args.temperatures.split(",") if t.strip()]
    except ValueError as err:
        raise SpecScopeError(f"--temperatures: {err}") from err
    prompts = list(DEFAULT_PROMPTS)
    if args.prompts:
        prompts = [str(obj.get("prompt", "")) for _, obj in read_objects(args.prompts, "prompt file")]

    methods = split_methods(args.methods)  # a name's own settings may hold commas (pacer:b=2,t=0.5)
    plan = plan_requests(args.users, args.requests, methods, temperatures, prompts, args.max_new_tokens, args.seed)
    url_port(args.url)
    log = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    report, outcomes = run_loadtest(args.url, plan, args.users, args.skip_alone, args.timeout, log)
    print(report.summary())
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "url": args.url,
            "users": args.users,
            "requests": args.requests,
            "summary": report.summary(),
            "p50_s": report.p50_s,
            "p95_s": report.p95_s,
            "rss_before": report.rss_before,
            "rss_after": report.rss_after,
            "rss_growth": report.rss_growth,
            "mismatched": report.mismatched,
            "requests_run": [{**asdict(req), **asdict(outcomes[req.index])} for req in plan if req.index in outcomes],
        }
        out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")
    return 0 if report.ok else 1
