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

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict

if TYPE_CHECKING:
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

    def __init__(self, params: StaticParams):
        self.weight, self.t0 = params.weight, params.t0

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
