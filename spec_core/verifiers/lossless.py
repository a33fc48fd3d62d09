"""``lossless`` — standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023, arXiv 2302.01318).

The output has exactly the target's distribution; at temperature 0 it accepts while x_i == argmax p_i and the
next token is the target's argmax (docs/ALGORITHMS.md §0). A draft that branches (a token tree) is walked with
the multi-candidate rule of :mod:`spec_core.verifiers.tree` (docs/ALGORITHMS.md §4), lossless too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict
from spec_core.verifiers.tree import verify_tree

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


class LosslessVerifier:
    """Standard speculative sampling; greedy at temperature 0 (accept while x_i == argmax p_i)."""

    prefix: ClassVar[str] = "lossless"
    about: ClassVar[str] = "the lossless rule: the target's own text"
    recovered_title: ClassVar[str] = "recovered token: the target's own, at the first rejection"
    recovers: ClassVar[str] = (  # where a recovered token is drawn from at temperature > 0, in words
        "norm(max(0, p − q)), the part of the target's distribution the draft had under-covered, which keeps the "
        "output exactly the target's"
    )
    examples: ClassVar[tuple[str, ...]] = ()
    lossless = True
    needs_target_hidden = False
    verifies_trees = True

    @classmethod
    def parse(cls, arg: str | None) -> None:
        if arg is not None:
            raise SpecScopeError("lossless takes no parameter")

    @classmethod
    def build(cls, params: None = None, pair: ModelPair | None = None) -> LosslessVerifier:
        return cls()

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict:
        if inputs.draft_parents is not None:
            return verify_tree(inputs, sampling, generator)
        x, logits = inputs.draft_tokens, inputs.target_logits  # [γ], [γ + 1, V]
        gamma = x.shape[0]
        idx = torch.arange(gamma, device=x.device)
        if sampling.greedy:
            a, accepted, nxt = rules.verify_greedy(inputs.target_argmax, x)
            return Verdict(a, accepted, nxt, None)  # p(x) only for display: the engine derives it if shown
        p = rules.warp_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [γ + 1, V]
        a, accepted, nxt = rules.verify_drafts(p[:gamma], inputs.draft_probs, x, p[gamma], generator)
        return Verdict(a, accepted, nxt, p[idx, x])
