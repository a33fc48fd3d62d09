"""The verifier protocol: which drafted tokens to accept (docs/ALGORITHMS.md §2).

A verifier reads one round's :class:`~spec_core.types.RoundInputs` (draft tokens, the draft's distributions
and hidden states, the target's logits and, when it declares ``needs_target_hidden``, the target's last hidden
states) and returns a :class:`Verdict`: how many leading drafts to keep and the token that follows them.

A family is a class with ``prefix``, ``parse(arg) -> params`` (pure) and ``build(params, pair) -> verifier``
(may load a trained head matched to the pair).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from spec_core.types import RoundInputs, SamplingConfig


@dataclass(frozen=True)
class Verdict:
    accept_probs: torch.Tensor  # [γ] probability of accepting each draft given its prefix was accepted
    accepted: int  # leading drafts kept
    next_token: int  # recovered token (accepted < γ) or bonus token (accepted == γ)
    target_probs: torch.Tensor | None  # [γ] p_i(x_i) for display; None: the engine derives the temperature-1
    # softmax from the round inputs when an event shows it (a greedy rule that never needed p pays nothing)
    trace: dict[str, Any] = field(default_factory=dict)  # verifier internals for the event (JSON-ready)


class Verifier(Protocol):
    name: str
    lossless: bool  # the output is distributed exactly as the target's
    needs_target_hidden: bool  # whether ``inputs.target_hidden`` must be filled (costs a little per round)

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict: ...
