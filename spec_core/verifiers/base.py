"""The verifier protocol: which drafted tokens to accept (docs/ALGORITHMS.md §2).

A verifier reads one round's :class:`~spec_core.core.types.RoundInputs` (draft tokens, the draft's distributions
and hidden states, the target's logits and, when it declares ``needs_target_hidden``, the target's last hidden
states) and returns a :class:`Verdict`: how many leading drafts to keep and the token that follows them.

A family is a class with ``prefix``, ``parse(arg) -> params`` (pure) and ``build(params, pair) -> verifier``
(may load a trained head matched to the pair). A verifier that also walks a draft that branches (a token tree:
``inputs.draft_parents`` set) says so with ``verifies_trees = True``; a method pairs a tree drafter with no other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from spec_core.core.types import RoundInputs, SamplingConfig


@dataclass(frozen=True)
class Verdict:
    accept_probs: torch.Tensor  # [γ] probability of accepting each draft given its prefix was accepted (a tree:
    #   given it was tried; 0 for a node never tried)
    accepted: int  # drafts kept: the leading ones of a chain, the path's length in a tree
    next_token: int  # recovered token (a draft after the kept ones was rejected) or bonus token
    target_probs: torch.Tensor | None  # [γ] p_i(x_i) for display; None: the engine derives the temperature-1
    # softmax from the round inputs when an event shows it (a greedy rule that never needed p pays nothing)
    trace: dict[str, Any] = field(default_factory=dict)  # verifier internals for the event (JSON-ready)
    path: tuple[int, ...] | None = None  # a tree: the accepted nodes, the root's child first; None: 0..accepted−1
    tried: tuple[int, ...] = ()  # a tree: every child tried, in order (their probabilities in accept_probs)

    @property
    def accepted_path(self) -> Sequence[int]:
        """The kept drafts' indices among the round's drafts: the path in a tree, ``0..accepted−1`` in a chain."""
        return self.path if self.path is not None else range(self.accepted)


class Verifier(Protocol):
    lossless: bool  # the output is distributed exactly as the target's
    needs_target_hidden: bool  # whether ``inputs.target_hidden`` must be filled (costs a little per round)
    # verifies_trees: bool  (optional, False when absent) whether it also walks a branching draft

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict: ...
