"""A feature draft that can copy: a pointer-generator gate over prompt lookup's candidate.

A one-layer draft has no induction mechanism (the two-layer circuit that copies what followed an earlier occurrence,
Olsson et al., arXiv 2209.11895), so on a text that quotes its passage it proposes the target's token a fifth of
the time where a 2-gram prompt lookup would propose it (docs/LOG.md, 2026-12-06). The pointer supplies the copy
from outside: at each drafted position the :class:`Pointer` finds what followed the longest earlier match of the
text's last 1..3 tokens (the prompt lookup of :mod:`.lookup`), and a trained gate (See, Liu & Manning,
"Get To The Point", arXiv 1704.04368) says how much of the draft's distribution moves onto it:

    q = (1 − g) · p_draft + g · δ_copy,   g = sigmoid(w · [draft feature ⊕ evidence] + b)

The evidence is the match's own (:func:`copy_evidence`): its n, how far the match runs back, whether its
continuation recurred, and how the draft itself rates the copy. q is a proper distribution and the token is drawn
from it, so the lossless rule stays exact; a greedy draft proposes q's argmax. ``python -m spec_core train copy``
trains the gate on the frozen draft (:mod:`spec_core.train.copy`), on the same widened head the drafter uses.

A parallel block drafter (:mod:`.block`) copies the same way, position by position along its block: the pointer
reads the text with the block's drafted tokens so far, the gate the drafter's state at that position
(:mod:`spec_core.train.copy_block` trains it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from spec_core.core import rules
from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import draw
from spec_core.drafters.ngram import NgramIndex

POINTER_MAX_N = 3  # the longest n-gram matched (the lookup's default)
RUN_CAP = 32  # how far back a match's length is counted
EVIDENCE = (
    "n=1",
    "n=2",
    "n=3",
    "log run",  # log(1 + tokens the match runs back) / log(1 + RUN_CAP)
    "recurred",  # the continuation followed the n-gram more than once
    "draft logp(copy)",  # the draft's own log-probability of the copy, / 10
    "draft logp(top)",  # the draft's log-probability of its own first choice, / 10
    "copy is top",  # the draft's first choice is the copy already
    "copy off head",  # the copy is outside the trimmed head (a word only the text's own widening holds)
)


class Pointer:
    """The copy candidate for the next token of a growing text: what followed the longest (1..3 tokens) earlier
    match of its end, as :class:`~spec_core.drafters.ngram.NgramIndex` keeps it, and how far that match runs back.
    ``banned`` (the chat template's markers) are never copied."""

    def __init__(self, banned: frozenset[int] = frozenset()):
        self.banned = banned
        self.index = NgramIndex(1, POINTER_MAX_N, banned)

    def reset(self, ids: Sequence[int]) -> None:
        self.index = NgramIndex(1, POINTER_MAX_N, self.banned)
        self.index.extend(ids)

    def extend(self, tokens: Sequence[int]) -> None:
        self.index.extend(tokens)

    def truncate(self, length: int) -> None:
        self.index.truncate(length)

    def __len__(self) -> int:
        return len(self.index.ids)

    def candidate(self) -> tuple[int, int, int, bool] | None:
        """(token, n, run, recurred): the copy, its match's n, how many tokens the match runs back (≥ n, at most
        :data:`RUN_CAP`), whether its continuation recurred; None where nothing matches."""
        found = self.index.match()
        if found is None:
            return None
        n, start, recurred = found
        return self.index.ids[start], n, run_back(self.index.ids, self.index.ids, start, n), recurred


def run_back(text: Sequence[int], ids: Sequence[int], start: int, n: int) -> int:
    """How many tokens ``text``'s end and the tokens of ``ids`` before ``start`` share, counted back from the
    n-gram that matched (≥ ``n``, at most :data:`RUN_CAP`)."""
    end, run = len(text), n
    while run < RUN_CAP and start - run - 1 >= 0 and ids[start - run - 1] == text[end - run - 1]:
        run += 1
    return run


def copy_evidence(n, run, recurred, logp_copy, logp_top, is_top, off_head) -> torch.Tensor:
    """The gate's evidence ``[..., E]`` in :data:`EVIDENCE`'s order, from tensors (or numbers) of one shape: a
    position's while drafting, a batch's in training (:mod:`spec_core.train.copy`)."""
    n, run, logp_copy, logp_top = (torch.as_tensor(x, dtype=torch.float32) for x in (n, run, logp_copy, logp_top))
    recurred, is_top, off_head = (torch.as_tensor(x, dtype=torch.float32) for x in (recurred, is_top, off_head))
    return torch.stack(
        [
            (n == 1).float(),
            (n == 2).float(),
            (n >= 3).float(),
            torch.log1p(run) / math.log1p(RUN_CAP),
            recurred,
            logp_copy.nan_to_num(neginf=-30.0).clamp(min=-30.0) / 10.0,
            logp_top.nan_to_num(neginf=-30.0).clamp(min=-30.0) / 10.0,
            is_top,
            off_head,
        ],
        dim=-1,
    )


def pointer_evidence(logp: torch.Tensor, found: tuple[int, int, int, bool], in_head: torch.Tensor) -> torch.Tensor:
    """The evidence ``[E]`` for ``found`` (:meth:`Pointer.candidate`) given the draft's log-probabilities ``logp``
    [V] (temperature 1, over the head it proposes from) and ``in_head`` [V], its trimmed head's mask."""
    token, n, run, recurred = found
    top = int(logp.argmax())
    return copy_evidence(n, run, recurred, logp[token].cpu(), logp[top].cpu(), top == token, not bool(in_head[token]))


def draw_copying(
    gate,
    pointer: Pointer,
    row: torch.Tensor,
    state: torch.Tensor,
    in_head: torch.Tensor,
    sampling: SamplingConfig,
    generator: torch.Generator | None,
) -> tuple[int, torch.Tensor | None, float, torch.Tensor, tuple[int, float]]:
    """:func:`~.base.draw` from the gated mixture of the draft's ``row`` (logits [V]) and the pointer's copy.

    ``gate`` is the drafter's trained :class:`~spec_core.model.draft_networks.CopyGate`, reading the draft's
    ``state`` [H] where the row was read off and the match's evidence; ``in_head`` [V] is the mask of the head the
    draft proposes from. Returns (token, q or None when greedy, q of the token, log q as the row a later policy or
    verifier reads, the pointer's offer: (its token, g), (−1, 0.0) where it had none).
    """
    found = pointer.candidate()
    if found is None:
        return (*draw(row, sampling, generator), row, (-1, 0.0))
    logp = torch.log_softmax(row, -1)
    evidence = pointer_evidence(logp, found, in_head).to(row.device)
    g = float(gate(state.float(), evidence))
    # temperature 1: what a later policy or verifier reads. Softmax, not exp(logp), and log q from logp, not
    # log(q): the elementwise exp of −inf and log of 0 (the tokens off the head) take a slow path, ten times a
    # softmax over the same row (0.5 ms a drafted token here)
    mixed = rules.copy_mix(torch.softmax(row, -1), found[0], g)
    log_mixed = rules.copy_mix_log(logp, mixed, found[0], g)
    if sampling.greedy:
        token = int(mixed.argmax())
        return token, None, float(mixed[token]), log_mixed, (found[0], g)
    q = rules.copy_mix(
        rules.warp_probs(row[None], sampling.temperature, sampling.top_k, sampling.top_p)[0], found[0], g
    )
    token = int(rules.sample(q[None], generator)[0])
    return token, q, float(q[token]), log_mixed, (found[0], g)
