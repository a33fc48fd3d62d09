"""Drafts on disk: ``assets/drafts/NAME.safetensors`` (trainable weights only) + ``NAME.json`` (its card:
design, config, training data, results, and the sha256 of the weights file)."""

from __future__ import annotations

from pathlib import Path

from torch import nn
from transformers import LlamaForCausalLM

from spec_core.core.assets import DRAFTS_DIR, available, load_asset, save_asset
from spec_core.core.errors import SpecScopeError
from spec_core.model.draft_networks import FeatureDraft, build_standalone, trainable_state


def save_draft(draft: nn.Module, name: str, card: dict, directory: Path = DRAFTS_DIR) -> Path:
    """Write ``NAME.safetensors`` + ``NAME.json``; the card gets the weights' sha256."""
    return save_asset(trainable_state(draft), name, card, directory)


def available_drafts(directory: Path = DRAFTS_DIR) -> list[str]:
    return available(directory)


def load_draft(target: LlamaForCausalLM, name: str, directory: Path = DRAFTS_DIR) -> tuple[nn.Module, dict]:
    """Build the draft described by card ``name`` around ``target`` and load its weights (hash-checked)."""
    state, card = load_asset(name, directory, "draft")
    design, layers = card["design"], int(card["num_layers"])
    if design == "standalone":
        draft: nn.Module = build_standalone(target, layers, init_from_target=False)
    elif design == "feature":
        draft = FeatureDraft(
            target,
            layers,
            init_from_target=False,
            head_size=int(card.get("head_size", 0)),
            feature_layers=tuple(card.get("feature_layers", ())),
            copy_evidence_size=len(card["copy"]["evidence"]) if card.get("copy") else 0,
        )
    else:
        raise SpecScopeError(f"draft {name!r}: unknown design {design!r}")
    missing, unexpected = draft.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith(("model.embed_tokens", "lm_head"))]
    if missing or unexpected:
        raise SpecScopeError(f"draft {name!r}: weights do not fit ({missing[:3]} missing, {unexpected[:3]} extra)")
    return draft.to(target.dtype).eval(), card
