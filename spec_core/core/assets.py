"""Trained parts on disk: ``NAME.safetensors`` (weights) + ``NAME.json`` (a card) in one folder per kind.

Every trained part — drafts (``assets/drafts``), block drafters (``assets/block``) and heads (``assets/heads``)
— is stored the same way: floating-point tensors in bfloat16 safetensors (never pickles), and a JSON card that
says how it was trained, on what, with what result, and carries the weights' sha256. Loading checks that hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from spec_core.core.errors import SpecScopeError

ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets"
DRAFTS_DIR = ASSETS_DIR / "drafts"
BLOCK_DIR = ASSETS_DIR / "block"
HEADS_DIR = ASSETS_DIR / "heads"


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def available(directory: Path) -> list[str]:
    """Names of the cards in ``directory`` (empty when the folder does not exist)."""
    return sorted(p.stem for p in Path(directory).glob("*.json"))


def save_asset(tensors: dict[str, torch.Tensor], name: str, card: dict, directory: Path) -> Path:
    """Write ``NAME.safetensors`` (floating tensors as bfloat16) + ``NAME.json``; the card gets the sha256."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / f"{name}.safetensors"
    data = {
        k: (v.detach().to(torch.bfloat16) if v.is_floating_point() else v.detach()).contiguous()
        for k, v in tensors.items()
    }
    save_file(data, str(weights))
    card = {**card, "name": name, "weights": weights.name, "sha256": file_sha256(weights)}
    (directory / f"{name}.json").write_text(json.dumps(card, indent=2) + "\n")
    return weights


def read_card(name: str, directory: Path, what: str = "asset", hint: str = "") -> dict:
    """The card of ``name``; a clear error naming what is available (and ``hint``: how to make it) otherwise."""
    path = Path(directory) / f"{name}.json"
    if not path.exists():
        extra = f"; {hint}" if hint else ""
        raise SpecScopeError(f"no {what} named {name!r} in {directory} (available: {available(directory)}){extra}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SpecScopeError(f"{what} {name!r}: its card {path.name} is not valid JSON ({err})") from err


def load_asset(name: str, directory: Path, what: str = "asset", hint: str = "") -> tuple[dict[str, torch.Tensor], dict]:
    """``(tensors, card)`` of ``name``, with the weights' sha256 checked against the card."""
    card = read_card(name, directory, what, hint)
    weights = Path(directory) / card.get("weights", f"{name}.safetensors")
    if not weights.exists():
        raise SpecScopeError(f"{what} {name!r}: weights file {weights} is missing{'; ' + hint if hint else ''}")
    if file_sha256(weights) != card.get("sha256"):
        raise SpecScopeError(f"{what} {name!r}: {weights.name} does not match the sha256 in its card")
    return load_file(str(weights)), card


def source_commit(root: Path | None = None) -> str:
    """The commit the code that trains an asset ran at (``git rev-parse HEAD``; ``+dirty`` when the tree had
    uncommitted changes), or ``"unknown"`` outside a git checkout: what a card's ``commit`` field records."""

    where = str(root or Path(__file__).resolve().parents[2])
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def cache_dir() -> Path:
    """Where SpecScope keeps what it measured or downloaded on this machine (``$SPECSCOPE_CACHE``)."""
    return Path(os.environ.get("SPECSCOPE_CACHE", Path.home() / ".cache" / "specscope"))
