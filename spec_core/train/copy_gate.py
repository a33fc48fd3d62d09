"""The copy gate's training, shared by its two trainers: the rows, the loss, the held-out scores and the card.

A pointer-generator gate (See, Liu & Manning, "Get To The Point", arXiv 1704.04368) moves g of a draft's q onto the
token a prompt lookup would copy (:mod:`spec_core.drafters.copying`). ``python -m spec_core train copy`` trains one on a
frozen feature draft (:mod:`.copy`) or a frozen block drafter (:mod:`.copy_block`); both build :class:`Examples`, train
with :func:`train_gate`, score with :func:`agreement` and write :func:`gated_card`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.drafters.copying import EVIDENCE
from spec_core.model.draft_networks import CopyGate
from spec_core.train.data import shard_paths

PAPER = "See, Liu & Manning, Get To The Point (arXiv 1704.04368): a pointer-generator gate over prompt lookup"


@dataclass
class Examples:
    """One row per answer position: the draft's feature and the copy's evidence (where there is a candidate)."""

    features: torch.Tensor  # [N, H] float16, the draft's predicted feature
    evidence: torch.Tensor  # [N, E]
    has_copy: torch.Tensor  # [N] bool: the pointer has a candidate
    copy_right: torch.Tensor  # [N] bool: the candidate is the target's token
    draft_right: torch.Tensor  # [N] bool: the draft's own first choice is the target's token
    copy_is_top: torch.Tensor  # [N] bool: the draft's first choice is the candidate
    logp_teacher: torch.Tensor  # [N] the draft's log-probability of the target's token
    logp_copy: torch.Tensor  # [N] the draft's log-probability of the candidate (−30 without one)
    logp_top: torch.Tensor  # [N] the draft's log-probability of its first choice

    def __len__(self) -> int:
        return int(self.features.shape[0])


def gated_right(ex: Examples, g: torch.Tensor) -> torch.Tensor:
    """[N] bool: whether the gated draft's greedy token is the target's (the copy wins where its mixed probability
    ``g + (1 − g) p(copy)`` is at least ``(1 − g) p(top)``)."""
    copy_wins = ex.has_copy & (ex.copy_is_top | (g + (1 - g) * ex.logp_copy.exp() >= (1 - g) * ex.logp_top.exp()))
    return torch.where(copy_wins, ex.copy_right, ex.draft_right)


def gate_of(gate: CopyGate, ex: Examples) -> torch.Tensor:
    with torch.no_grad():
        g = gate(ex.features.float(), ex.evidence)
    return torch.where(ex.has_copy, g, torch.zeros_like(g))


def agreement(ex: Examples, g: torch.Tensor) -> dict:
    """Held-out greedy agreement at the first drafted token: overall and split by whether the copy is right."""
    gated = gated_right(ex, g)
    out = {"positions": len(ex), "with_copy": round(float(ex.has_copy.float().mean()), 4)}
    for name, right in (
        ("draft", ex.draft_right),
        ("copy", ex.copy_right),
        ("gated", gated),
        ("oracle", ex.draft_right | ex.copy_right),
    ):
        out[name] = round(float(right.float().mean()), 4)
        out[f"{name}_where_copy_right"] = round(float(right[ex.copy_right].float().mean()), 4)
        out[f"{name}_elsewhere"] = round(float(right[~ex.copy_right].float().mean()), 4)
    out["copy_right_share"] = round(float(ex.copy_right.float().mean()), 4)
    out["mean_gate_with_copy"] = round(float(g[ex.has_copy].mean()), 4) if bool(ex.has_copy.any()) else 0.0
    return out


def train_gate(ex: Examples, hidden: int, epochs: int, lr: float, seed: int, batch: int = 1024) -> CopyGate:
    """The gate that maximises the pointer-generator's likelihood of the target's tokens where there is a copy."""
    torch.manual_seed(seed)
    gate = CopyGate(hidden, len(EVIDENCE)).float()
    rows = ex.has_copy.nonzero().flatten()
    opt = torch.optim.Adam(gate.parameters(), lr=lr)
    for _ in range(epochs):
        for part in rows[torch.randperm(len(rows))].split(batch):
            g = gate(ex.features[part].float(), ex.evidence[part]).clamp(1e-6, 1 - 1e-6)
            p = (1 - g) * ex.logp_teacher[part].exp() + g * ex.copy_right[part].float()
            loss = -(p + 1e-8).log().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return gate.eval()


def slice_of(text: str, what: str) -> slice:
    try:
        start, _, stop = text.partition(":")
        return slice(int(start) if start else None, int(stop) if stop else None)
    except ValueError:
        raise SpecScopeError(f"{what} {text!r}: give a slice of the sorted shards, such as 108: or -4:") from None


@dataclass(frozen=True)
class CopyTrainConfig:
    data_dir: Path
    out_dir: Path
    draft: Path = Path("assets/drafts/feature.json")  # the card of the feature draft to gate
    name: str = ""  # the gated draft's asset name ("": the base's own)
    train_shards: str = "108:"  # slices of the sorted shards
    heldout_shards: str = "52:56"
    epochs: int = 4
    lr: float = 3e-3
    seed: int = 0
    max_sequences: int | None = None
    depths: int = 1  # drafted depths the gate trains on (1: the first drafted token; k reads the draft's own features)
    anchors: int = 16  # a block drafter's: blocks a sequence
    threads: int | None = None  # torch's own choice


def design_of(cfg: CopyTrainConfig) -> str:
    """The design its card gives ``--draft`` (``feature``, ``block``, ...); a clear error for a file that is none."""
    card_path = Path(cfg.draft).with_suffix(".json")
    if not card_path.is_file():
        raise SpecScopeError(f"--draft {str(cfg.draft)!r}: give a draft's card, NAME.json beside NAME.safetensors")
    try:
        card = json.loads(card_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SpecScopeError(f"--draft {str(cfg.draft)!r} is not a card (JSON): {err}") from None
    return str(card.get("design", "")) if isinstance(card, dict) else ""


def split_paths(cfg: CopyTrainConfig) -> tuple[list[Path], list[Path]]:
    """(training shards, held-out shards) of ``cfg``'s slices of the sorted shards, which must not overlap."""
    paths = shard_paths(cfg.data_dir)
    train_paths = paths[slice_of(cfg.train_shards, "--train-shards")]
    held_paths = paths[slice_of(cfg.heldout_shards, "--heldout-shards")]
    if not train_paths or not held_paths:
        raise SpecScopeError(f"no shards for {cfg.train_shards!r} or {cfg.heldout_shards!r} in {cfg.data_dir}")
    if set(train_paths) & set(held_paths):
        raise SpecScopeError("the training and held-out shards overlap")
    return train_paths, held_paths


def gated_card(
    card: dict, cfg: CopyTrainConfig, train_paths, held_paths, training: dict, results: dict, started: float
) -> dict:
    """The gated draft's card, written here: the base's card (less its name, weights and hash) with ``base_sha256`` and ``copy``: the method, the evidence, the training (``training`` adds the trainer's
    own counts to the shards and settings) and the held-out ``results``."""
    out = {k: v for k, v in card.items() if k not in ("name", "weights", "sha256")}
    out.update(
        base_sha256=card.get("sha256"),
        copy={
            "method": PAPER,
            "evidence": list(EVIDENCE),
            "training": {
                "data_dir": str(cfg.data_dir),
                "train_shards": [p.stem for p in train_paths],
                "heldout_shards": [p.stem for p in held_paths],
                **training,
                "epochs": cfg.epochs,
                "lr": cfg.lr,
                "seed": cfg.seed,
                "wall_s": round(time.perf_counter() - started, 1),
            },
            "results": results,
        },
    )
    return out
