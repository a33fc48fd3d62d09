"""Verifiers: which drafted tokens to accept (ALGORITHMS.md §2).

A verifier receives the target's logits over [last token, x_1..x_γ] and the draft's distributions, and returns
a :class:`Verdict`. ``lossless`` is the standard rule (Leviathan et al. 2023; Chen et al. 2023): the output
has exactly the target's distribution. A new verifier is one class with ``parse`` + one line in
:data:`VERIFIERS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import torch

from spec_core import rules
from spec_core.errors import SpecScopeError
from spec_core.types import SamplingConfig


@dataclass(frozen=True)
class Verdict:
    accept_probs: torch.Tensor  # [γ] probability of accepting each draft given its prefix was accepted
    accepted: int  # leading drafts kept
    next_token: int  # recovered token (accepted < γ) or bonus token (accepted == γ)
    target_probs: torch.Tensor  # [γ] p_i(x_i) for display
    trace: dict = field(default_factory=dict)


class Verifier(Protocol):
    name: str
    lossless: bool

    def verify(
        self,
        target_logits: torch.Tensor,  # [γ + 1, V]
        draft_probs: torch.Tensor | None,  # [γ, V] q (None at temperature 0: one-hot at draft_tokens)
        draft_tokens: torch.Tensor,  # [γ]
        sampling: SamplingConfig,
        generator: torch.Generator | None,
    ) -> Verdict: ...


class LosslessVerifier:
    """Standard speculative sampling; greedy at temperature 0 (accept while x_i == argmax p_i)."""

    prefix: ClassVar[str] = "lossless"
    name = "lossless"
    lossless = True

    @classmethod
    def parse(cls, arg: str | None) -> LosslessVerifier:
        if arg is not None:
            raise SpecScopeError("lossless takes no parameter")
        return cls()

    def verify(self, target_logits, draft_probs, draft_tokens, sampling, generator) -> Verdict:
        gamma = draft_tokens.shape[0]
        idx = torch.arange(gamma, device=draft_tokens.device)
        if sampling.greedy:
            shown = torch.softmax(target_logits[:gamma], dim=-1)[idx, draft_tokens]  # [γ] model confidence
            a, accepted, nxt = rules.verify_greedy(target_logits.argmax(-1), draft_tokens)
            return Verdict(a, accepted, nxt, shown)
        p = rules.warp_probs(target_logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [γ+1, V]
        a, accepted, nxt = rules.verify_drafts(p[:gamma], draft_probs, draft_tokens, p[gamma], generator)
        return Verdict(a, accepted, nxt, p[idx, draft_tokens])


VERIFIERS: dict[str, type] = {cls.prefix: cls for cls in (LosslessVerifier,)}


def make_verifier(spec: str) -> Verifier:
    head, _, arg = spec.partition(":")
    if head not in VERIFIERS:
        raise SpecScopeError(f"unknown verifier {head!r}; known: {sorted(VERIFIERS)}")
    return VERIFIERS[head].parse(arg or None)
