"""``static:W`` — verification against a static ensemble ν = W·p + (1 − W)·q (docs/ALGORITHMS.md §2).

DIVERSED ("DIVERSED: Relaxed Speculative Decoding via Dynamic Ensemble Verification", arXiv 2604.07622) calls
this the static ensemble; Yin et al. (arXiv 2411.00841) show it lies on the linear Pareto front between
rejection rate W·TV(p, q) and bias TV(ν, p) = (1 − W)·TV(p, q). Speculative sampling run with ν in place of p
(accept x with min(1, ν(x)/q(x)), recover from norm(max(0, ν − q)) = norm(max(0, p − q))) emits exactly ν at
every drafted position; the bonus token still comes from p. W = 1 is ``lossless``; W = 0 keeps every draft.

Temperature 0 has two definitions (``t0=``, see docs/DIVERSED.md for the one the Pareto sweep chose):

- ``argmax`` (default): deterministic greedy decoding of ν built from the models' temperature-1 softmax —
  accept while x_i == argmax ν_i, then argmax ν_i at the first mismatch;
- ``onehot``: p and q are the greedy rule's one-hots — a draft that differs from the target's argmax is kept
  with probability 1 − W, else the target's argmax replaces it.

:class:`EnsembleVerifier` is shared with ``diversed``, which only changes where the weight comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core import rules, words
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict

if TYPE_CHECKING:
    from spec_core.core.types import RoundEvent
    from spec_core.model.models import ModelPair

T0_MODES = ("argmax", "onehot")
DEFAULT_T0 = "argmax"


def parse_options(text: str, allowed: tuple[str, ...], family: str) -> dict[str, str]:
    """``"t0=onehot,head=x"`` → ``{"t0": "onehot", "head": "x"}``; unknown or repeated keys raise."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in allowed or key in out or not value:
            raise SpecScopeError(f"{family}: bad option {item!r}; options: {', '.join(k + '=...' for k in allowed)}")
        out[key] = value
    if "t0" in out and out["t0"] not in T0_MODES:
        raise SpecScopeError(f"{family}: t0 must be one of {T0_MODES} (the temperature-0 rule), got {out['t0']!r}")
    return out


def parse_unit(text: str, what: str, low_open: bool = False) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise SpecScopeError(f"{what} must be a number, got {text!r}") from err
    if not (0.0 < value <= 1.0 if low_open else 0.0 <= value <= 1.0):
        raise SpecScopeError(f"{what} must be in {'(0, 1]' if low_open else '[0, 1]'}, got {text!r}")
    return value


@dataclass(frozen=True)
class StaticParams:
    weight: float  # W, the target's share of ν
    t0: str = DEFAULT_T0  # temperature-0 definition: "argmax" | "onehot"


class EnsembleVerifier:
    """Speculative verification against ν = w_i·p_i + (1 − w_i)·q_i, with w_i from :meth:`weights`."""

    lossless = False
    needs_target_hidden = False
    t0: str = DEFAULT_T0
    recovered_title: ClassVar[str] = "recovered token: drawn from ν's residual at the first rejection (lossy)"
    recovers: ClassVar[str] = (  # rules.verify_drafts with ν in place of p: the residual is ν's
        "ν's residual norm(max(0, ν − q)), where ν = w·p + (1 − w)·q is the mix the drafts were checked against "
        "(ν − q = w·(p − q)); each drafted position so emits ν, not the target's p"
    )

    @classmethod
    def reason(cls, span: words.TokenFacts, event: RoundEvent, temperature: float) -> str:
        """A token's tooltip sentence: the drafts are checked against ν = w·p + (1 − w)·q instead of p."""
        if span.kind in ("target", "bonus", "recovered"):
            top = "the most likely token of ν = w·p + (1 − w)·q" if span.kind == "recovered" else ""
            return ("Lossy verifier: " if span.kind == "recovered" else "") + words.target_tokens(
                span, event, temperature, top or words.TARGET_TOP, cls
            )
        i = span.position - 1
        w, nu = words.trace_at(event, "w", i), words.trace_at(event, "nu_x", i)
        n = words.num
        mix = f"ν = w·p + (1 − w)·q with w = {n(w)} (ν(x) = {n(nu)})"
        onehot = event.verifier_trace.get("t0") == "onehot"
        if temperature == 0 and onehot:
            if span.kind == "accepted":
                return (
                    f"Lossy rule (temperature 0, t0=onehot): kept because it is the target's top token, or else by a "
                    f"coin that keeps a draft with probability 1 − w = {n(None if w is None else 1 - w)}."
                )
            return "Lossy rule (t0=onehot): not the target's top token, and the coin (keep with 1 − w) said no."
        if temperature == 0:
            if span.kind == "accepted":
                return (
                    f"Lossy rule (temperature 0): kept because it is the most likely token of the mix {mix}; the "
                    "target alone might have chosen another."
                )
            return f"Lossy rule: the mix {mix} prefers {words.piece(event.next_piece)} here, which replaces it."
        rule = f"min(1, ν(x)/q(x)) = min(1, {n(nu)}/{n(span.q)}) = {n(span.accept_prob)}"
        verdict = "the random draw fell under it" if span.kind == "accepted" else "the random draw fell above it"
        return f"Lossy rule: checked against the mix {mix}, accepted with probability {rule}; {verdict}."

    def weights(self, inputs: RoundInputs) -> torch.Tensor:  # [γ] in [0, 1]
        raise NotImplementedError

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict:
        x, logits = inputs.draft_tokens, inputs.target_logits  # [γ], [γ + 1, V]
        gamma = x.shape[0]
        idx = torch.arange(gamma, device=x.device)
        w = self.weights(inputs).float().to(logits.device)  # [γ]
        q = inputs.draft_probs.float()  # [γ, V] warped q (temperature-1 softmax when greedy)
        if sampling.greedy:
            p = torch.softmax(logits[:gamma].float(), -1)  # [γ, V] for ν (argmax mode) and the display
            if self.t0 == "onehot":
                a, accepted, nxt = rules.verify_onehot_ensemble(inputs.target_argmax, x, w, generator)
                expected = a  # given the greedy draft, its acceptance probability is the whole expectation
            else:
                a, accepted, nxt = rules.verify_argmax_ensemble(rules.ensemble(p, q, w), x, int(logits[gamma].argmax()))
                expected = a
        else:
            full = rules.warp_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [γ + 1, V]
            p = full[:gamma]
            nu = rules.ensemble(p, q, w)  # [γ, V]
            a, accepted, nxt = rules.verify_drafts(nu, q, x, full[gamma], generator)
            expected = rules.expected_acceptance(nu, q)  # 1 − TV(q_i, ν_i)
        p_x, q_x = p[idx, x], q[idx, x]
        nu_x = w * p_x + (1.0 - w) * q_x
        trace = {
            "w": w.tolist(),
            "p_x": p_x.tolist(),
            "q_x": q_x.tolist(),
            "nu_x": nu_x.tolist(),
            "accept_prob": a.tolist(),
            "expected_accept": expected.tolist(),
            "t0": self.t0,
        }
        return Verdict(a, accepted, nxt, p_x, trace)


class StaticVerifier(EnsembleVerifier):
    """``static:W`` (W ∈ [0, 1]) or ``static:W,t0=onehot``."""

    prefix: ClassVar[str] = "static"
    about: ClassVar[str] = "lossy: verified against a fixed target/draft mix"
    examples: ClassVar[tuple[str, ...]] = ("fixed:4+static:0.7",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "static:W",
            "a lossy verifier: it checks drafts against a fixed mix ν = W·p + (1 − W)·q of target and draft; it "
            "keeps more drafts and gives up exactness.",
        ),
    )

    def __init__(self, params: StaticParams):
        self.weight, self.t0 = params.weight, params.t0

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force" (DIVERSED's static ensemble, arXiv 2604.07622)."""
        if temperature == 0:
            return (
                "Static ensemble at temperature 0 (docs/ALGORITHMS.md §2; default t0=argmax): the models' softmax "
                "are mixed, ν = W·p + (1 − W)·q, and a draft is kept while it is ν's most likely token; at the first "
                "mismatch ν's choice replaces it. W = 1 is the lossless greedy rule, W = 0 keeps every draft. "
                "(t0=onehot: a draft that differs from the target's argmax is kept with probability 1 − W.)"
            )
        return (
            "Static ensemble (DIVERSED, arXiv 2604.07622; Yin et al., arXiv 2411.00841): the drafts are verified "
            "against ν = W·p + (1 − W)·q instead of p — accept x with min(1, ν(x)/q(x)), recover from ν's "
            "residual norm(max(0, ν − q)) (ν − q = W·(p − q)). Each drafted position then emits exactly ν; "
            "acceptance is 1 − W·TV(p, q) on average."
        )

    @classmethod
    def parse(cls, arg: str | None) -> StaticParams:
        if not arg:
            raise SpecScopeError("static needs its weight W in [0, 1], e.g. static:0.7 (1 = lossless, 0 = keep all)")
        weight, _, rest = arg.partition(",")
        return StaticParams(parse_unit(weight, "static:W"), **parse_options(rest, ("t0",), "static"))

    @classmethod
    def build(cls, params: StaticParams, pair: ModelPair | None = None) -> StaticVerifier:
        return cls(params)

    def weights(self, inputs: RoundInputs) -> torch.Tensor:
        return torch.full((inputs.gamma,), self.weight, device=inputs.target_logits.device)
