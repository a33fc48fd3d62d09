"""Running several methods side by side, the ratios and first divergences between them, events on disk (JSON lines).

The app shows two or three methods decoding one prompt at once. On a small CPU, threads would fight for the
cores and distort every speed figure, so :func:`interleave` advances each method's
:meth:`~spec_core.engine.loop.Generation.rounds` iterator one round at a time, in turn, on the caller's thread.
Each lane's speed is then measured on its own clock (:class:`~spec_core.core.types.Stats`: the sum of its rounds'
``draft_s + verify_s``), and :func:`speedup` compares two such clocks.

No gradio, no plotly here: the app and the command line can both use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from spec_core.core.errors import SpecScopeError
from spec_core.core.jsonl import read_objects
from spec_core.core.types import Rejection, RoundEvent, Stats, TreeRound

_EVENT_FIELDS = {f.name for f in fields(RoundEvent)}
_TUPLE_FIELDS = tuple(
    f.name for f in fields(RoundEvent) if f.type.startswith("tuple")
)  # draft_tokens, draft_pieces, the probabilities, emitted


def interleave(
    lanes: Sequence[Iterable[RoundEvent]], should_stop: Callable[[], bool] | None = None
) -> Iterator[tuple[int, RoundEvent]]:
    """Advance each lane's round iterator one round in turn; yield ``(lane index, event)`` until all end.

    ``lanes`` are usually ``Generation(...).rounds()`` iterators. ``should_stop`` is polled between rounds.
    """
    iterators = [iter(lane) for lane in lanes]
    live = list(range(len(iterators)))
    while live:
        for i in list(live):
            if should_stop is not None and should_stop():
                return
            try:
                yield i, next(iterators[i])
            except StopIteration:
                live.remove(i)


def speedup(stats: Stats, baseline: Stats | None) -> float | None:
    """tokens/s ratio against a baseline run (plain decoding), None without one or before both have a rate."""
    if baseline is None or baseline.tokens_per_s <= 0 or stats.tokens_per_s <= 0:
        return None
    return stats.tokens_per_s / baseline.tokens_per_s


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int:
    """Index of the first differing token of two runs' outputs (-1 when identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return -1 if len(a) == len(b) else min(len(a), len(b))


def divergence_token(a: Sequence[int], b: Sequence[int]) -> int | None:
    """What a person reads in a table: the 1-based number of the first new token where ``a`` parts from ``b``,
    None (a blank cell) when the two wrote the same tokens."""
    at = first_divergence(a, b)
    return None if at < 0 else at + 1


# -- events on disk -----------------------------------------------------------------------------------------


def event_record(event: RoundEvent, **meta: Any) -> dict[str, Any]:
    """One JSON-ready line: ``meta`` (e.g. ``prompt_id``, ``prompt``) plus every event field."""
    return {**meta, **asdict(event)}


def event_from_record(record: Mapping[str, Any]) -> RoundEvent:
    """Rebuild an event from :func:`event_record`'s output (unknown keys are metadata and ignored)."""
    missing = {"index", "method", "draft_tokens", "accepted", "next_token", "emitted"} - set(record)
    if missing:
        raise SpecScopeError(f"not a SpecScope event: missing {sorted(missing)}")
    kwargs = {k: v for k, v in record.items() if k in _EVENT_FIELDS}
    for name in _TUPLE_FIELDS:
        kwargs[name] = tuple(kwargs.get(name) or ())
    kwargs.setdefault("context_len", 0)
    kwargs.setdefault("next_piece", "")
    kwargs.setdefault("next_kind", "target")
    kwargs.setdefault("draft_s", 0.0)
    kwargs.setdefault("verify_s", 0.0)
    _check_types(kwargs)
    kwargs["tree"] = TreeRound.from_record(kwargs.get("tree"))
    try:
        kwargs["rejection"] = Rejection.from_record(kwargs.get("rejection"))  # absent from files before it
    except SpecScopeError as err:
        raise SpecScopeError(f"not a SpecScope event: {err}") from err
    try:
        return RoundEvent(**kwargs)
    except TypeError as err:
        raise SpecScopeError(f"not a SpecScope event: {err}") from err


_INTS = ("index", "context_len", "accepted", "next_token")
_NUMBERS = ("draft_s", "verify_s", "target_s", "engine_s")
_INT_TUPLES = ("draft_tokens", "emitted")
_TEXT = ("method", "next_piece", "stop_reason")


def _check_types(kw: Mapping[str, Any]) -> None:
    """A loaded event holds the types the pages read (a wrong one would fail later, far from the file)."""

    def bad(name: str, want: str) -> SpecScopeError:
        return SpecScopeError(f"not a SpecScope event: {name} should be {want}, got {kw[name]!r:.40}")

    is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    is_num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    for name in _INTS:
        if name in kw and not is_int(kw[name]):
            raise bad(name, "an integer")
    for name in _NUMBERS:
        if name in kw and not is_num(kw[name]):
            raise bad(name, "a number")
    for name in _TEXT:
        if name in kw and not isinstance(kw[name], str):
            raise bad(name, "text")
    for name in _INT_TUPLES:
        if not all(is_int(v) for v in kw[name]):
            raise bad(name, "a list of integers")
    for name in ("draft_probs", "target_probs", "accept_probs", "gold_draft_probs"):
        if not all(is_num(v) for v in kw[name]):
            raise bad(name, "a list of numbers")
    if not all(isinstance(v, str) for v in kw["draft_pieces"]):
        raise bad("draft_pieces", "a list of text pieces")
    if kw["next_kind"] not in ("recovered", "bonus", "target"):
        raise bad("next_kind", "recovered, bonus or target")
    gamma = len(kw["draft_tokens"])
    if len(kw["draft_pieces"]) != gamma:
        raise SpecScopeError(f"not a SpecScope event: {gamma} draft tokens but {len(kw['draft_pieces'])} pieces")
    if not 0 <= kw["accepted"] <= gamma or len(kw["emitted"]) > kw["accepted"] + 1:
        raise SpecScopeError("not a SpecScope event: accepted and emitted do not fit the drafted tokens")


def events_to_jsonl(records: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def read_events_jsonl(path: str | Path) -> list[tuple[dict[str, Any], RoundEvent]]:
    """Read an events file: a list of ``(metadata, event)``; raises :class:`SpecScopeError` on bad input."""
    out = []
    for n, record in read_objects(path, "events file"):
        try:
            event = event_from_record(record)
        except SpecScopeError as err:
            raise SpecScopeError(f"events file line {n}: {err}") from err
        out.append(({k: v for k, v in record.items() if k not in _EVENT_FIELDS}, event))
    return out
