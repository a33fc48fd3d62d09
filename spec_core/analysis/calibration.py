"""``python -m spec_core analyze calibration``: is each shipped draft's own confidence Π q calibrated?

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274) trains a
pre-verification layer because the draft's probabilities are assumed overconfident. This command tests that premise
on every draft SpecScope ships (docs/PACER.md, "Is the draft's confidence calibrated?"; docs/ALGORITHMS.md §1):

- **drafts**: the feature draft and the standalone draft, each drafting ``fixed:8`` (the window PACER's rounds are
  recorded with), and every block drafter (``block:LOSS``: one forward drafts its whole block);
- **rounds**: generated now, lossless, on held-out prompts (default: the first 12 of ``prompts/specscope.jsonl``,
  which no draft, block drafter or head trained on), at each temperature (0 = greedy);
- **predictor**: per drafted token, Π_{j≤i} q_j, the product of the draft's probabilities of its own drafted tokens
  up to it (:func:`spec_core.heads.metrics.prefix_confidence`). q is what the engine records
  (``RoundEvent.draft_probs``): at T > 0 the warped distribution the token was drawn from (temperature, and
  ``--top-p``); at T = 0 the draft's argmax, whose q in the rule is a point mass, so the draft's temperature-1
  softmax probability of it stands in (what ``confidence:T`` and the rounds asset read);
- **label**: that token and every one before it in the round were kept (i ≤ accepted), as PACER's head is trained;
- **columns**: ECE and its reliability bins, mean Π q against the share kept (``gap`` > 0: overconfident), the
  verdict (:func:`spec_core.heads.metrics.confidence_verdict`), AUC; the same at the first drafted token (the
  decision that matters most); and beside each ECE the one a perfectly calibrated predictor would show on the same
  scores from sampling alone (``ece_noise``, :func:`spec_core.heads.metrics.ece_noise`).

Each cell's rounds are cached in ``--work-dir`` (a rerun with the same settings reads them); ``--json`` writes the
summary the app's "which pre-verifier?" lesson reads (``assets/results/calibration.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch

from spec_core.core.cli_args import add_threads
from spec_core.core.errors import SpecScopeError
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.methods import split_methods
from spec_core.heads.metrics import calibration_summary, prefix_confidence
from spec_core.model.models import load_pair
from spec_core.serve.prompts import load_prompts

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

CHAIN_DRAFTS = ("feature", "standalone")  # the pair's own drafts, drafting a chain token by token
CHAIN_WINDOW = 8  # fixed:8: the window PACER's rounds are recorded with (its head scores positions 1..8)
DEFAULT_PROMPTS = "prompts/specscope.jsonl"  # held out from every draft's and head's training data
COLUMNS = [
    "draft",
    "method",
    "temperature",
    "prompts",
    "rounds",
    "tokens",
    "ece",
    "ece_noise",
    "mean_predicted",
    "kept_rate",
    "gap",
    "verdict",
    "auc",
    "auc_first",
    "ece_first",
    "ece_first_noise",
    "mean_predicted_first",
    "kept_first",
]


def all_drafts() -> tuple[str, ...]:
    """Every shipped draft by the name this command takes: the chain drafts, then ``block:LOSS`` per shipped loss."""
    return (*CHAIN_DRAFTS, *block_drafts())


def block_drafts() -> tuple[str, ...]:
    """``block:LOSS`` for every shipped block drafter's loss."""

    return tuple(f"block:{loss}" for loss in BLOCK_LOSSES)


def parse_drafts(text: str) -> list[str]:
    """``feature,standalone,block,block:dpace`` → draft names (``block`` = every block drafter), in order, once."""
    known = all_drafts()
    out: list[str] = []

    for name in split_methods(text):
        names = list(block_drafts()) if name == "block" else [name]
        for n in names:
            if n not in known:
                raise SpecScopeError(f"unknown draft {n!r}: choose from {', '.join(('block', *known))}")
            if n not in out:
                out.append(n)
    if not out:
        raise SpecScopeError("--drafts is empty")
    return out


def parse_temperatures(text: str) -> list[float]:
    """``0,0.7`` → [0.0, 0.7] (each ≥ 0, at least one)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            t = float(part)
        except ValueError as err:
            raise SpecScopeError(f"--temperatures: {part!r} is not a number") from err
        if not t >= 0:
            raise SpecScopeError(f"--temperatures: {t} is below 0")
        out.append(t)
    if not out:
        raise SpecScopeError("--temperatures is empty")
    return out


def method_of(draft: str) -> tuple[str, str]:
    """(the pair's draft asset to load, the method that drafts with it)."""
    if draft in CHAIN_DRAFTS:
        return draft, f"fixed:{CHAIN_WINDOW}"
    return "feature", draft  # a block drafter reads the target's layers: the pair's own draft is not used


def record_rounds(
    pair: ModelPair, method: str, prompts: list[str], max_new_tokens: int, temperature: float, top_p: float, seed: int
) -> list[tuple[list[float], int, int]]:
    """(q of each drafted token, accepted, prompt index) per drafted round of each prompt's generation."""

    out = []
    for j, prompt in enumerate(prompts):
        sampling = SamplingConfig(temperature, top_p if temperature > 0 else 1.0, 0, seed + j)
        run = Generation(pair, prompt, method, max_new_tokens, sampling, display=False)
        out += [(list(e.draft_probs), e.accepted, j) for e in run.rounds() if e.draft_len]
    return out


def cell_path(work_dir: Path, draft: str, temperature: float, top_p: float, n: int, max_new: int, dtype: str) -> Path:
    name = f"{draft.replace(':', '-')}_T{temperature:g}_p{top_p:g}_{n}x{max_new}_{dtype}.json"
    return work_dir / name


def summarize_cell(rounds: list[tuple[list[float], int, int]]) -> dict:
    """One draft × temperature: the calibration of Π q over its rounds."""
    scores, labels, positions = prefix_confidence([(q, a) for q, a, _ in rounds])
    return {"rounds": len(rounds), **calibration_summary(scores, labels, positions)}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze calibration", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--drafts",
        default="feature,standalone,block",
        help="comma-separated: feature, standalone, block (every block drafter) or block:LOSS (default: all)",
    )
    ap.add_argument("--temperatures", default="0,0.7", help="comma-separated sampling temperatures (0 = greedy)")
    ap.add_argument("--top-p", type=float, default=1.0, help="nucleus of the sampled rounds (1 = plain temperature)")
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS, help="JSON lines with id, category, prompt (held out)")
    ap.add_argument("--limit", type=int, default=12, help="only the first N prompts (0 = all)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0, help="prompt j of a sampled cell draws with seed + j")
    ap.add_argument("--dtype", default="float32", help="precision of the pair (default float32: exact arithmetic)")
    ap.add_argument("--work-dir", default="runs/calibration", help="each cell's recorded rounds (resumable)")
    ap.add_argument("--out", default="runs/calibration.csv", help="the table (CSV)")
    ap.add_argument(
        "--json", default=None, help="also write the summary with its bins (e.g. assets/results/calibration.json)"
    )
    add_threads(ap, 1)
    return ap


def load_prompt_texts(path: str, limit: int) -> list[str]:
    if not Path(path).is_file():
        raise SpecScopeError(f"--prompts: no such file {path}")
    texts = [p["prompt"] for p in load_prompts(path)][: limit or None]
    if not texts:
        raise SpecScopeError(f"--prompts: {path} holds no prompts")
    return texts


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    drafts, temperatures = parse_drafts(args.drafts), parse_temperatures(args.temperatures)
    if args.max_new_tokens < 1:
        raise SpecScopeError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if not 0 < args.top_p <= 1:
        raise SpecScopeError(f"--top-p must be in (0, 1], got {args.top_p}")
    texts = load_prompt_texts(args.prompts, args.limit)
    torch.set_num_threads(args.threads)

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cells = []
    for draft in drafts:
        asset, method = method_of(draft)
        for t in temperatures:
            path = cell_path(work, draft, t, args.top_p, len(texts), args.max_new_tokens, args.dtype)
            if path.exists():
                saved = json.loads(path.read_text(encoding="utf-8"))["rounds"]
                rounds = [(list(q), int(a), int(j)) for q, a, j in saved]
            else:
                start = time.perf_counter()
                pair = load_pair("embedded", draft=asset, dtype=args.dtype)
                rounds = record_rounds(pair, method, texts, args.max_new_tokens, t, args.top_p, args.seed)
                path.write_text(json.dumps({"method": method, "rounds": rounds}), encoding="utf-8")
                print(f"{draft} T={t:g}: {len(rounds)} rounds in {time.perf_counter() - start:.0f} s", flush=True)
            summary = summarize_cell(rounds)
            cells.append({"draft": draft, "method": method, "temperature": t, "prompts": len(texts), **summary})
    table = pd.DataFrame(cells)[COLUMNS]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    pd.set_option("display.width", 200)
    print(table.to_string(index=False))
    print(f"wrote {args.out}")
    if args.json:
        write_summary(Path(args.json), cells, args, argv)
        print(f"wrote {args.json}")
    return 0


def write_summary(path: Path, cells: list[dict], args: argparse.Namespace, argv: list[str] | None) -> None:
    """The summary the app's lesson reads: settings, the command, the date and commit, one entry per cell."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = ""
    doc = {
        "about": "calibration of each shipped draft's own confidence Π q (docs/PACER.md)",
        "command": "python -m spec_core analyze calibration " + " ".join(argv or []),
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "settings": {
            "prompts": args.prompts,
            "limit": args.limit,
            "max_new_tokens": args.max_new_tokens,
            "top_p": args.top_p,
            "dtype": args.dtype,
            "seed": args.seed,
            "chain_window": CHAIN_WINDOW,
        },
        "cells": cells,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
