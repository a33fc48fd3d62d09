"""The live tab's run: several methods decode one prompt, interleaved round by round, shown at a steady rate.

1. load — the pair (at the chosen precision) comes from the caller's loader; each lane builds its
   :class:`~spec_core.engine.loop.Generation` from its parsed :class:`~spec_core.engine.methods.MethodSpec`; a lane that
   cannot run (bad name, missing assets) keeps its error and the others run.
2. decode — :func:`~spec_core.engine.session.interleave` runs one round per lane in turn on this thread.
3. show — a :class:`LiveFrame` is yielded every :data:`UPDATE_EVERY_S` seconds of decoding (wall clock, not
   counting the time the page takes to draw a frame; no longer once per round, which made ``ar``, the lane
   with most rounds, pay most for the page), then the models pause :data:`SETTLE_S` so the browser renders
   while no lane's clock runs. A page that takes long to draw a frame (a busy machine) gets frames less often,
   so that updates never take more than :data:`PAGE_SHARE` of the run.
4. explain — at temperature 0 a lossless lane writes ``ar``'s text: on a CPU the target's passes are
   batch-invariant (:mod:`spec_core.model.invariance`). Where passes are not (a GPU, or ``SPECSCOPE_BATCH_INVARIANT=0``)
   a k-token verification pass can round a near-tie differently from a 1-token step; where a lossless lane then
   parts from ``ar``, :func:`explain_divergence` reads the target's two best tokens at that position.

No gradio, no plotly here (docs/STYLE.md §6): the app turns frames into components.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import torch

from spec_core.core.assets import cache_dir
from spec_core.core.cost_model import CostProfile
from spec_core.core.cost_tables import machine_table, run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import LaneSpeed, draft_ratio, lane_speeds, run_verdict, text_distance
from spec_core.core.types import RoundEvent, SamplingConfig, Stats
from spec_core.engine.loop import Generation
from spec_core.engine.methods import is_lossy
from spec_core.engine.session import first_divergence, interleave
from spec_core.model.models import load_pair
from spec_core.model.pass_timing import probe_profile
from spec_core.policies.pacer_heads import shipped_replays
from spec_core.policies.pacer_rule import PacerParams
from spec_core.serve.requests import GenerateRequest, LiveRequest

if TYPE_CHECKING:
    from spec_core.engine.replay import PolicyReplay
    from spec_core.model.models import ModelPair

UPDATE_EVERY_S = 1.0  # seconds of decoding between two page updates (the page's own work not counted)
PAGE_SHARE = 0.1  # at most this share of a run goes to page updates: a slow page (a busy machine) updates less often
SETTLE_S = 0.05  # pause after a page update, on no lane's clock, while the browser renders it
STREAM_EVERY_S = 0.5  # seconds between two streamed /generate updates (the first round is always sent)
LANE_ERRORS = (SpecScopeError, ImportError, FileNotFoundError)  # a lane that cannot run: a message, not a crash

PairLoader = Callable[[str, str], Any]  # (pair name, precision) → spec_core.model.models.ModelPair


@dataclass(frozen=True)
class Divergence:
    """Where a lossless lane first parts from ``ar``, and the target's view of that position."""

    method: str
    position: int  # index among the new tokens (0 = the first generated token)
    lane_piece: str  # the lane's token there
    ar_piece: str  # ar's token there
    best: tuple[tuple[str, float], ...]  # the target's two best tokens after the common prefix, with p
    logit_gap: float  # logit of the best minus logit of the second
    verify_width: int  # tokens in the lane's verification pass that chose its token
    precision: str

    def note(self) -> str:
        """The hover text of the marked token, in both lanes."""
        (a, pa), (b, pb) = self.best
        why = (
            f"{self.method} chose its token inside a {self.verify_width}-token verification pass, ar in a "
            f"1-token step; in {self.precision}, where the passes are not batch-invariant (a GPU, or the switch "
            "off), the two round differently, enough to flip a near-tie."
        )
        if self.precision == "float32":
            why = "In float32 both passes should agree: a gap this small sits at float32's own rounding."
        return (
            f"First divergence from ar, new token {self.position + 1}: {self.method} wrote {self.lane_piece!r}, "
            f"ar wrote {self.ar_piece!r}.\nIn ar's 1-token step the target's two best tokens here: {a!r} p={pa:.3f} "
            f"and {b!r} p={pb:.3f} (logit gap {self.logit_gap:.3f}).\n{why}"
        )


@dataclass(frozen=True)
class LiveFrame:
    """What the live tab shows at one moment (events are frozen; a frame is never changed once yielded)."""

    methods: tuple[str, ...]
    lanes: Mapping[str, tuple[RoundEvent, ...]]
    errors: Mapping[str, str] = field(default_factory=dict)  # method → why it could not run
    status: str = ""
    done: bool = False
    temperature: float = 0.0
    precision: str = "bfloat16"  # as requested ("auto" included): a run at the same setting reuses this one
    arithmetic: str = ""  # what the pair ran ("auto" resolved): the precision the notes and the verdicts name
    divergences: Mapping[str, Divergence] = field(default_factory=dict)  # lossless lane → its first divergence
    baseline: PolicyReplay | None = None  # a fixed window replayed on this run's greedy text, set by the app when no
    #   fixed-window lane ran (ui/live_baseline.py): the seeds' views draw it beside their method

    def stats(self, method: str) -> Stats:
        return Stats.from_events(self.lanes.get(method, ()), method=method)

    @cached_property
    def speeds(self) -> dict[str, LaneSpeed]:
        """Every lane's honest speed (measured with its spread, predicted, a verdict) from this frame's events."""
        methods = [m for m in self.methods if m not in self.errors]
        if not self.done:  # a run still going: no verdict shows yet, so none is worked out
            return lane_speeds(self.lanes, methods, full=False)
        return lane_speeds(self.lanes, methods, {m: self.text_note(m) for m in methods})

    def text_note(self, method: str) -> str:
        """How this lane's text compares with ar's: "same text as ar ✓", a near-tie, or how far a lossy lane is."""
        if method == "ar" or "ar" not in self.lanes or not self.lanes.get(method):
            return ""
        tokens = [t for e in self.lanes[method] for t in e.emitted]
        ar = [t for e in self.lanes["ar"] for t in e.emitted]
        return text_distance(tokens, ar, lossy=is_lossy(method), greedy=self.temperature == 0)

    def marks(self, method: str) -> dict[int, str]:
        """Index among ``method``'s emitted tokens → hover note of a divergence to mark there: the explained one
        (:func:`divergences`, live), else where the texts first differ (a replay, which has no target to ask).

        Only at temperature 0, where a lossless lane should write ar's text: a sampled lane parts from ar's sample
        by chance, which is no divergence to explain."""
        if self.temperature != 0:
            return {}
        if method == "ar":
            found = {d.position: d.note() for d in self.divergences.values()}
            for other in self.lanes:
                at = self._first_difference(other) if other != "ar" and other not in self.divergences else None
                if at is not None:
                    found.setdefault(at, f"{other} parts from ar at new token {at + 1}.")
            return found
        d = self.divergences.get(method)
        if d:
            return {d.position: d.note()}
        at = self._first_difference(method)
        if at is None:
            return {}
        if _lossy(method):
            why = f"{method}'s verifier is lossy: it may keep a draft the target would not have chosen."
        else:
            why = "(a replay: the target is not asked why)."
        return {at: f"Parts from ar here, at new token {at + 1} {why}"}

    def _first_difference(self, method: str) -> int | None:
        """Where ``method``'s emitted tokens and ar's first differ, both present (None: the same so far, or no ar
        lane). When one text is a prefix of the other (a lane still running, or cut by Stop), nothing has parted."""
        if method == "ar" or "ar" not in self.lanes or not self.lanes.get(method):
            return None
        mine = [t for e in self.lanes[method] for t in e.emitted]
        ar = [t for e in self.lanes["ar"] for t in e.emitted]
        at = first_divergence(mine, ar)
        return at if 0 <= at < min(len(mine), len(ar)) else None


def _lossy(method: str) -> bool:
    """Whether a lane's verifier may change the target's text (False for a name that does not parse)."""
    try:
        return is_lossy(method)
    except SpecScopeError:
        return False


@dataclass
class _Run:
    """The mutable side of a live run; :meth:`frame` takes frozen snapshots of it."""

    request: LiveRequest
    lanes: dict[str, list[RoundEvent]]
    errors: dict[str, str]
    status: str = ""
    divergences: dict[str, Divergence] = field(default_factory=dict)
    precision: str = ""  # the arithmetic the pair runs ("auto" resolved), once loaded

    def frame(self, done: bool = False) -> LiveFrame:
        return LiveFrame(
            methods=self.request.methods,
            lanes={m: tuple(ev) for m, ev in self.lanes.items()},
            errors=dict(self.errors),
            status=self.status,
            done=done,
            temperature=self.request.sampling.temperature,
            precision=self.request.precision,
            arithmetic=self.precision or self.request.precision,
            divergences=dict(self.divergences),
        )


_LOADING = threading.Lock()  # one load at a time: the app's start-up preload and a first click share it


def warm_pair(name: str = "embedded", precision: str = "bfloat16"):
    """Load a pair (CUDA when present, else CPU) and warm it up once, so the first timed rounds are honest. Nothing
    is timed: ``auto`` reads the cost table in force (spec_core/core/cost_tables.py)."""
    with _LOADING:
        return _warm_pair(name, precision)


@functools.lru_cache(maxsize=2)
def _warm_pair(name: str, precision: str):
    try:
        pair = load_pair(name, dtype=precision)
    except SpecScopeError as err:
        raise SpecScopeError(f"cannot load the model pair {name!r}: {err}") from err
    Generation(pair, "Hello", "fixed:2", max_new_tokens=4, sampling=SamplingConfig()).run()
    return pair


MEASURE_ENV = "SPECSCOPE_MEASURE_COSTS"  # "0": the app never starts its background measurement (tests, a Space)
_BACKGROUND: list[threading.Thread] = []  # the app's start-up task, started once per process


def start_background(pair_name: str = "embedded", precision: str = "auto", threads: int | None = None) -> None:
    """After the app has started: load and warm the default pair (so the first Generate finds it ready) and PACER's
    price-free replays, then, on a CPU with no cost table of its own, measure this machine's table once in a niced subprocess
    (``python -m spec_core costs --machine``). Requests never wait for it; a run reads whichever table is in force
    when it starts and records it. Started at most once per process."""
    if _BACKGROUND:
        return

    def task() -> None:
        try:
            pair = warm_pair(pair_name, precision)
        except SpecScopeError:
            return  # the first Generate says why, with the same message
        warm_views()  # PACER's price-free replays, off every request's path
        if pair.device.type == "cpu" and machine_table() is None and os.environ.get(MEASURE_ENV, "1") != "0":
            # the thread waits on it: Linux's parent-death signal follows the thread that started the child
            measure_in_background(threads or torch.get_num_threads()).wait()

    thread = threading.Thread(target=task, name="specscope-preload", daemon=True)
    _BACKGROUND.append(thread)
    thread.start()


def measure_in_background(threads: int) -> subprocess.Popen:
    """``costs --machine`` at the lowest priority, its output in the cache's ``machine-costs/measure.log``."""
    log = cache_dir() / "machine-costs" / "measure.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "spec_core", "costs", "--machine", "--threads", str(threads)]
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_lowly_child)


def _lowly_child() -> None:
    """In the measuring child before it starts: the lowest priority, and (Linux) ended when the app ends."""
    os.nice(19)
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: no orphaned measurement after the app
    except (OSError, AttributeError):
        pass


def warm_views() -> None:
    """The price-free part of PACER's "which pre-verifier" view (each rule's replays of the shipped rounds at the
    default b, ρ and max: a few seconds on one core), computed once at load rather than during the first Live run."""

    p = PacerParams()
    shipped_replays("feature", p.block, p.rho, p.max_len)


def _guarded(method: str, rounds: Iterator[RoundEvent], errors: dict[str, str]) -> Iterator[RoundEvent]:
    """A lane's rounds; a method whose assets are missing (e.g. an untrained block drafter) ends with a note."""
    try:
        yield from rounds
    except LANE_ERRORS as err:
        errors[method] = f"{method} cannot run here: {err}"


def _generations(
    pair: ModelPair, request: LiveRequest, errors: dict[str, str], costs: CostProfile
) -> dict[str, Generation]:
    runs = {}
    for lane in request.lanes:
        if lane.spec is None:
            errors[lane.method] = lane.error
            continue
        try:
            runs[lane.method] = Generation(
                pair, request.prompt, lane.spec, request.max_new_tokens, request.sampling, costs=costs
            )
        except LANE_ERRORS as err:
            errors[lane.method] = f"{lane.method} cannot run here: {err}"
    return runs


class StopRequest:
    """The Live tab's Stop for one visitor: the run polls it between rounds and ends itself with a last frame.

    Cancelling the running Gradio event instead can leave Gradio's "Error" on the outputs, depending on where
    the handler was when the cancel arrived."""

    def __init__(self) -> None:
        self.requested = False  # (no __call__: Gradio would call a callable State value to get its first value)

    def asked(self) -> bool:
        return self.requested


def live_frames(
    pair_loader: PairLoader,
    request: LiveRequest,
    every_s: float = UPDATE_EVERY_S,
    settle_s: float = SETTLE_S,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[LiveFrame]:
    """Run the request's lanes interleaved; yield a frame every ``every_s`` seconds of decoding and a last one.

    ``should_stop`` (e.g. :meth:`StopRequest.asked`) is polled between rounds: the last frame then says what was made."""
    t_start = time.perf_counter()
    run = _Run(request, {m: [] for m in request.methods}, {})
    run.status = f"Loading the model pair {request.pair_name!r} ({request.precision}; first use loads and warms it up)…"
    yield run.frame()
    pair = pair_loader(request.pair_name, request.precision)
    run.precision = getattr(pair, "precision", "") or request.precision
    costs, table = run_costs(pair)  # read once for the whole request, never timed: every lane is priced alike
    generations = _generations(pair, request, run.errors, costs)
    pinned = os.environ.get("SPECSCOPE_PRECISION", "auto").strip() not in ("", "auto")
    chosen = " chosen by auto" if request.precision == "auto" and not pinned else ""
    where = f"{pair.name} ({pair.device.type} · {run.precision}{chosen}), {sampling_text(request.sampling)}"
    run.status = f"Generating on {where}; costs {table.label}…"
    yield run.frame()
    methods = list(generations)
    lanes = [_guarded(m, g.rounds(), run.errors) for m, g in generations.items()]
    resumed, period, page_s, updates = time.perf_counter(), every_s, 0.0, 0
    for i, event in interleave(lanes, should_stop):
        run.lanes[methods[i]].append(event)
        if time.perf_counter() - resumed >= period:
            done = sum(len(e.emitted) for e in run.lanes[methods[i]])
            run.status = f"Generating on {where}… ({methods[i]}: {done} tokens)"
            paused = time.perf_counter()
            yield run.frame()
            time.sleep(settle_s)
            resumed = time.perf_counter()
            page_s, updates = page_s + resumed - paused, updates + 1
            period = max(every_s, (resumed - paused) * (1 - PAGE_SHARE) / PAGE_SHARE)
    if should_stop is not None and should_stop():  # the texts are cut: no divergence to read, no timing to explain
        run.status = stopped(run.frame())
        yield run.frame(done=True)
        return
    t_explain = time.perf_counter()
    run.divergences = divergences(pair, generations, request)
    run.status = done_status(
        where, run, time.perf_counter() - t_start, page_s, updates, time.perf_counter() - t_explain
    )
    yield run.frame(done=True)


def sampling_text(sampling: SamplingConfig) -> str:
    """The run's sampling as the status line says it (the settings sit in a closed accordion)."""
    if sampling.greedy:
        return "greedy (temperature 0)"
    return f"temperature {sampling.temperature:g}, top-p {sampling.top_p:g}, seed {sampling.seed}"


def done_status(where: str, run: _Run, wall_s: float, page_s: float, updates: int, explain_s: float) -> str:
    """Where the run's time went: the lanes' own rounds, the page updates, the divergence reading, the rest."""
    model_s = sum(Stats.from_events(ev).busy_s for ev in run.lanes.values())
    rest = max(wall_s - model_s - page_s - explain_s, 0.0)
    return (
        f"Done on {where} in {wall_s:.1f} s: the lanes' own rounds {model_s:.1f} s, {updates} page updates "
        f"{page_s:.1f} s, reading divergences {explain_s:.1f} s, prefills and setup {rest:.1f} s."
        + "".join(f" ⚠ {e}" for e in run.errors.values())
    )


# -- the same text, explained ---------------------------------------------------------------------------------


def lossless_at_zero(request: LiveRequest, method: str) -> bool:
    """A lane that should write ``ar``'s text: lossless verification, greedy decoding."""
    spec = next((lane.spec for lane in request.lanes if lane.method == method), None)
    verifier = spec.verifier.family if spec is not None and spec.verifier is not None else ""
    return request.sampling.greedy and spec is not None and spec.kind == "speculative" and verifier == "lossless"


def divergences(pair: ModelPair, generations: Mapping[str, Generation], request: LiveRequest) -> dict[str, Divergence]:
    """Each lossless lane's first divergence from a finished ``ar`` lane (none when they agree)."""
    ar = generations.get("ar")
    if ar is None or not ar.events:
        return {}
    found = {}
    for method, run in generations.items():
        if method == "ar" or not run.events or not lossless_at_zero(request, method):
            continue
        at = first_divergence(run.new_tokens, ar.new_tokens)
        if 0 <= at < min(len(run.new_tokens), len(ar.new_tokens)):
            found[method] = at
    out: dict[str, Divergence] = {}
    for method in sorted(found, key=found.__getitem__, reverse=True):  # latest first: ar's cache is only ever cropped
        same = next((d for d in out.values() if d.position == found[method]), None)  # one pass per position
        out[method] = explain_divergence(
            pair, ar, generations[method], found[method], getattr(pair, "precision", "") or request.precision, same
        )
    return {m: out[m] for m in found}


def verify_width(events: Sequence[RoundEvent], position: int) -> int:
    """Tokens fed to the target in the pass that chose the ``position``-th new token of a lane."""
    seen = 0
    for e in events:
        if seen + len(e.emitted) > position:
            return e.draft_len + (1 if e.index else 0)  # round 0 feeds only its drafts (the prefill gave p_1)
        seen += len(e.emitted)
    return 1


@torch.inference_mode()
def explain_divergence(
    pair: ModelPair, ar: Generation, lane: Generation, position: int, precision: str, known: Divergence | None = None
) -> Divergence:
    """The target's two best tokens where ``lane`` parts from ``ar`` (``known``: another lane's divergence at the
    same position, whose reading is reused).

    The reading repeats ``ar``'s own step there: its KV cache (which holds the whole run) is cropped to the
    common prefix minus its last token, and that token is fed again, a 1-token pass exactly like ar's.
    """
    if known is not None:
        best, gap = known.best, known.logit_gap
    else:
        ids = [*ar.prompt_ids, *ar.new_tokens]
        at = len(ar.prompt_ids) + position  # index of the diverging token in ids
        assert ar.target_lm is not None  # ar's finished run keeps its cache
        ar.target_lm.crop(at - 1)
        logits = ar.target_lm.forward(torch.tensor([ids[at - 1]])).logits[-1]  # [V]
        top = torch.topk(logits, 2)
        probs = torch.softmax(logits, -1)[top.indices].tolist()
        best, gap = tuple(zip(pair.pieces(top.indices.tolist()), probs)), float(top.values[0] - top.values[1])
    return Divergence(
        method=lane.spec.name,
        position=position,
        lane_piece=pair.pieces([lane.new_tokens[position]])[0],
        ar_piece=pair.pieces([ar.new_tokens[position]])[0],
        best=best,
        logit_gap=gap,
        verify_width=verify_width(lane.events, position),
        precision=precision,
    )


def stopped(frame: LiveFrame | None) -> str:
    """The status after Stop: what had been generated when the run was cut."""
    if frame is None:
        return "Stopped."
    if frame.done:
        return frame.status
    made = ", ".join(f"{m} {frame.stats(m).new_tokens}" for m in frame.methods if m not in frame.errors)
    return f"Stopped. New tokens so far: {made or 'none'}."


def stats_stream(
    pair: ModelPair, request: GenerateRequest, every_s: float = STREAM_EVERY_S
) -> Iterator[dict[str, Any]]:
    """The ``/generate`` stream: a stats dict after the first round and then every ``every_s`` seconds; the last
    one is final and holds the whole text.

    Not one per round: each streamed dict costs the server (and a client in the same process) work that would
    run beside the next round and slow it, most for the methods with the most Python per round.
    Every dict has at least ``new_tokens, tau, tokens_per_s, text`` (the API's contract) and ``finished``.
    """
    run = Generation(
        pair, request.prompt, request.spec, request.max_new_tokens, request.sampling, costs=run_costs(pair)[0]
    )
    last = -math.inf
    try:
        for event in run.rounds():
            if time.perf_counter() - last < every_s or event.finished:
                continue
            text = pair.tokenizer.decode(run.new_tokens, skip_special_tokens=True)
            stats = Stats.from_events(run.events, method=request.spec.name)
            yield {**stats.as_dict(), "text": text, "round": event.index, "finished": False}
            last = time.perf_counter()
    except LANE_ERRORS as err:
        raise SpecScopeError(f"{request.spec.name} cannot run: {err}") from err
    result = run.result()
    final = Stats.from_events(run.events, wall_s=run.wall_s, method=request.spec.name)
    pending = [*run.prompt_ids, *run.new_tokens][-1]  # the one token the target cache does not hold yet
    probe = functools.partial(probe_profile, pair, run.events, run.target_lm, pending)  # a plain step, timed
    verdict = run_verdict(run.events, probe, draft_ratio(pair))
    yield {**final.as_dict(), **verdict.as_stats(), "precision": pair.precision, "text": result.text, "finished": True}
