"""``lenient:L`` — the lossy baseline: accept x with min(1, p(x)/(L·q(x))), L ∈ (0, 1] (docs/ALGORITHMS.md §2).

Used as DIVERSED's "lossy" baseline (arXiv 2604.07622; the authors' code ``comeusr/diversed`` runs L = 0.5).
After a rejection the recovered token is drawn from norm(max(0, p − q)); the bonus token from p. L = 1 is
``lossless``.

Temperature 0 (``t0=``): with the greedy rule's one-hots p(x)/q(x) is 0 or 1, so leniency would change nothing;
the ``argmax`` definition (default) therefore reads the models' temperature-1 softmax and keeps a draft exactly
when the sampled rule would keep it for sure (p(x) ≥ L·q(x)); the next token is the target's argmax.
``t0=onehot`` is the greedy lossless rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core import rules, words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict
from spec_core.verifiers.static import DEFAULT_T0, parse_options, parse_unit

if TYPE_CHECKING:
    from spec_core.core.types import RoundEvent
    from spec_core.model.models import ModelPair


@dataclass(frozen=True)
class LenientParams:
    leniency: float  # L in (0, 1]
    t0: str = DEFAULT_T0


class LenientVerifier:
    """``lenient:L`` or ``lenient:L,t0=onehot``."""

    prefix: ClassVar[str] = "lenient"
    about: ClassVar[str] = "lossy: a lenient acceptance test"
    examples: ClassVar[tuple[str, ...]] = ()
    lossless = False
    recovered_title: ClassVar[str] = "recovered token: at the first rejection of a lossy rule"
    recovers: ClassVar[str] = (  # rules.verify_drafts with leniency L: the residual is still p's
        "norm(max(0, p − q)); the lenient test kept drafts the target alone might not have, so the output is no "
        "longer exactly the target's"
    )
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "lenient:L",
            "a lossy verifier: it accepts with min(1, p / (L·q)); it keeps more drafts and gives up exactness.",
        ),
    )
    needs_target_hidden = False

    def __init__(self, params: LenientParams):
        self.leniency, self.t0 = params.leniency, params.t0

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force" (DIVERSED's lossy baseline, arXiv 2604.07622)."""
        if temperature == 0:
            return (
                "Lenient rule at temperature 0 (default t0=argmax): keep a draft while p(x) ≥ L·q(x) under the "
                "models' softmax (or it is the target's argmax); then the target's argmax."
            )
        return (
            "Lenient (lossy) speculative sampling, DIVERSED's baseline: accept x with min(1, p(x)/(L·q(x))), "
            "L < 1 accepts more; recover from norm(max(0, p − q)). The output is no longer the target's."
        )

    @classmethod
    def reason(cls, span: words.TokenFacts, event: RoundEvent, temperature: float) -> str:
        """A token's tooltip sentence: kept while p(x) ≥ L·q(x) (greedy) or with min(1, p(x)/(L·q(x)))."""
        n = words.num
        if span.kind in ("target", "bonus", "recovered"):
            return ("Lossy verifier: " if span.kind == "recovered" else "") + words.target_tokens(
                span, event, temperature, words.TARGET_TOP, cls
            )
        L = event.verifier_trace.get("leniency")
        lenient = f"{L:g}" if isinstance(L, (int, float)) else "L"
        if temperature == 0 and event.verifier_trace.get("t0") == "onehot":
            return words.lossless_reason(span, event, temperature, cls)
        if temperature == 0:
            if span.kind == "accepted":
                return (
                    f"Lenient rule (temperature 0): kept because p(x) ≥ L·q(x) ({n(span.p)} ≥ {lenient} × "
                    f"{n(span.q)}) or it is the target's top token; lossy."
                )
            return (
                f"Lenient rule: p(x) < L·q(x) and not the target's top token; {words.piece(event.next_piece)} "
                "replaces it."
            )
        rule = f"min(1, p(x)/(L·q(x))) = min(1, {n(span.p)}/({lenient} × {n(span.q)})) = {n(span.accept_prob)}"
        verdict = "the random draw fell under it" if span.kind == "accepted" else "the random draw fell above it"
        return f"Lenient (lossy) rule: accepted with probability {rule}; {verdict}."

    @classmethod
    def parse(cls, arg: str | None) -> LenientParams:
        if not arg:
            raise SpecScopeError("lenient needs its leniency L in (0, 1], e.g. lenient:0.5 (1 = lossless)")
        value, _, rest = arg.partition(",")
        return LenientParams(parse_unit(value, "lenient:L", low_open=True), **parse_options(rest, ("t0",), "lenient"))

    @classmethod
    def build(cls, params: LenientParams, pair: ModelPair | None = None) -> LenientVerifier:
        return cls(params)

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict:
        x, logits = inputs.draft_tokens, inputs.target_logits  # [γ], [γ + 1, V]
        gamma = x.shape[0]
        idx = torch.arange(gamma, device=x.device)
        q = inputs.draft_probs.float()  # [γ, V]
        if sampling.greedy:
            p = torch.softmax(logits[:gamma].float(), -1)  # [γ, V]
            target_argmax = logits.argmax(-1)  # [γ + 1]
            if self.t0 == "onehot":
                a, accepted, nxt = rules.verify_greedy(target_argmax, x)
            else:
                keep = (target_argmax[:gamma] == x) | (p[idx, x] >= self.leniency * q[idx, x])  # [γ]
                a = keep.float()
                accepted = rules.leading_accepts(keep)
                nxt = int(target_argmax[accepted])
            expected = a
        else:
            full = rules.warp_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [γ + 1, V]
            p = full[:gamma]
            a, accepted, nxt = rules.verify_drafts(p, q, x, full[gamma], generator, self.leniency)
            expected = rules.expected_acceptance(p, q, self.leniency)
        p_x, q_x = p[idx, x], q[idx, x]
        trace = {
            "p_x": p_x.tolist(),
            "q_x": q_x.tolist(),
            "accept_prob": a.tolist(),
            "expected_accept": expected.tolist(),
            "leniency": self.leniency,
            "t0": self.t0,
        }
        return Verdict(a, accepted, nxt, p_x, trace)
