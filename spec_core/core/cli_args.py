"""Command-line pieces every tool shares (one definition each, so ``--help`` says the same thing everywhere)."""

from __future__ import annotations

import argparse

import torch


def add_threads(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--threads N``: torch's CPU threads for this command (None or 0: torch's own choice, all cores)."""
    said = "torch's own choice" if not default else str(default)
    parser.add_argument("--threads", type=int, default=default, help=f"torch CPU threads (default: {said})")


def apply_threads(threads: int | None) -> None:
    """Set torch's CPU threads when ``--threads`` asked for a number."""
    if threads:
        torch.set_num_threads(int(threads))
