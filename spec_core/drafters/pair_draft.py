"""The pair's own draft network as a drafter family (``default``): EAGLE-style features or a standalone LM,
drafting a chain token by token. Its own module so that a family built on it (``hybrid``,
:mod:`spec_core.drafters.lookup`) reaches it without climbing to the registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from spec_core.core.errors import SpecScopeError
from spec_core.drafters.base import Drafter
from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.standalone import StandaloneDrafter

if TYPE_CHECKING:
    from spec_core.model.draft_networks import FeatureDraft
    from spec_core.model.models import ModelPair


class PairDraft:
    """The pair's own draft network, drafting a chain token by token: EAGLE-style features, or a standalone LM."""

    prefix: ClassVar[str] = "default"
    named: ClassVar[bool] = False
    drafts_trees: ClassVar[bool] = False
    own_length: ClassVar[bool] = False
    reads_draft_states: ClassVar[bool] = True
    about: ClassVar[str] = "the pair's draft model"
    source: ClassVar[str] = "model"  # DraftChunk.source of its drafts: a draft network's
    source_name: ClassVar[str] = "draft model"  # that source in a legend
    copies: ClassVar[bool] = False
    glossary: ClassVar[tuple[tuple[str, str], ...]] = ()  # the glossary's "draft" says it
    examples: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse(cls, arg: str | None) -> None:
        if arg is not None:
            raise SpecScopeError("the pair's draft takes no parameter")

    @classmethod
    def build(cls, params: None, pair: ModelPair) -> Drafter:
        if pair.draft is None:
            raise SpecScopeError(f"the pair {pair.name!r} has no draft model; only 'ar' runs on it")
        if pair.draft_design == "feature":
            special = getattr(pair.tokenizer, "all_special_ids", None) or ()  # the template's markers
            return FeatureDrafter(cast("FeatureDraft", pair.draft), special)  # the feature design

        return StandaloneDrafter(pair.draft)
