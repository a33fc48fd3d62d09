"""The live tab's computations below the app: request parsing, live frames, honest speed, divergences.

Scripted events for the speed arithmetic; the tiny random-weight pair (tests/conftest_app.py) for runs.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
from conftest_app import MIXED, tiny_loader, tiny_pair
from scripted import scripted_round

from spec_core.core import lane_speed as speed
from spec_core.core.cost_model import profile_from_events
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig, Stats
from spec_core.engine.loop import Generation
from spec_core.serve import live, requests

PROMPT = "Why is the sky blue?"
PAIRS = ["embedded"]


def request(methods=("heuristic", "fixed:4", "ar"), n=24, temperature=MIXED["temperature"], precision="bfloat16"):
    return requests.parse_live_request(
        PROMPT, list(methods), temperature, 1.0, MIXED["seed"], n, "embedded", precision, PAIRS
    )


@pytest.fixture(scope="module")
def frames():
    return list(live.live_frames(tiny_loader, request(), every_s=0.0, settle_s=0.0))


# -- requests -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: requests.parse_live_method("nonsense"), "unknown method part"),
        (lambda: requests.parse_live_method("hf-ar"), "bench-only"),
        (lambda: requests.parse_live_method(""), "empty"),
        (lambda: requests.parse_int(0, "max_new_tokens", 1, 10), r"in \[1, 10\]"),
        (lambda: requests.parse_int(2.5, "max_new_tokens", 1, 10), "integer"),
        (lambda: requests.parse_sampling(-1.0, 1.0, 0), "temperature"),
        (lambda: requests.parse_sampling(0.0, 0.0, 0), "top_p"),
        (lambda: requests.parse_sampling(0.0, 1.0, -3), "seed"),
        (lambda: requests.parse_prompt("   "), "prompt is empty"),
        (lambda: requests.parse_lanes([requests.NONE_METHOD, "", requests.NONE_METHOD]), "at least one"),
        (lambda: requests.parse_choice("someone/else", "model pair", PAIRS), "not offered"),
        (lambda: request(precision="float16"), "precision"),
    ],
)
def test_bad_requests_raise_specscope_errors(call, message):
    with pytest.raises(SpecScopeError, match=message):
        call()


def test_lanes_dedupe_and_a_bad_name_is_its_lanes_error_only():
    lanes = requests.parse_lanes(["fixed:4", "fixed:4", "warp:9", requests.NONE_METHOD, "hf-ar"])
    assert [lane.method for lane in lanes] == ["fixed:4", "warp:9", "hf-ar"]
    assert lanes[0].spec is not None and lanes[0].spec.name == "fixed:4" and not lanes[0].error
    assert lanes[1].spec is None and "unknown method part" in lanes[1].error
    assert lanes[2].spec is None and "bench-only" in lanes[2].error


# -- live frames ----------------------------------------------------------------------------------------------


def test_live_frames_interleave_every_method(frames):
    last = frames[-1]
    assert last.done and "Done" in last.status and not last.errors
    for method, events in last.lanes.items():
        assert sum(len(e.emitted) for e in events) == 24, method
        assert all(e.method == method for e in events)
    assert len(last.lanes["ar"]) == 24  # one target pass per token
    assert len(last.lanes["fixed:4"]) < 24  # speculative rounds emit more than one token on average
    assert frames[0].status.startswith("Loading") and not frames[0].done
    assert not last.divergences  # temperature 1: lanes are different samples, no divergence is claimed


def test_frames_come_at_a_steady_rate_not_once_per_round(monkeypatch):
    """With a long update period, a run yields loading, generating and done only (it used to yield every round
    once a frame took longer to draw than the period)."""
    monkeypatch.setattr(live, "PAGE_SHARE", 1.0)  # the page may take all the time: a busy machine cannot stretch 0
    few = list(live.live_frames(tiny_loader, request(n=12), every_s=1e9, settle_s=0.0))
    assert len(few) == 3 and few[-1].done
    rounds = sum(len(ev) for ev in few[-1].lanes.values())
    every = list(live.live_frames(tiny_loader, request(n=12), every_s=0.0, settle_s=0.0))
    assert len(every) == rounds + 3  # period 0: a frame after every round


def test_page_work_stays_off_every_lanes_clock():
    """Time spent by the consumer between frames (drawing the page) and the settle pause count on no lane."""
    t0 = time.perf_counter()
    n_frames = 0
    for frame in live.live_frames(tiny_loader, request(n=12), every_s=0.0, settle_s=0.02):
        time.sleep(0.03)  # a slow page update
        n_frames, last = n_frames + 1, frame
    wall = time.perf_counter() - t0
    busy = sum(last.stats(m).busy_s for m in last.methods)
    assert busy <= wall - n_frames * 0.03 - (n_frames - 3) * 0.02 + 1e-3


def test_a_bad_method_fails_its_own_lane_only():
    last = list(live.live_frames(tiny_loader, request(("warp:9", "fixed:2", "ar"), n=8), 0.0, 0.0))[-1]
    assert set(last.errors) == {"warp:9"} and "unknown method part" in last.errors["warp:9"]
    assert last.stats("fixed:2").new_tokens == 8 and last.stats("ar").new_tokens == 8
    assert "warp:9" not in last.speeds and "ar" in last.speeds


def test_a_method_with_missing_assets_gets_a_message_not_a_crash():
    last = list(live.live_frames(tiny_loader, request(("block:dpace", "fixed:2"), n=8), 0.0, 0.0))[-1]
    assert "block:dpace" in last.errors and "cannot run" in last.errors["block:dpace"]
    assert last.stats("fixed:2").new_tokens == 8


def test_stopped_status_says_what_was_made(frames):
    assert live.stopped(None) == "Stopped."
    cut = dataclasses.replace(frames[len(frames) // 2], done=False)
    text = live.stopped(cut)
    assert text.startswith("Stopped.") and "heuristic" in text and "Generating" not in text
    assert live.stopped(frames[-1]) == frames[-1].status  # Stop after the end changes nothing


def test_stats_stream_ends_with_the_api_fields():
    req = requests.parse_generate_request(PROMPT, "fixed:4", 12, 1.0, 1)
    outs = list(live.stats_stream(tiny_pair(), req))
    assert len(outs) >= 2 and outs[0]["round"] == 0 and not any(o["finished"] for o in outs[:-1])
    every = list(live.stats_stream(tiny_pair(), req, every_s=0.0))
    assert [o["round"] for o in every[:-1]] == list(range(len(every) - 1))  # period 0: every round but the last
    assert every[-1]["text"] == outs[-1]["text"] and every[-1]["new_tokens"] == 12
    last = outs[-1]
    assert {"new_tokens", "tau", "tokens_per_s", "text", "acceptance_rate", "wall_s", "busy_s"} <= set(last)
    assert last["new_tokens"] == 12 and last["finished"] and last["tau"] >= 1.0 and last["text"]
    assert last["wall_s"] >= last["busy_s"] > 0


# -- honest speed ---------------------------------------------------------------------------------------------


def rnd(index, drafted, accepted, target_s, engine_s=0.001, draft_step=0.002, method="fixed:2"):
    """A scripted round whose timings are known: draft_s + verify_s = drafting + target forward + engine work."""
    return scripted_round(
        index,
        method,
        drafted,
        accepted,
        draft_s=drafted * draft_step + engine_s / 2,
        verify_s=target_s + engine_s / 2,
        target_s=target_s,
        engine_s=engine_s,
    )


AR_LANE = [rnd(i, 0, 0, 0.040, method="ar") for i in range(40)]
SPEC_LANE = [rnd(i, 2, 1, 0.044) for i in range(20)]  # 2 tokens a round, τ = 2


def test_run_costs_are_medians_per_width_after_the_first_round():
    costs = profile_from_events({"ar": AR_LANE, "fixed:2": SPEC_LANE})
    assert dict(zip(costs.widths, costs.target_ms)) == {1: pytest.approx(40.0), 3: pytest.approx(44.0)}
    assert costs.draft_ms == pytest.approx(2.0) and costs.step_ms == pytest.approx(41.0)


def test_predicted_speedup_is_the_cost_model_at_the_lanes_tau():
    costs = profile_from_events({"ar": AR_LANE, "fixed:2": SPEC_LANE})
    expected = 2.0 * 0.041 / (0.044 + 2 * 0.002 + 0.001)  # τ · ar round / (verify over 3 + 2 steps + engine)
    assert costs.events_speedup(SPEC_LANE) == pytest.approx(expected)
    measured = speed.lane_speed("fixed:2", {"ar": AR_LANE, "fixed:2": SPEC_LANE})
    assert measured.measured == pytest.approx((40 / (20 * 0.049)) / (40 / (40 * 0.041)))  # tokens/s over ar's
    assert measured.predicted == pytest.approx(expected)
    assert math.isclose(measured.measured, measured.predicted, rel_tol=1e-9)  # a clean run: the two agree


def test_a_slowed_round_moves_the_measurement_not_the_prediction():
    slowed = [*SPEC_LANE[:-1], dataclasses.replace(SPEC_LANE[-1], verify_s=1.0)]
    lanes = {"ar": AR_LANE, "fixed:2": slowed}
    s = speed.lane_speed("fixed:2", lanes)
    assert s.measured < 0.6 * s.predicted and s.predicted == pytest.approx(
        speed.lane_speed("fixed:2", {"ar": AR_LANE, "fixed:2": SPEC_LANE}).predicted
    )


def test_short_runs_are_not_timed():
    short = {"ar": AR_LANE[:5], "fixed:2": SPEC_LANE[:3]}
    for m in short:
        s = speed.lane_speed(m, short)
        assert s.tokens_per_s is None and s.measured is None and s.note == speed.TOO_FEW
    alone = speed.lane_speed("fixed:2", {"fixed:2": SPEC_LANE})
    assert alone.tokens_per_s and alone.measured is None and "ar" in alone.note
    base = speed.lane_speed("fixed:2", {"ar": AR_LANE[:5], "fixed:2": SPEC_LANE})
    assert base.measured is None and speed.TOO_FEW in base.note


# -- the same text, explained ---------------------------------------------------------------------------------


def test_verify_width_of_a_token():
    lane = [rnd(0, 2, 2, 0.04), rnd(1, 4, 1, 0.04), rnd(2, 3, 0, 0.04)]  # emits 3, 2, 1 tokens
    assert [live.verify_width(lane, i) for i in range(6)] == [2, 2, 2, 5, 5, 4]


def test_explain_divergence_reads_the_targets_two_best_tokens():
    pair = tiny_pair()
    greedy = SamplingConfig()
    ar = Generation(pair, PROMPT, "ar", 6, greedy)
    lane = Generation(pair, PROMPT, "fixed:2", 6, greedy)
    for run in (ar, lane):
        for _ in run.rounds():
            pass
    assert lane.new_tokens == ar.new_tokens  # float32: lossless means the same tokens
    lane.new_tokens[3] = (ar.new_tokens[3] + 1) % 1000  # pretend a near-tie flipped at token 4
    d = live.explain_divergence(pair, ar, lane, 3, "bfloat16")
    assert d.position == 3 and d.method == "fixed:2" and d.ar_piece == pair.pieces([ar.new_tokens[3]])[0]
    (best, p1), (_, p2) = d.best
    assert best == d.ar_piece and 1 >= p1 >= p2 >= 0 and d.logit_gap >= 0
    assert "new token 4" in d.note() and "two best tokens" in d.note()
    earlier = live.explain_divergence(pair, ar, lane, 1, "bfloat16")  # ar's cache is cropped further back
    assert earlier.best[0][0] == pair.pieces([ar.new_tokens[1]])[0] and earlier.verify_width >= 1


def test_divergences_only_for_lossless_lanes_at_temperature_zero():
    greedy = request(("fixed:2", "fixed:2+lenient:0.5", "ar"), temperature=0.0)
    assert live.lossless_at_zero(greedy, "fixed:2") and not live.lossless_at_zero(greedy, "fixed:2+lenient:0.5")
    assert not live.lossless_at_zero(greedy, "ar") and not live.lossless_at_zero(request(), "fixed:4")
    last = list(live.live_frames(tiny_loader, request(("fixed:2", "ar"), n=8, temperature=0.0), 0.0, 0.0))[-1]
    assert last.lanes["fixed:2"] and not last.divergences  # float32 tiny pair: identical text, nothing to mark


def test_frame_stats_are_the_one_stats_type(frames):
    s = frames[-1].stats("fixed:4")
    assert isinstance(s, Stats) and s.method == "fixed:4" and s.new_tokens == 24 and s.finished


def test_a_stop_request_ends_the_run_with_what_was_made():
    request = requests.parse_live_request(
        "Say hello.", ["fixed:2", "ar", requests.NONE_METHOD], 0.0, 1.0, 0, 400, "embedded", "bfloat16", ["embedded"]
    )
    stop = live.StopRequest()
    seen = []
    for frame in live.live_frames(tiny_loader, request, every_s=0.0, settle_s=0.0, should_stop=stop.asked):
        seen.append(frame)
        if any(frame.lanes.values()):  # the first frame with rounds: Stop
            stop.requested = True
    last = seen[-1]
    assert last.done and last.status.startswith("Stopped. New tokens so far:")
    assert 0 < sum(len(e.emitted) for e in last.lanes["fixed:2"]) < 400  # cut, not run to the end


def test_a_replay_marks_where_a_lane_parts_from_ar_without_asking_the_target():
    """The Analyzer's replay has no target to explain a divergence; its lanes still get the ◆ where the texts first
    differ (the lane's note says "see the ◆ mark"), and ar's lane gets one per lane that parts from it."""
    import dataclasses

    from test_visuals import ev

    from spec_core.serve.live import LiveFrame

    ar = [dataclasses.replace(ev(i, [], 0, method="ar"), emitted=(10 + i,)) for i in range(4)]
    same = [dataclasses.replace(ev(0, ["a"], 1, method="fixed:2"), emitted=(10, 11)), *ar[2:]]
    other = [dataclasses.replace(ev(0, ["a"], 1, method="fixed:4"), emitted=(10, 99)), *ar[2:]]
    frame = LiveFrame(("fixed:2", "fixed:4", "ar"), {"fixed:2": same, "fixed:4": other, "ar": ar}, done=True)
    assert frame.marks("fixed:2") == {}  # the same text: nothing to mark
    assert list(frame.marks("fixed:4")) == [1] and "new token 2" in frame.marks("fixed:4")[1]
    assert list(frame.marks("ar")) == [1] and "fixed:4 parts from ar" in frame.marks("ar")[1]


def test_the_status_names_the_cost_table_that_priced_the_run(frames):
    """The run's status says which table priced it (here the one the suite pins), and every lane's first round
    records that table's profile: a request never times the machine (spec_core/core/cost_tables.py)."""
    from spec_core.core import cost_tables

    table = cost_tables.table_for("cpu")
    generating = next(f.status for f in frames if f.status.startswith("Generating on"))
    assert f"costs {table.label}" in generating and "minute" not in generating
    last = frames[-1]
    for m in last.methods:
        assert last.lanes[m][0].costs is not None


def test_the_app_preloads_and_measures_once_in_the_background(monkeypatch):
    """Start-up: the default pair warmed and, on a CPU with no table of its own, one niced measurement started,
    off every request's path; a second start does nothing; SPECSCOPE_MEASURE_COSTS=0 measures nothing."""
    import threading
    import types

    measured, warmed = [], []

    class Child:
        def wait(self):
            return 0

    def fake_measure(threads):
        measured.append(threads)
        return Child()

    monkeypatch.setattr(
        live,
        "warm_pair",
        lambda name, precision: (
            warmed.append((name, precision)) or types.SimpleNamespace(device=types.SimpleNamespace(type="cpu"))
        ),
    )
    monkeypatch.setattr(live, "warm_views", lambda: None)
    monkeypatch.setattr(live, "machine_table", lambda: None)
    monkeypatch.setattr(live, "measure_in_background", fake_measure)
    for setting, want in (("1", [2]), ("0", [])):
        measured.clear()
        monkeypatch.setattr(live, "_BACKGROUND", [])
        monkeypatch.setenv(live.MEASURE_ENV, setting)
        live.start_background(threads=2)
        live.start_background(threads=2)  # once per process
        assert len(live._BACKGROUND) == 1
        live._BACKGROUND[0].join(timeout=30)
        assert measured == want and warmed[-1] == ("embedded", "auto")
    assert all(t.name != "specscope-preload" or not t.is_alive() for t in threading.enumerate())
