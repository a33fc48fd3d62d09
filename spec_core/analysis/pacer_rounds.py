"""The rounds PACER's ``t=auto`` replays (:mod:`spec_core.policies.pacer_tuning`), scored by the shipped heads.

PACER (arXiv 2602.01274). ``python -m spec_core.analysis.pacer_rounds runs/pacer_tune/feature`` reads the shards of
``python -m spec_core train pacer --simulate-only --prompt-seed 5151`` (rounds drafted with ``fixed:8`` on
training prompts), scores every drafted token with the pair's shipped pre-verifiers (the hybrid and the paper
head, at b = 1, 2, 4; and the draft's own Π q) and writes ``assets/results/pacer-rounds-<draft>.{safetensors,json}``: each round's drafted
and kept counts and â per token, with the heads' sha256 (a retrained head must be scored again).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import save_file

from spec_core.analysis.preverifier import head_call_ms, head_scorer, rounds_seen_in_training, shipped_heads
from spec_core.core.assets import HEADS_DIR, file_sha256
from spec_core.heads.preverifier import BlockPreVerifier
from spec_core.model.models import load_pair
from spec_core.policies.pacer_heads import DRAFT_CUMPROB
from spec_core.policies.pacer_tuning import RESULTS_DIR, prediction_key, rounds_name
from spec_core.train.pacer import load_data, token_embeddings

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


def write_rounds(
    shards: Path, pair: ModelPair, out_dir: Path = RESULTS_DIR, blocks=(1, 2, 4), head_ms: dict | None = None
) -> Path:
    """Score the simulated rounds in ``shards`` with the shipped pre-verifiers for ``pair``'s draft and write the
    asset (tensors + card). Only rounds and â are kept: a few hundred kB. ``head_ms``: each head's call price to
    record (the shipped rounds' own, for a comparison that is the same on any machine); None times each head here."""

    paths = sorted(shards.glob("shard_*.safetensors"))
    if not paths:
        raise FileNotFoundError(f"no shard_*.safetensors in {shards}: run `train pacer --simulate-only` first")
    data = load_data(paths)
    heads = shipped_heads(pair, HEADS_DIR)  # `pacer`'s (the paper head), the hybrid
    # rounds of a prompt a shipped head trained on are left out: every row of the head comparison is held out
    seen, why = rounds_seen_in_training(data, shards, [card for _, card in heads.values()])
    keep = ~seen if seen is not None else torch.ones(len(data["round_gamma"]), dtype=torch.bool)
    tokens = torch.repeat_interleave(keep, data["round_gamma"].long())
    data = {k: v[keep] if k.startswith("round_") else v[tokens] for k, v in data.items()}  # per round, per token
    gamma, accepted = data["round_gamma"].long(), data["round_accepted"].long()
    tensors = {"gamma": gamma.to(torch.int16), "accepted": accepted.to(torch.int16)}
    every = torch.ones(len(data["position"]), dtype=torch.bool)
    heads_sha, heads_ms = {}, {}
    for name, (head, _) in heads.items():
        heads_sha[name] = file_sha256(HEADS_DIR / f"{name}.safetensors")
        if head_ms is not None and name in head_ms:
            heads_ms[name] = float(head_ms[name])
        else:
            heads_ms[name] = round(head_call_ms(head, int(data["hidden"].shape[-1]))(1), 4)
        if isinstance(head, BlockPreVerifier) and head.cfg.use_token and "token_embed" not in data:  # the paper head
            data["token_embed"] = token_embeddings(pair, data["token"])
        score = head_scorer(head, data)
        for b in blocks:
            tensors[f"predicted/{prediction_key(name, b)}"] = score(every, b).float().to(torch.float16)
    # the draft's own Π_{j≤i} q_j, for the head comparison's confidence row (spec_core/policies/pacer_heads.py)
    tensors[f"predicted/{DRAFT_CUMPROB}"] = data["prob_features"][:, 1].exp().to(torch.float16)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{rounds_name(pair.draft_design)}.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    card = {
        "kind": "pacer-tuning-rounds",
        "paper": "PACER, arXiv 2602.01274",
        "draft_sha256": (pair.draft_card or {}).get("sha256"),
        "heads": heads_sha,
        "head_ms": heads_ms,
        "rounds": int(gamma.shape[0]),
        "drafted_tokens": int(gamma.sum()),
        "source": f"{len(paths)} shards of `train pacer --simulate-only` (training prompts, never prompts/*.jsonl)",
        "left_out": why or f"{int((~keep).sum())} rounds of prompts a shipped head trained on",
        "blocks": list(blocks),
    }
    path.with_suffix(".json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    """``python -m spec_core.analysis.pacer_rounds SHARDS_DIR``: score and write the rounds asset."""

    if len(argv) != 1:
        print("usage: python -m spec_core.analysis.pacer_rounds SHARDS_DIR (from `train pacer --simulate-only`)")
        return 2
    torch.set_num_threads(1)
    where = write_rounds(Path(argv[0]), load_pair("embedded", "cpu", "bfloat16"))
    print(f"wrote {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
