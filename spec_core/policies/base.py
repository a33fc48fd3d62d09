"""The draft-length policy protocol: how many tokens the draft proposes in a round (docs/ALGORITHMS.md §1).

A policy is asked, before each chunk of drafting, how many more tokens to draft (0 = stop and verify), and
hears each round's outcome afterwards. While drafting it sees what was drafted so far (:class:`DraftSoFar`)
and must stay within ``budget`` (tokens still allowed by ``max_new_tokens``); after verification it receives
the round's :class:`~spec_core.core.types.RoundInputs` and how many drafts were kept.

A family is a class with ``prefix``, ``parse(arg) -> params`` (pure: validates a method string, loads nothing)
and ``build(params, pair) -> policy`` (may load trained weights matched to the pair's draft).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs


@dataclass(frozen=True)
class DraftSoFar:
    """What the drafter produced so far in this round."""

    tokens: list[int]  # drafted token ids
    token_probs: list[float]  # the draft's own (temperature-1) probability of each drafted token
    hidden: list[torch.Tensor]  # the draft's hidden state per drafted token, [H_d] each (learned policies read it)
    budget: int  # tokens still allowed this round (max_new_tokens − generated − 1 for the target's token)
    sources: list[str] | None = None  # [γ] "model" (a draft network: one forward each) or "lookup" (copied: free)
    estimates: list[float] | None = None  # [γ] the drafter's estimate that each token is kept given the ones
    #   before it were (its parent, in a tree); None: ``token_probs`` stands in
    parents: list[int] | None = None  # [γ] a draft that branched: the draft each follows (−1: the pending token)

    @property
    def keep_estimates(self) -> list[float]:
        """[γ] P(x_i kept | x_1..x_{i−1} kept) as the drafter estimates it (its probability where it has no other)."""
        return list(self.estimates) if self.estimates is not None else list(self.token_probs)


class DraftLengthPolicy(Protocol):
    stop_reason: str  # why the last round's drafting stopped ("window", "threshold", "max", "budget", ...)

    def next_chunk(self, so_far: DraftSoFar) -> int:
        """How many tokens to draft next (0 = stop). Sets ``stop_reason`` when it returns 0."""

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        """The round's outcome: what was drafted and verified, and how many drafts were kept."""

    def trace(self) -> dict[str, Any]:
        """Internals to show in the round's event (JSON-ready)."""


def number(text: str, kind: type, what: str):
    """``kind(text)`` or a :class:`SpecScopeError` that names ``what``."""
    try:
        return kind(text)
    except ValueError as err:
        raise SpecScopeError(f"{what}: expected a {kind.__name__}, got {text!r}") from err
