"""The one place where a method plugs in its own views: a registry keyed by method-name prefix.

The app has a fixed row of figure slots; it asks :func:`views_for` which views the methods on screen get and
fills the slots in order (hiding the rest). A method with its own internals — PACER's threshold in
``policy_trace``, DIVERSED's w_t in ``verifier_trace``, a block drafter — adds one module under ``visuals/``
that calls :func:`register_view` and one import line in :data:`PLUGIN_MODULES`; no UI code changes. The rule
in force (:func:`explain`) is the parts' own words (each registry class's ``rule``, :mod:`spec_core.core.words`).

A *prefix* is the family of one part the method name writes (:attr:`~spec_core.engine.methods.MethodSpec.heads`),
taken from the part's class (``PacerLength.prefix``): ``pacer`` matches ``pacer``, ``pacer:b=2`` and
``pacer+diversed``; ``block`` matches ``block:dpace``; the empty tuple matches every drafting method. A name that
does not parse (a lane showing its error) gets no view.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from spec_core.core import words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundEvent
from spec_core.drafters import DRAFTERS
from spec_core.engine.methods import is_fixed_window, is_plain, spec_of
from spec_core.engine.replay import PolicyReplay
from spec_core.policies import POLICIES
from spec_core.policies.confidence import ConfidenceLength
from spec_core.policies.fixed import HeuristicLength
from spec_core.verifiers import VERIFIERS
from spec_core.verifiers.lossless import LosslessVerifier
from visuals import captions, lens, plots

Lanes = Mapping[str, Sequence[RoundEvent]]


@dataclass(frozen=True)
class View:
    """One figure the app can show."""

    key: str  # unique id (also the element id of its slot content)
    title: str  # heading above the figure
    caption: str  # how to read it, in plain words (never a finding: the data's own sentence is ``describe``'s)
    build: Callable[[Lanes], go.Figure]  # lanes (method → events) → figure
    prefixes: tuple[str, ...] = ()  # method-part heads it serves; () = every drafting method
    with_baselines: bool = True  # also hand it the fixed-window lanes, to draw the baseline beside the method
    describe: Callable[[Lanes], str] | None = None  # lanes → what this run's data shows, with its counts
    whole_run: bool = False  # hand it every lane of the run (ar's too): it prices with the run's own costs and sets
    #   its figures beside the lanes' measured ones
    footnote: Callable[[Lanes], str] | None = None  # lanes → a last paragraph under the caption (e.g. whether its
    #   figures agree with the Live lanes' measured ones, and if not why)
    replayed: bool = False  # its build and describe also take ``replayed=``: a fixed window replayed on the run's
    #   text (visuals/baseline.py), drawn as the baseline when no fixed-window lane ran
    look_for: str = ""  # one sentence: what to look for in it (the caption's first, so never folded away)
    shows: Callable[[Lanes], bool] | None = None  # lanes (those it serves) → whether they give it anything to draw;
    #   None: always. A view whose internals only some drafts carry (the copy pointer's) stays out of a run without them


VIEWS: list[View] = []
PLUGIN_MODULES: tuple[str, ...] = (
    "visuals.pacer",
    "visuals.pacer_heads",
    "visuals.diversed",
    "visuals.tree",
    "visuals.lookup",
    "visuals.block",
    "visuals.copying",
)  # imported once by views_for


def register_view(view: View) -> View:
    """Add (or replace, by key) a view; returns it so modules can keep a handle."""
    for i, known in enumerate(VIEWS):
        if known.key == view.key:
            VIEWS[i] = view
            return view
    VIEWS.append(view)
    return view


def _shown_heads(method: str) -> tuple[str, ...]:
    """The parts ``method`` names (``spec_of(method).heads``); () for a name that does not parse: the live tab keeps
    a lane for it, showing why, and that lane is drawn in no view."""
    try:
        return spec_of(method).heads
    except SpecScopeError:
        return ()


def _serves(view: View, method: str) -> bool:
    heads = _shown_heads(method)
    if not heads or is_plain(method):
        return False
    return not view.prefixes or any(h in view.prefixes for h in heads)


_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        for name in PLUGIN_MODULES:
            importlib.import_module(name)
        _plugins_loaded = True


def views_for(methods: Sequence[str]) -> list[View]:
    """The views the given methods get, generic ones first, in registration order."""
    _load_plugins()
    return [v for v in VIEWS if any(_serves(v, m) for m in methods)]


def views_with_data(lanes: Lanes) -> list[View]:
    """The views a run's lanes get (:func:`views_for`), less those whose ``shows`` finds nothing in them to draw:
    what the app's figure slots hold, in order."""
    return [v for v in views_for(list(lanes)) if v.shows is None or v.shows(lanes_for(v, lanes))]


def lanes_for(view: View, lanes: Lanes) -> dict[str, Sequence[RoundEvent]]:
    """The lanes a view is drawn from: the ones it serves, plus fixed-window baselines when it wants them (every
    lane for a view of the ``whole_run``)."""
    if view.whole_run:
        return dict(lanes)
    keep = {}
    for method, events in lanes.items():
        if _serves(view, method) or (view.with_baselines and is_fixed_window(method)):
            keep[method] = events
    return keep


def _replay_kw(view: View, replayed: PolicyReplay | None) -> dict:
    """``{"replayed": ...}`` for a view that draws a replayed baseline, else nothing (its functions take lanes only)."""
    return {"replayed": replayed} if view.replayed else {}


def build(view: View, lanes: Lanes, replayed: PolicyReplay | None = None) -> go.Figure:
    """The view's figure; ``replayed``: the run's replayed fixed window (:attr:`spec_core.serve.live.LiveFrame.baseline`)."""
    return view.build(lanes_for(view, lanes), **_replay_kw(view, replayed))


def caption_for(view: View, lanes: Lanes, replayed: PolicyReplay | None = None) -> str:
    """What the data shows (computed from it, with its counts), then how to read the figure, then its footnote."""
    mine = lanes_for(view, lanes)
    said = view.describe(mine, **_replay_kw(view, replayed)) if view.describe is not None else ""
    after = view.footnote(mine) if view.footnote is not None else ""
    return f"{view.look_for} {said} {view.caption}".strip() + (f"\n\n{after}" if after else "")


ROUND_VIEWS = {"training_lens": lens.training_lens_figure}  # views that can follow one chosen round: key → builder


def build_for_round(
    view: View, lanes: Lanes, method: str, round_index: int, replayed: PolicyReplay | None = None
) -> go.Figure | None:
    """The view redrawn for round ``round_index`` of ``method`` (the step-through's choice), beside the same
    fixed-window baseline as its whole-run figure; None for a view that shows whole runs."""
    builder = ROUND_VIEWS.get(view.key)
    if builder is None or method not in lanes or not _serves(view, method):  # the tree view follows tree lanes only
        return None
    mine = lanes_for(view, lanes).items() if view.replayed else ()
    fixed = {m: ev for m, ev in mine if m != method and is_fixed_window(m)}
    return builder({method: lanes[method], **fixed}, round_index, **_replay_kw(view, replayed))


ROUND_NOTES: list[Callable[[RoundEvent], str]] = []  # event → a sentence on what a method's parts did this round


def register_round_note(note: Callable[[RoundEvent], str]) -> None:
    """Add a sentence-maker for the step-through (it returns "" for rounds it has nothing to say about)."""
    if note not in ROUND_NOTES:
        ROUND_NOTES.append(note)


def round_notes(event: RoundEvent) -> list[str]:
    """What each registered method part said of this round (PACER's blocks, ...), non-empty sentences only."""
    _load_plugins()
    return [text for note in ROUND_NOTES if (text := note(event))]


def explain(method: str, temperature: float) -> str:
    """The rule in force for a method, in a few sentences: its parts' own words (each registry class's ``rule``),
    the verifier's, then the drafter's, then the draft-length policy's (``cost`` for a drafter that names none);
    plain decoding's alone, since nothing is drafted."""
    spec = spec_of(method)
    drafter = DRAFTERS[spec.drafter.family] if spec.drafter is not None else None
    if drafter is not None and not getattr(drafter, "drafts", True):
        return words.rule(drafter, temperature)
    verifier = VERIFIERS[spec.verifier.family] if spec.verifier is not None else LosslessVerifier
    policy = POLICIES[spec.policy.family] if spec.policy is not None else None
    said = (words.rule(part, temperature) for part in (verifier, drafter, policy) if part is not None)
    return " ".join(text for text in said if text)


# -- the built-in views and rules (the first users of the registry) -----------------------------------------

register_view(
    View(
        "draft_lengths",
        "Draft length and accepted length per round",
        "The line is how many tokens each round drafted, the markers how many of them the target kept: the gap "
        "is wasted draft work, which an adaptive policy tries to close.",
        plots.draft_lengths_figure,
        describe=captions.draft_lengths,
        replayed=True,
        look_for="Look for the rounds where an adaptive method drafts more than the fixed window and keeps it.",
    )
)
register_view(
    View(
        "acceptance_by_position",
        "Acceptance by position in the draft",
        "Each point: of the rounds that drafted that far (n on the point), the share that kept the draft at that "
        "position. Where it drops below about 50% is roughly how far drafting pays; a point resting on a few "
        "rounds can swing widely.",
        plots.acceptance_by_position_figure,
        describe=captions.acceptance_by_position,
    )
)
register_view(
    View(
        "accepted_histogram",
        "Accepted length histogram",
        "How many drafts each round kept: mass at 0 means drafting was mostly wasted, mass at the window's size "
        "means the window could have been longer.",
        plots.accepted_histogram_figure,
        describe=captions.accepted_histogram,
    )
)
register_view(
    View(
        "training_lens",
        "Training lens: how three training recipes would weight one drafted block",
        captions.TRAINING_LENS,
        lens.training_lens_figure,
        with_baselines=False,
        describe=lens.lens_caption,
        replayed=True,
        look_for="Look for D-PACE's bars leaning to the positions the target is likely to reach, where the fixed "
        "window's dashed line of kept shares is still high.",
    )
)
register_view(
    View(
        "heuristic_window",
        "Heuristic schedule: the window per round",
        "The window grows by 2 after a round where every draft passed and shrinks by 1 otherwise.",
        plots.heuristic_window_figure,
        prefixes=(HeuristicLength.prefix,),
        with_baselines=False,
        describe=captions.heuristic_window,
    )
)
register_view(
    View(
        "confidence",
        "Confidence policy: q(x) of each drafted token",
        "q(x) is the draft model's own probability of the token it drafted. Drafting stops once it falls under the "
        "threshold (dashed line); rejected drafts are the × marks.",
        plots.confidence_figure,
        prefixes=(ConfidenceLength.prefix,),
        with_baselines=False,
        describe=captions.confidence,
    )
)
