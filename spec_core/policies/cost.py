"""``cost`` — the draft length that this machine's pass costs favour, round by round (docs/ALGORITHMS.md §5).

A round that drafts γ tokens whose chance of being kept, each given the ones before it, is a_1..a_γ adds on average
1 + Σ_i Π_{j≤i} a_j tokens (Leviathan et al. 2023, arXiv 2211.17192, §3.1, with a per-position a) and costs one
target pass over γ + 1 tokens plus its draft forwards (:class:`~spec_core.core.cost_model.CostProfile`, the one cost
model). The policy drafts one more token while some longer draft, its tokens assumed as likely as the last one,
would add more tokens per millisecond than stopping now. On a CPU a pass over 8 tokens costs far more than one, so
it stops early unless the evidence is strong; on an accelerator, where a pass over 64 tokens costs about one, it
drafts long.

The a_i are the drafter's own estimates (:attr:`~spec_core.policies.base.DraftSoFar.keep_estimates`): a lookup
draft's match evidence (:mod:`spec_core.drafters.lookup`), or a draft network's probability of its token, which
on this pair is calibrated (docs/PACER.md). A copied token costs no draft forward; a network's costs one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs
from spec_core.policies.base import DraftSoFar, number

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

MAX_LEN = 16


class CostLength:
    """Draft while a longer draft is worth more tokens per millisecond than stopping (``cost`` or ``cost:max=N``)."""

    prefix: ClassVar[str] = "cost"
    about: ClassVar[str] = "drafts while the expected tokens per millisecond rise, at this machine's pass costs"
    examples: ClassVar[tuple[str, ...]] = ("cost",)
    reads_costs: ClassVar[bool] = True  # built with the run's cost profile (data; spec_core/core/cost_tables.py)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "cost",
            "the length policy of lookup and hybrid: it drafts one more token while a longer draft is worth "
            "more tokens per millisecond at this machine's pass costs.",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        return (
            "Draft length: the cost policy drafts one more token while the drafter's estimates that it is kept make "
            "a longer draft worth more tokens per millisecond at this machine's pass costs (a copied token is "
            "free to draft, a model-drafted one costs a draft pass)."
        )

    def __init__(self, profile: CostProfile, max_len: int = MAX_LEN):
        self.profile, self.max_len = profile, max_len
        self.stop_reason = ""
        self.expected: float | None = None  # the expected tokens of the round as drafted (1 + Σ Π a)

    @classmethod
    def parse(cls, arg: str | None) -> int:
        if arg is None:
            return MAX_LEN
        key, eq, value = arg.partition("=")
        if key.strip() != "max" or not eq:
            raise SpecScopeError(f"cost takes max=N (the longest draft), e.g. cost:max=8; got {arg!r}")
        max_len = number(value.strip(), int, "cost:max")
        if not 1 <= max_len <= 64:
            raise SpecScopeError(f"cost:max=N needs 1 <= N <= 64, got {max_len}")
        return max_len

    @classmethod
    def build(cls, max_len: int, pair: ModelPair | None = None, costs: CostProfile | None = None) -> CostLength:
        if costs is None:
            raise SpecScopeError("the cost policy prices its lengths with the run's cost profile; none was given")
        return cls(costs, max_len)

    def next_chunk(self, so_far: DraftSoFar) -> int:
        drafted = len(so_far.tokens)
        limit = min(self.max_len, so_far.budget)
        if drafted >= limit:
            self.stop_reason = "max" if drafted >= self.max_len else "budget"
            return 0
        if not drafted:
            return 1  # nothing to judge before the first draft
        a = np.clip(np.asarray(so_far.keep_estimates, dtype=float), 0.0, 1.0)
        if so_far.parents is not None:  # a tree is drafted whole (the hybrid's branched round): its expectation only
            self.expected = 1.0 + tree_expected(a, so_far.parents)
            self.stop_reason = "branched"
            return 0
        sources = so_far.sources or ["model"] * drafted
        forwards = sum(s == "model" for s in sources)
        kept = np.cumprod(a)
        self.expected = 1.0 + float(kept.sum())
        now = self.expected / float(self.profile.round_ms(drafted + 1, forwards))
        more = np.arange(1, limit - drafted + 1)  # longer drafts, each next token as likely as the last
        gain = kept[-1] * np.cumsum(np.power(a[-1], more))
        extra_forwards = more * (sources[-1] == "model")
        later = (self.expected + gain) / self.profile.round_ms(drafted + 1 + more, forwards + extra_forwards)
        if later.max() > now:
            return 1
        self.stop_reason = "cost"
        return 0

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        trace: dict[str, Any] = {"costs": self.profile.name}
        if self.expected is not None:
            trace["expected_tokens"] = round(self.expected, 3)
        return trace


def tree_expected(estimates: np.ndarray, parents: list[int]) -> float:
    """The drafts a tree's round keeps on average: Σ over nodes of the product of the estimates on its path, each
    node's estimate its chance of being kept once its parent is (siblings exclusive: at most one is kept)."""
    reach = np.empty(len(parents))
    for node, parent in enumerate(parents):  # parents come before their children
        reach[node] = estimates[node] * (reach[parent] if parent >= 0 else 1.0)
    return float(reach.sum())
