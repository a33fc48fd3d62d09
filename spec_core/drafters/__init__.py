"""Drafters: who proposes the tokens (protocol in :mod:`.base`).

- :mod:`.standalone` — any causal LM with its own KV cache;
- :mod:`.feature` — EAGLE-style, on the target's features (networks in :mod:`.networks`, assets in :mod:`.assets`);
- :mod:`.block` — DFlash-style parallel block drafter (network, runtime and assets apart).
"""

from __future__ import annotations

from spec_core.drafters.base import DraftChunk, Drafter, draw
from spec_core.errors import SpecScopeError

__all__ = ["DraftChunk", "Drafter", "draw", "make_drafter"]


def make_drafter(pair, spec: str = "default") -> Drafter:
    """The drafter for a method: the pair's default draft network, or a block drafter (``block:LOSS``)."""
    if spec.startswith("block"):
        from spec_core.drafters.block.runtime import make_block_drafter

        return make_block_drafter(pair, spec)
    if pair.draft is None:
        raise SpecScopeError(f"the pair {pair.name!r} has no draft model; only 'ar' runs on it")
    if pair.draft_design == "feature":
        from spec_core.drafters.feature import FeatureDrafter

        return FeatureDrafter(pair.draft)
    from spec_core.drafters.standalone import StandaloneDrafter

    return StandaloneDrafter(pair.draft)
