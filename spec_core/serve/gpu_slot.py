"""A GPU lent per request on a Hugging Face ZeroGPU Space; nothing at all everywhere else.

On ZeroGPU (a Gradio Space whose hardware is ``zero-a10g``) a function gets a GPU only while it runs under the
``spaces`` package's ``@spaces.GPU(duration=...)``: the Space asks for a slot of that many seconds, runs the
function in a worker process that holds the GPU, and ends the slot when the function returns or when its time is
up. :func:`gpu_slot` wraps a handler that way when ``spaces`` can be imported and returns it unchanged otherwise
(``spaces.GPU`` itself is a no-op outside ZeroGPU, where ``$SPACES_ZERO_GPU`` is unset), so a laptop, the Docker
Space and the tests run exactly the code they ran before.

The slot asked for is :func:`budget_s`: ``BASE_S + tokens × lanes × PER_TOKEN_S``, capped at ``CAP_S``.
``PER_TOKEN_S`` (50 ms) is about three times what one token of the 135 M embedded pair costs on a GPU, where a
round is bound by Python and kernel launches rather than arithmetic (a one-token step of the target, its draft
steps, the engine's work, the page's updates); ``BASE_S`` covers the worker's start and the pair's warm-up. A
short request asks for a short slot, which ZeroGPU schedules sooner and charges less of the visitor's quota.

When a slot ends before the run does, ``spaces`` raises a ``gr.Error`` whose message is ``"GPU task aborted"``
in the app process (read from spaces 0.51.3's ``zero/wrappers.py``). :func:`until_slot_end` turns that into one
last output built from the last one shown (the text so far and a message), not a stack trace. It matches the
error by its message, so this module needs neither Gradio nor ``spaces`` to import.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.model.models import load_pair

PER_TOKEN_S = 0.05  # slot seconds per requested token per lane (≈ 3× a GPU token of the embedded pair)
BASE_S = 10.0  # the worker's start, the pair's warm-up, the run's closing analysis
CAP_S = 120.0  # never ask for more: a long slot waits longer for a GPU and spends the visitor's quota
SLOT_ENDED = "GPU task aborted"  # the message of the gr.Error that `spaces` raises when a slot's time is up
SLOT_END_NOTE = (
    "The GPU slot for this request ended before the run did (ZeroGPU lends a GPU for a limited time): "
    "shown is what was generated until then. Ask for fewer new tokens or fewer methods to finish within one slot."
)


def spaces_module() -> Any | None:
    """The ``spaces`` package when it can be imported (it is preinstalled on Hugging Face Gradio Spaces), else None."""
    try:
        import spaces  # optional: present on a ZeroGPU Space only
    except ImportError:  # absent; or imported while Gradio was half-initialised (spaces refuses then)
        return None
    return spaces


spaces_module()  # imported first where it exists: ZeroGPU wants `spaces` in before anything initialises CUDA


def budget_s(tokens: Any, lanes: Any = 1) -> int:
    """Seconds of GPU to ask for ``tokens`` new tokens in each of ``lanes`` lanes (never raises: raw UI values
    that do not parse count as one token and one lane; the request's own parser refuses them later)."""
    try:
        tokens = max(1.0, float(tokens))
        lanes = max(1.0, float(lanes))
    except (TypeError, ValueError):
        tokens, lanes = 1.0, 1.0
    if not math.isfinite(tokens * lanes):
        return int(CAP_S)
    return int(math.ceil(min(CAP_S, BASE_S + tokens * lanes * PER_TOKEN_S)))


def gpu_slot(fn: Callable, duration: Callable[..., int]) -> Callable:
    """``spaces.GPU(duration=duration)(fn)`` when ``spaces`` can be imported, else ``fn`` itself.

    ``duration`` is called with ``fn``'s own arguments and returns seconds (e.g. through :func:`budget_s`)."""
    spaces = spaces_module()
    if spaces is None:
        return fn
    return spaces.GPU(duration=duration)(fn)


def is_slot_end(err: BaseException) -> bool:
    """Whether ``err`` is the error ``spaces`` raises when a GPU slot's time ran out (not a quota refusal, not
    an error of the run itself: those keep their own message)."""
    message = getattr(err, "message", None)  # gr.Error keeps it there (its str() is the message's repr)
    return (message if isinstance(message, str) else str(err)).strip() == SLOT_ENDED


def until_slot_end(stream: Callable[..., Iterator], last_words: Callable[[Any, str], Any]) -> Callable[..., Iterator]:
    """``stream``'s outputs, and when its GPU slot ends, ``last_words(last_output_or_None, SLOT_END_NOTE)`` as
    the last one instead of the error. Any other error passes through unchanged."""

    @functools.wraps(stream)
    def run(*args, **kwargs):
        last = None
        try:
            for last in stream(*args, **kwargs):
                yield last
        except Exception as err:
            if not is_slot_end(err):
                raise
            yield last_words(last, SLOT_END_NOTE)

    return run


def place_on_gpu(
    load: Callable[[str], Any] | None = None, precisions: tuple[str, ...] = ("auto", "float32")
) -> list[str]:
    """Where ``spaces`` can be imported and CUDA is there (ZeroGPU, where it is emulated outside a slot), load the
    embedded pair onto ``cuda`` at import, as ZeroGPU asks (models placed at module level; its workers inherit
    them); elsewhere nothing, and loading stays lazy. ``load(precision)`` (default: ``load_pair("embedded")``,
    whose cache the request's loader then hits) must not run the model: outside a slot there is no GPU to run
    it on. Returns the precisions placed; a pair that cannot load is left to the first request, which says why."""
    if spaces_module() is None:
        return []

    if not torch.cuda.is_available():
        return []

    load = load or (lambda precision: load_pair("embedded", dtype=precision))

    placed = []
    for precision in precisions:
        try:
            load(precision)
        except SpecScopeError:
            continue
        placed.append(precision)
    return placed
