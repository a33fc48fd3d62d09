"""Prompt lookup replayed on a recorded text, with no model call: what a longer or shorter copy would have paid.

A lookup draft depends only on the text (:mod:`spec_core.drafters.lookup`), so on a recorded greedy answer y the
copy at every position is known exactly: what the index proposes there and how many of its tokens y bears out.
A replay walks the rounds the engine would: at position ``pos`` it copies ``L`` tokens (a fixed ``k``, the
``cost`` policy fed the drafter's own estimates, or the oracle's plan), keeps ``min(match, L)`` and emits one more.
Time comes from the one cost model (a copied token costs no draft forward), so the rows compare with the
Playground's and the hardware lens's. At temperature 0 with a lossless verifier the engine's ``lookup`` rounds are
exactly these (``tests/engine/test_lookup_replay.py`` checks it against the engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spec_core.core.cost_model import CostProfile
from spec_core.drafters.lookup import KeepEstimates, LookupParams
from spec_core.drafters.ngram import NgramIndex
from spec_core.policies.base import DraftSoFar
from spec_core.policies.cost import CostLength

COPY_WINDOWS = (1, 2, 3, 4, 6, 8, 10)  # 10: transformers' and vLLM's usual prompt_lookup_num_tokens


@dataclass(frozen=True)
class CopyAt:
    """The copy the index offers at one position of the answer."""

    n: int  # the matched n-gram's length (0: no match)
    recurred: bool  # its continuation followed it more than once
    tokens: tuple[int, ...]  # what it would copy (up to the drafter's k)
    match: int  # how many of them the answer bears out


@dataclass(frozen=True)
class CopyReplay:
    """One way of choosing the copy's length, replayed: rounds, drafted and kept tokens, predicted speedup."""

    policy: str
    lengths: tuple[int, ...]
    kept: tuple[int, ...]
    tokens: int
    ms: float
    ar_ms: float

    @property
    def speedup(self) -> float:
        return self.ar_ms / self.ms if self.ms else 0.0

    @property
    def tau(self) -> float:
        return self.tokens / len(self.lengths) if self.lengths else 0.0


def copies(
    prompt_ids: Sequence[int],
    answer: Sequence[int],
    params: LookupParams | None = None,
    banned: frozenset[int] = frozenset(),
) -> list[CopyAt]:
    """The copy offered at every position of ``answer`` (the index grown as the text is, as in the engine;
    ``banned``: the tokenizer's special tokens, which the engine's copy never proposes)."""
    params = params or LookupParams()
    index = NgramIndex(params.min_n, params.max_n, banned)
    index.extend(prompt_ids)
    out = []
    for pos in range(len(answer)):
        found = index.match()
        if found is None:
            out.append(CopyAt(0, False, (), 0))
        else:
            n, start, recurred = found
            tokens = tuple(index.copy(start, params.k))
            out.append(CopyAt(n, recurred, tokens, run_length(tokens, answer[pos:])))
        index.extend([answer[pos]])
    return out


def run_length(drafted: Sequence[int], text: Sequence[int]) -> int:
    """How many of ``drafted`` the verified ``text`` bears out, from the first (a chain is kept to its first miss)."""
    return next((i for i, (a, b) in enumerate(zip(drafted, text)) if a != b), min(len(drafted), len(text)))


def _replay(name: str, at: Sequence[CopyAt], profile: CostProfile, choose, limit: int) -> CopyReplay:
    lengths, kept, pos, n = [], [], 0, len(at)
    while pos < n:
        length = min(choose(pos), len(at[pos].tokens), max(limit - pos - 1, 0))
        keep = min(at[pos].match, length)
        lengths.append(length)
        kept.append(keep)
        pos += keep + 1
    widths = np.asarray(lengths)
    ms = float(profile.round_ms(widths + 1, 0).sum())
    return CopyReplay(name, tuple(lengths), tuple(kept), n, ms, profile.step_ms * n)


def replay_window(at: Sequence[CopyAt], profile: CostProfile, k: int, limit: int | None = None) -> CopyReplay:
    """``lookup+fixed:k``: copy up to k tokens a round."""
    return _replay(f"k={k}", at, profile, lambda pos: k, limit or len(at))


def replay_cost(at: Sequence[CopyAt], profile: CostProfile, limit: int | None = None, max_len: int = 16) -> CopyReplay:
    """``lookup`` as it runs: the ``cost`` policy fed the drafter's estimates, which learn from each round."""
    estimates, policy = KeepEstimates(), CostLength(profile, max_len)
    limit = limit or len(at)

    def choose(pos: int) -> int:
        copy = at[pos]
        if not copy.tokens:
            return 0
        drafted: list[int] = []
        est: list[float] = []
        while len(drafted) < len(copy.tokens):
            so_far = DraftSoFar(drafted, [1.0] * len(drafted), [], limit - pos - 1, ["lookup"] * len(drafted), est)
            if not policy.next_chunk(so_far):
                break
            drafted.append(copy.tokens[len(drafted)])
            est.append(estimates.estimate(copy.n, len(drafted), copy.recurred))
        known = min(len(copy.tokens), len(at) - pos)  # the answer bears the copy out this far at most
        tried = copy.match if copy.match >= known else min(len(copy.tokens), copy.match + 1)
        estimates.update(copy.n, tried, copy.match, copy.recurred)  # as the drafter learns at commit
        return len(drafted)

    return _replay("lookup (cost)", at, profile, choose, limit)


def replay_oracle(at: Sequence[CopyAt], profile: CostProfile, limit: int | None = None) -> CopyReplay:
    """The copy length that reaches the end in the least predicted time, knowing what the target keeps."""
    return replay_oracle_sources(at, None, profile, limit)


def replay_oracle_sources(
    at: Sequence[CopyAt],
    runs: Sequence[int] | None,
    profile: CostProfile,
    limit: int | None = None,
    copy: bool = True,
) -> CopyReplay:
    """The rounds that reach the end of the answer in the least predicted time, knowing what the target keeps:
    each a plain step, ``L`` copied tokens (``copy``; at most what the answer bears out) or ``L`` network drafts
    (``runs``; likewise). ``runs=None`` with ``copy`` is the copy's own oracle; ``copy=False`` the network's."""
    n, limit = len(at), limit or len(at)
    best = np.zeros(n + 1)
    plan: list[tuple[int, int]] = [(0, 0)] * n  # (drafted, draft forwards) of each position's best round
    for pos in range(n - 1, -1, -1):
        room = max(limit - pos - 1, 0)
        options = [(float(profile.round_ms(1, 0)) + best[min(pos + 1, n)], 0, 0)]
        if copy:
            for length in range(1, min(at[pos].match, room) + 1):
                options.append((float(profile.round_ms(length + 1, 0)) + best[min(pos + length + 1, n)], length, 0))
        if runs is not None:
            for length in range(1, min(runs[pos], room) + 1):
                ms = float(profile.round_ms(length + 1, length)) + best[min(pos + length + 1, n)]
                options.append((ms, length, length))
        ms, length, forwards = min(options)
        best[pos], plan[pos] = ms, (length, forwards)
    lengths, kept, total, pos = [], [], 0.0, 0
    while pos < n:
        length, forwards = plan[pos]
        lengths.append(length)
        kept.append(length)
        total += float(profile.round_ms(length + 1, forwards))
        pos += length + 1
    name = "oracle (hybrid)" if copy and runs is not None else "oracle (network)" if runs is not None else "oracle"
    return CopyReplay(name, tuple(lengths), tuple(kept), n, total, profile.step_ms * n)


def copy_replays(
    prompt_ids: Sequence[int],
    answer: Sequence[int],
    profile: CostProfile,
    limit: int | None = None,
    banned: frozenset[int] = frozenset(),
) -> list[CopyReplay]:
    """Every fixed copy length of :data:`COPY_WINDOWS`, ``lookup``'s own, and the oracle, on one text (``banned``:
    the tokenizer's special tokens, as :func:`copies`)."""
    at = copies(prompt_ids, answer, LookupParams(k=max(COPY_WINDOWS)), banned)
    rows = [replay_window(at, profile, k, limit) for k in COPY_WINDOWS]
    own = copies(prompt_ids, answer, banned=banned)  # the drafter's default k
    return [*rows, replay_cost(own, profile, limit), replay_oracle(at, profile, limit)]
