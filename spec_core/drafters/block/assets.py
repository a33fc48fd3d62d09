"""Block drafters on disk: ``assets/block/LOSS.safetensors`` (bf16 trainable weights) + ``LOSS.json`` (card)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from spec_core.core.assets import BLOCK_DIR, load_asset, save_asset
from spec_core.core.errors import SpecScopeError
from spec_core.drafters.block.network import BlockConfig, BlockDraftModel
from spec_core.model.draft_networks import CopyGate


def save_block_model(model: BlockDraftModel, name: str, card: dict, directory: Path = BLOCK_DIR) -> Path:
    """Write ``NAME.safetensors`` (bf16 trainable weights) + ``NAME.json`` (card with config and sha256)."""
    card = {**card, "design": "block", "config": asdict(model.config)}
    return save_asset(model.trainable_state(), name, card, directory)


def load_block_model(target, name: str, directory: Path = BLOCK_DIR) -> tuple[BlockDraftModel, dict]:
    """Build the block drafter of card ``name`` around ``target`` and load its weights (hash-checked)."""
    hint = f"train it with `python -m spec_core train block --loss {name}`"
    state, card = load_asset(name, directory, "block drafter", hint)
    cfg = dict(card["config"])
    config = BlockConfig(**{**cfg, "target_layers": tuple(cfg["target_layers"])})
    if config.hidden_size != target.config.hidden_size:
        raise SpecScopeError(f"block drafter {name!r} was trained for hidden size {config.hidden_size}")
    model = BlockDraftModel(config, target.model.embed_tokens, target.lm_head)
    if card.get("copy"):  # a copying drafter (``train copy``): its gate reads the state and the match's evidence
        model.copy_gate = CopyGate(config.hidden_size, len(card["copy"]["evidence"]))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("rotary")]
    if missing or unexpected:
        raise SpecScopeError(f"block drafter {name!r}: weights do not fit ({missing[:3]}, {unexpected[:3]})")
    return model.to(next(target.parameters()).dtype).eval(), card
