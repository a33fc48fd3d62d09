"""Drafters: who proposes the tokens (protocol in :mod:`.base`), and their registry.

- :mod:`.standalone` — any causal LM with its own KV cache;
- :mod:`.feature` — EAGLE-style, on the target's features (networks in :mod:`.networks`, assets in :mod:`.assets`);
- :mod:`.block` — DFlash-style parallel block drafter (network, runtime and assets apart);
- :mod:`.tree` — EAGLE-2's dynamic token tree, on the feature or the standalone draft;
- :mod:`.lookup` — prompt lookup (n-gram) drafts, and the hybrid of lookup and the pair's draft;
- :class:`~.base.NoDrafter` — proposes nothing (plain decoding).

A family is a class with ``prefix``, ``parse(arg) -> params`` (pure: validates a method part, loads nothing) and
``build(params, pair) -> drafter``, as for policies and verifiers. ``named`` says whether a method names it
(``block:LOSS``, ``tree:...``); the pair's own draft and the empty drafter are implied by the method.
``drafts_trees`` says whether its drafts branch, so that only a verifier that ``verifies_trees`` is paired with it.
``own_length`` says whether it sets its own draft length (a block, a tree, nothing) or a policy does (``cost`` when
the method names none); ``reads_draft_states`` whether its drafts carry a draft network's states for a learned
policy or verifier to read. ``about`` is the glossary's sentence and ``examples`` the names offered in menus: the
method list, the glossary and the menus derive from this registry, so a new drafter is one class and one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.core.types import PartSpec
from spec_core.drafters.base import DraftChunk, Drafter, NoDrafter, RoundDraft, draw
from spec_core.drafters.lookup import HybridDraft, LookupDraft
from spec_core.drafters.pair_draft import PairDraft
from spec_core.drafters.tree import TreeShape, make_tree_drafter

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

__all__ = [
    "DRAFTERS",
    "DraftChunk",
    "Drafter",
    "NoDrafter",
    "RoundDraft",
    "is_copied",
    "draw",
    "make_drafter",
    "parse_drafter",
    "source_part",
]


class BlockDraft:
    """``block:LOSS`` — a DFlash-style block drafter trained with LOSS: a whole block from one forward."""

    prefix: ClassVar[str] = "block"
    named: ClassVar[bool] = True
    drafts_trees: ClassVar[bool] = False
    own_length: ClassVar[bool] = True
    reads_draft_states: ClassVar[bool] = True
    about: ClassVar[str] = "a parallel block drafter"
    examples: ClassVar[tuple[str, ...]] = tuple(f"block:{loss}" for loss in BLOCK_LOSSES[:3])
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "block:LOSS",
            "a block drafter proposes a whole block in one forward pass (DFlash); LOSS is how it was "
            "trained: uniform, decay (DFlash's) or dpace (D-PACE, weights on the positions the verifier "
            "is likely to reach).",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        return "Draft: a parallel block drafter proposes a whole block in one forward pass (DFlash, arXiv 2602.06036)."

    @classmethod
    def parse(cls, arg: str | None) -> str:
        if arg not in BLOCK_LOSSES:
            raise SpecScopeError(f"block drafters: block:{{{','.join(BLOCK_LOSSES)}}}, got 'block:{arg or ''}'")
        return arg

    @classmethod
    def build(cls, loss: str, pair: ModelPair) -> Drafter:
        from spec_core.drafters.block.runtime import make_block_drafter  # transformers' modeling code (~2 s)

        return make_block_drafter(pair, loss)


class TreeDraft:
    """``tree`` or ``tree:nodes=N,depth=D,topk=K`` — EAGLE-2's dynamic token tree on the pair's draft."""

    prefix: ClassVar[str] = "tree"
    named: ClassVar[bool] = True
    drafts_trees: ClassVar[bool] = True
    own_length: ClassVar[bool] = True
    reads_draft_states: ClassVar[bool] = True
    about: ClassVar[str] = "a token tree verified in one pass"
    examples: ClassVar[tuple[str, ...]] = ("tree",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "tree",
            "a token tree (EAGLE-2): the draft proposes several candidates per position; one target pass "
            "checks every branch at once and the longest branch the target agrees with is kept.",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force" (EAGLE-2's dynamic tree, docs/ALGORITHMS.md §4)."""
        if temperature == 0:
            return (
                "Tree: the draft proposes its top candidates at every level (EAGLE-2's dynamic tree) and the target "
                "checks them all in one pass, walking down while a child equals its own choice."
            )
        return (
            "Tree: at each node the target tries the draft's candidates in turn, accepting one with its own "
            "probability p′(x) and otherwise removing it from p′; if none passes it samples from what is left. The "
            "output is distributed exactly as the target's."
        )

    @classmethod
    def parse(cls, arg: str | None) -> TreeShape:
        return TreeShape.parse(arg)

    @classmethod
    def build(cls, shape: TreeShape, pair: ModelPair) -> Drafter:
        return make_tree_drafter(pair, shape)


DRAFTERS: dict[str, type[Any]] = {
    cls.prefix: cls for cls in (PairDraft, NoDrafter, BlockDraft, TreeDraft, LookupDraft, HybridDraft)
}


def parse_drafter(text: str) -> PartSpec:
    """``"tree:depth=3"`` → a validated :class:`PartSpec` (nothing is loaded)."""
    return PartSpec.parse(text, DRAFTERS, "drafter")


def make_drafter(pair: ModelPair, part: PartSpec | str = "default", costs: CostProfile | None = None) -> Drafter:
    """The drafter for one generation, built with the loaded pair (and the run's cost profile, for one that
    prices its sources: the hybrid)."""
    part = parse_drafter(part) if isinstance(part, str) else part
    return part.build(DRAFTERS, pair, costs)


def source_part(source: str) -> type[Any]:
    """The registered drafter whose drafts carry ``source`` (``RoundEvent.draft_sources``; an event without them:
    the pair's draft), which says what such a draft is (``source_name``, ``copies``, ``source_note``); the pair's
    draft for a tag no drafter writes."""
    source = source or PairDraft.source
    return next((cls for cls in DRAFTERS.values() if getattr(cls, "source", None) == source), PairDraft)


def is_copied(source: str) -> bool:
    """Whether a draft of ``source`` was copied from the text (no draft model ran: q is a point mass on it)."""
    return bool(getattr(source_part(source), "copies", False))
