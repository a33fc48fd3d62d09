"""``lossless`` — standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023, arXiv 2302.01318).

The output has exactly the target's distribution; at temperature 0 it accepts while x_i == argmax p_i and the
next token is the target's argmax (docs/ALGORITHMS.md §0). A draft that branches (a token tree) is walked with
the multi-candidate rule of :mod:`spec_core.verifiers.tree` (docs/ALGORITHMS.md §4), lossless too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core import rules, words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict
from spec_core.verifiers.tree import verify_tree

if TYPE_CHECKING:
    from spec_core.core.types import RoundEvent
    from spec_core.model.models import ModelPair


class LosslessVerifier:
    """Standard speculative sampling; greedy at temperature 0 (accept while x_i == argmax p_i)."""

    prefix: ClassVar[str] = "lossless"
    about: ClassVar[str] = "the lossless rule: the target's own text"
    recovered_title: ClassVar[str] = words.LOSSLESS_RECOVERED_TITLE
    recovers: ClassVar[str] = words.LOSSLESS_RECOVERS  # where a recovered token is drawn from at T > 0, in words
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "lossless",
            "the verification rule that keeps the target's output distribution exactly (greedy: accept "
            "a draft iff it is the target's top token).",
        ),
    )
    examples: ClassVar[tuple[str, ...]] = ()
    lossless = True
    needs_target_hidden = False
    verifies_trees = True

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force" (docs/ALGORITHMS.md §0)."""
        if temperature == 0:
            return (
                "Lossless verification at temperature 0: a draft token is accepted exactly when it is the "
                "target's own most likely token (p(x) is the largest); at the first mismatch the target's choice "
                "replaces it (the recovered token), and if all pass the target adds one more (the bonus token)."
            )
        return (
            "Lossless speculative sampling (Leviathan et al. 2023, arXiv 2211.17192; Chen et al. 2023, "
            "arXiv 2302.01318): accept draft x with probability min(1, p(x)/q(x)); at the first rejection draw the "
            "recovered token from norm(max(0, p − q)); if all pass, sample a bonus token from p. The output has "
            "exactly the target's distribution."
        )

    @classmethod
    def reason(cls, span: words.TokenFacts, event: RoundEvent, temperature: float) -> str:
        """A token's tooltip sentence: the greedy or sampled rule on a chain, EAGLE-2's walk on a token tree."""
        if event.tree is None:
            return words.lossless_reason(span, event, temperature, cls)
        if span.kind in ("target", "bonus", "recovered"):
            top = "the target's own most likely token after the accepted path"
            return words.target_tokens(span, event, temperature, top, cls)
        if temperature == 0:
            if span.kind == "accepted":
                return (
                    "On the tree's accepted path: at its parent this candidate equals the target's most likely "
                    "token (greedy walk down the tree)."
                )
            return (
                "A candidate the target tried and rejected: its most likely token here is "
                f"{words.piece(event.next_piece)}."
            )
        if span.kind == "accepted":
            return (
                f"On the tree's accepted path: tried at its node and accepted with probability "
                f"{words.num(span.accept_prob)} (the target's p′(x), renormalised after any sibling it rejected)."
            )
        return f"Tried at its node and rejected (it was accepted with probability {words.num(span.accept_prob)})."

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
