"""Where a live-tab Generate spends its time on the server: models, lane HTML, figures, pauses for the page.

Runs the default Generate (the tab's prompt, methods and settings) the way the app does — frames from
``spec_core.serve.live.live_frames``, lanes from ``visuals.live_page``, figures from the view registry once at the
end — and, beside it, the same three methods alone, one after the other. Prints one line per repeat:

    solo total, live total, models (Σ the lanes' own rounds), HTML, figures, pauses, speedups (solo vs live)

Browser and transport time are not here (no browser): ``tests/browser/test_browser.py`` measures click → Done.

    PYTHONPATH=. .venv/bin/python scripts/live_timing.py --repeats 2
    PYTHONPATH=. .venv/bin/python scripts/live_timing.py --repeats 3 --before hybrid,fixed:2,ar   # before/after
"""

from __future__ import annotations

import argparse
import os
import time

import app
from spec_core.core.types import Stats
from spec_core.serve import live, requests
from ui.live import N_LANES
from ui.live_baseline import with_baseline
from visuals import live_page, views


def solo(pair, prompt: str, methods, n: int) -> tuple[float, dict[str, Stats]]:
    """The methods alone, one after the other, through the /generate stream: (wall seconds, final stats)."""
    t0 = time.perf_counter()
    stats = {}
    for m in methods:
        last = list(live.stats_stream(pair, requests.parse_generate_request(prompt, m, n, 0.0, 0)))[-1]
        stats[m] = Stats(**{k: v for k, v in last.items() if k in Stats.__dataclass_fields__})
    return time.perf_counter() - t0, stats


def live_run(request) -> dict[str, float]:
    """The live handler's server work, timed by part (the replayed fixed-window baseline included, as the tab
    computes it after Done when no fixed-window lane ran: ui/live_baseline.py)."""
    t0 = time.perf_counter()
    html_s = figures_s = baseline_s = 0.0
    frames = 0
    for frame in live.live_frames(app.get_pair, request):
        t = time.perf_counter()
        live_page.lanes_parts(frame, N_LANES)
        html_s += time.perf_counter() - t
        if frame.done:
            t = time.perf_counter()
            frame = with_baseline(frame, app.get_pair, request)
            baseline_s = time.perf_counter() - t
            t = time.perf_counter()
            for v in views.views_for(list(frame.lanes)):
                views.build(v, frame.lanes, frame.baseline)
            figures_s += time.perf_counter() - t
        frames += 1
    speeds = {m: s.measured for m, s in frame.speeds.items()}
    predicted = {m: s.predicted for m, s in frame.speeds.items()}
    models = sum(frame.stats(m).busy_s for m in frame.methods)
    return {
        "total": time.perf_counter() - t0,
        "models": models,
        "html": html_s,
        "figures": figures_s,
        "baseline": baseline_s,
        "frames": frames,
        "pauses": (frames - 3) * live.SETTLE_S,
        "speeds": speeds,
        "predicted": predicted,
        "divergences": {m: d.position for m, d in frame.divergences.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument(
        "--before",
        default="",
        help="another trio (e.g. hybrid,fixed:2,ar, the former default): each repeat runs it, then the tab's "
        "default, on the same warm pair, and prints the ratio of their Generate times (no solo runs)",
    )
    args = parser.parse_args()
    prompt, methods = app.EXAMPLES[0][0], list(app.DEFAULT_METHODS)
    pair = app.get_pair()
    request = requests.parse_live_request(
        prompt, methods, 0.0, 1.0, 0, args.max_new_tokens, "embedded", "bfloat16", ["embedded"]
    )
    if args.before:
        before = requests.parse_live_request(
            prompt, args.before.split(","), 0.0, 1.0, 0, args.max_new_tokens, "embedded", "bfloat16", ["embedded"]
        )
        for r in range(args.repeats):
            old, new = live_run(before), live_run(request)
            print(
                f"repeat {r}: {args.before} {old['total']:.2f} s (models {old['models']:.2f}, figures "
                f"{old['figures']:.2f}, baseline {old['baseline']:.2f}) · {','.join(methods)} {new['total']:.2f} s "
                f"(models {new['models']:.2f}, figures {new['figures']:.2f}, baseline {new['baseline']:.2f}) · "
                f"ratio {new['total'] / old['total']:.2f} · load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        return
    for r in range(args.repeats):
        solo_s, stats = solo(pair, prompt, methods, args.max_new_tokens)
        ratios = {m: round(stats[m].tokens_per_s / stats["ar"].tokens_per_s, 3) for m in methods}
        got = live_run(request)
        print(
            f"repeat {r}: solo {solo_s:.2f} s · live {got['total']:.2f} s ({got['total'] / solo_s:.2f}× solo): "
            f"models {got['models']:.2f} s, HTML {got['html']:.3f} s, figures {got['figures']:.3f} s, "
            f"pauses {got['pauses']:.2f} s, {got['frames']} frames"
        )
        print(
            f"   speedup vs ar solo {ratios} · live measured "
            f"{ {m: round(v, 3) for m, v in got['speeds'].items() if v} } · live predicted "
            f"{ {m: round(v, 3) for m, v in got['predicted'].items() if v} } · divergences {got['divergences']}"
        )
        print(f"   solo tokens { ({m: s.new_tokens for m, s in stats.items()}) }", flush=True)


if __name__ == "__main__":
    main()
