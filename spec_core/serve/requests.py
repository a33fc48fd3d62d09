"""Requests from the outside (the app's forms, the ``/generate`` API), parsed once where they enter.

docs/STYLE.md §10: a request's raw values (strings, floats from sliders) become frozen records here, and the layers
below take the records. Every bad value raises :class:`~spec_core.core.errors.SpecScopeError` with a message meant
for the user; the app turns it into a ``gr.Error``. A method name that does not parse is *not* an error of the
whole live request: it becomes that lane's error, and the other lanes run (:class:`LanePlan`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spec_core.core.errors import SpecScopeError
from spec_core.core.guards import check_text, check_upload
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import MAX_NEW_TOKENS_LIMIT
from spec_core.engine.methods import MethodSpec, parse_method
from spec_core.model.models import allowed_pairs

PRECISIONS = ("auto", "int8", "bfloat16", "float32")  # the live tab's precision (auto: fastest here; float32: exact)
NONE_METHOD = "(none)"  # an empty lane in the live tab
MAX_SEED = 2**31 - 1  # torch.Generator takes 64 bits; 31 keep every client's integer type happy
MAX_PROMPTS = 10_000  # the Analyzer's "prompts to run": more is a typo, not a prompt set


@dataclass(frozen=True)
class LanePlan:
    """One lane of the live tab: the method as typed and its parsed spec, or why it cannot run."""

    method: str
    spec: MethodSpec | None  # None when the name did not parse
    error: str = ""  # the parse error, shown in this lane only


@dataclass(frozen=True)
class LiveRequest:
    """A Generate click of the live tab."""

    prompt: str
    lanes: tuple[LanePlan, ...]
    max_new_tokens: int
    sampling: SamplingConfig
    pair_name: str = "embedded"
    precision: str = "auto"

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(lane.method for lane in self.lanes)


@dataclass(frozen=True)
class GenerateRequest:
    """A call of the ``/generate`` API (one method)."""

    prompt: str
    spec: MethodSpec
    max_new_tokens: int
    sampling: SamplingConfig


def offered_pairs() -> list[str]:
    """The embedded pair, plus the operator's allowlist (``$SPECSCOPE_HUB_PAIRS``) unless the hub is offline."""

    return ["embedded", *(allowed_pairs() if os.environ.get("HF_HUB_OFFLINE") != "1" else ())]


def parse_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpecScopeError("the prompt is empty; type something or click an example")
    return check_text(prompt)  # at most MAX_PROMPT_CHARS, valid UTF-8: refused before the tokenizer sees it


def parse_live_method(method: Any) -> MethodSpec:
    """A method the engine runs (peers run transformers' own generate: bench-only)."""
    spec = parse_method(method.strip() if isinstance(method, str) else method)
    if spec.kind == "peer":
        raise SpecScopeError(f"{spec.name!r} runs transformers' own generate: it is bench-only (`make bench`)")
    return spec


def parse_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecScopeError(f"{name} must be an integer, got {value!r}")
    if int(value) != value:
        raise SpecScopeError(f"{name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise SpecScopeError(f"{name} must be in [{low}, {high}], got {int(value)}")
    return int(value)


def parse_sampling(temperature: Any, top_p: Any, seed: Any) -> SamplingConfig:
    for name, v in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SpecScopeError(f"{name} must be a number, got {v!r}")
    seed = parse_int(seed, "seed", 0, MAX_SEED)
    return SamplingConfig(temperature=float(temperature), top_p=float(top_p), seed=seed).validate()


def parse_choice(value: Any, what: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise SpecScopeError(f"{what} {value!r} is not offered here; choose one of {list(allowed)}")
    return value


def parse_lanes(choices: Sequence[Any]) -> tuple[LanePlan, ...]:
    """The chosen lanes, de-duplicated, empty ones dropped; a bad name becomes its lane's error."""
    lanes: dict[str, LanePlan] = {}
    for choice in choices:
        name = choice.strip() if isinstance(choice, str) else ""
        if not name or name == NONE_METHOD or name in lanes:
            continue
        try:
            lanes[name] = LanePlan(name, parse_live_method(name))
        except SpecScopeError as err:
            lanes[name] = LanePlan(name, None, str(err))
    if not lanes:
        raise SpecScopeError("choose at least one method")
    return tuple(lanes.values())


def parse_live_request(
    prompt: Any,
    methods: Sequence[Any],
    temperature: Any,
    top_p: Any,
    seed: Any,
    max_new_tokens: Any,
    pair_name: Any,
    precision: Any,
    pairs: Sequence[str],
    max_new: int = MAX_NEW_TOKENS_LIMIT,
) -> LiveRequest:
    """``max_new``: the most new tokens this caller offers (the page's box says its own, lower, bound)."""
    return LiveRequest(
        prompt=parse_prompt(prompt),
        lanes=parse_lanes(methods),
        max_new_tokens=parse_int(max_new_tokens, "max new tokens", 1, max_new),
        sampling=parse_sampling(temperature, top_p, seed),
        pair_name=parse_choice(pair_name, "model pair", pairs),
        precision=parse_choice(precision, "precision", PRECISIONS),
    )


@dataclass(frozen=True)
class AnalyzerRequest:
    """A "Run prompt set" click of the analyzer tab."""

    source: str  # the prompt set's path (an uploaded file, checked, or one of the project's sets)
    spec: MethodSpec
    n_prompts: int
    max_new_tokens: int
    sampling: SamplingConfig
    pair_name: str
    precision: str


def parse_analyzer_request(
    prompt_set: Any,
    upload: Any,
    method: Any,
    n_prompts: Any,
    max_new_tokens: Any,
    temperature: Any,
    top_p: Any,
    seed: Any,
    pair_name: Any,
    precision: Any,
    *,
    pairs: Sequence[str],
    prompt_sets: Sequence[str],
    root,
    max_new: int,
) -> AnalyzerRequest:
    if upload:
        source = str(check_upload(upload, "the uploaded prompt set"))
    elif prompt_set:
        source = str(root / parse_choice(prompt_set, "prompt set", prompt_sets))
    else:
        raise SpecScopeError("no prompt set: upload a JSONL file (id, category, prompt per line)")
    return AnalyzerRequest(
        source=source,
        spec=parse_live_method(method),
        n_prompts=parse_int(n_prompts, "prompts to run", 1, MAX_PROMPTS),
        max_new_tokens=parse_int(max_new_tokens, "max new tokens", 1, max_new),
        sampling=parse_sampling(temperature, top_p, seed),
        pair_name=parse_choice(pair_name, "model pair", pairs),
        precision=parse_choice(precision, "precision", PRECISIONS),
    )


def parse_generate_request(
    prompt: Any, method: Any, max_new_tokens: Any, temperature: Any, seed: Any
) -> GenerateRequest:
    return GenerateRequest(
        prompt=parse_prompt(prompt),
        spec=parse_live_method(method),
        max_new_tokens=parse_int(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS_LIMIT),
        sampling=parse_sampling(temperature, 1.0, seed),
    )
