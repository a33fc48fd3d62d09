"""``diversed`` — verification against a dynamic ensemble ν_t = w_t·p_t + (1 − w_t)·q_t (docs/ALGORITHMS.md §2).

"DIVERSED: Relaxed Speculative Decoding via Dynamic Ensemble Verification" (arXiv 2604.07622): w_t comes from a
trained ensemble head (:mod:`spec_core.heads.ensemble`) on the draft's and the target's last hidden states at
each drafted position, so the rule can follow the target where a token matters (w ≈ 1) and wave the draft
through where it does not (w ≈ 0). The verification itself is the static ensemble's (:mod:`.static`), at every
temperature and with the same temperature-0 definitions (``t0=argmax`` default, ``t0=onehot``).

``diversed`` uses the shipped head for the run's temperature (:func:`spec_core.heads.ensemble.head_for`, which
reads every head's band from its card): the greedy head ``assets/heads/diversed`` at temperature 0, trained
there under the ``argmax`` rule, and when sampling the sampled head whose band of training temperatures covers
T (the narrowest such, else the nearest band); ``diversed:head=NAME`` one head at every temperature. Each
round's trace names the head and the temperatures it serves. The head reads
the drafter's hidden states, so it only serves the drafter it was trained on (its card's ``drafter``): the
shipped head was trained on the pair's default (feature) draft, and ``block:LOSS+diversed`` is refused when the
method is built unless the head named was trained on that block drafter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.heads.ensemble import DEFAULT_HEAD, EnsembleHead, ShippedHead, head_drafter, head_for, load_head
from spec_core.verifiers.base import Verdict
from spec_core.verifiers.static import DEFAULT_T0, EnsembleVerifier, parse_options

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


def _drafter_words(drafter: str) -> str:
    return "the default draft" if drafter == "default" else drafter


@dataclass(frozen=True)
class DiversedParams:
    head: str = ""  # asset name in assets/heads ("" = the shipped head for the temperature: head_for)
    t0: str = DEFAULT_T0
    drafter: str = "default"  # whose hidden states the head reads: the method's drafter, set by parse_method


class DiversedVerifier(EnsembleVerifier):
    """``diversed`` / ``diversed:head=NAME,t0=onehot``: w_t from the ensemble head, per drafted token."""

    prefix: ClassVar[str] = "diversed"
    reads_draft_states: ClassVar[bool] = True  # its ensemble head reads the draft's hidden states
    about: ClassVar[str] = "lossy: a trained per-token target/draft mix (DIVERSED)"
    examples: ClassVar[tuple[str, ...]] = ("fixed:4+diversed",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "diversed",
            "DIVERSED: like static, but a trained head chooses the mixing weight w_t for each drafted "
            "token from both models' hidden states (w_t = 1 is lossless at that token).",
        ),
    )
    needs_target_hidden = True

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force", naming the shipped head this temperature picks."""
        t = temperature
        rule = (
            "greedy decoding of ν (keep a draft while it is argmax ν)" if t == 0 else "speculative sampling against ν"
        )
        shipped = head_for(t)  # the head `diversed` picks at this temperature, from the cards' bands
        return (
            "DIVERSED (arXiv 2604.07622): a trained ensemble head reads the draft's and the target's hidden states at "
            f"each drafted token and sets its own weight w_t, so ν_t = w_t·p_t + (1 − w_t)·q_t; then {rule}. "
            "w_t near 1 follows the target where a token matters, near 0 lets the draft through. "
            f"At temperature {t:g} `diversed` uses the shipped head {shipped.name}, trained and chosen at "
            f"{shipped.serves} (one head per band of temperatures; `diversed:head=NAME` picks another)."
        )

    def __init__(
        self,
        head: EnsembleHead,
        params: DiversedParams = DiversedParams(),
        load: Callable[[str], EnsembleHead] | None = None,
    ):
        self.head, self.t0, self.params = head, params.t0, params
        self.load = load  # name → head, for the shipped head of a temperature first met in verify (None: ``head``)
        self.chosen: dict[float, tuple[ShippedHead, EnsembleHead]] = {}  # temperature → its shipped head, loaded

    def pick(self, temperature: float) -> tuple[str, str]:
        """(head name, the temperatures it serves) for this run's ``temperature``; verifies with that head."""
        if self.params.head or self.load is None:
            return self.params.head or DEFAULT_HEAD, "every temperature (named by head=)"
        if temperature not in self.chosen:  # the cards are read once per temperature
            shipped = head_for(temperature, self.params.drafter)
            self.chosen[temperature] = shipped, self.load(shipped.name)
        shipped, self.head = self.chosen[temperature]
        return shipped.name, shipped.serves

    @classmethod
    def parse(cls, arg: str | None) -> DiversedParams:
        return DiversedParams(**parse_options(arg or "", ("head", "t0"), "diversed"))

    @classmethod
    def build(cls, params: DiversedParams, pair: ModelPair | None = None) -> DiversedVerifier:
        if pair is None:
            raise SpecScopeError("diversed needs the loaded model pair: its ensemble head is matched to the draft")
        load = functools.partial(cls._checked_head, pair, drafter=params.drafter)
        # the greedy head (or the named one) now, so a head trained on another drafter is refused at build time;
        # a sampled head when a round first runs at its temperature
        first = load(params.head or head_for(0.0, params.drafter).name)
        return cls(first, params, None if params.head else load)

    @staticmethod
    def _checked_head(pair: ModelPair, name: str, drafter: str = "default") -> EnsembleHead:
        """The head ``name``, refused unless it was trained on ``drafter``'s hidden states."""
        head, card = load_head(pair, name)
        trained_on = head_drafter(card)
        if trained_on != drafter:
            use = _drafter_words(trained_on) + (" (e.g. fixed:4+diversed)" if trained_on == "default" else "")
            policy = "fixed:4" if drafter == "default" else drafter
            raise SpecScopeError(
                f"diversed on {_drafter_words(drafter)}: ensemble head {name!r} was trained on "
                f"{_drafter_words(trained_on)}'s hidden states, so its w_t on these would be untrained guesses. "
                f"Use it with {use}, or train a head on these states (`python -m spec_core train diversed --policy "
                f"{policy} --name NAME`) and verify with diversed:head=NAME"
            )
        return head

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict:
        name, serves = self.pick(sampling.temperature)  # the head trained under this temperature's rule and band
        verdict = super().verify(inputs, sampling, generator)
        verdict.trace["head"], verdict.trace["head_serves"] = name, serves
        return verdict

    def weights(self, inputs: RoundInputs) -> torch.Tensor:
        if inputs.target_hidden is None:
            raise SpecScopeError("diversed reads the target's hidden states, but the round carries none")
        # the target's state at row i produced p_i, the distribution x_i is checked against
        return self.head(inputs.draft_hidden, inputs.target_hidden[: inputs.gamma]).detach()  # [γ]
