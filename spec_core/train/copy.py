"""Train a feature draft's copy gate: a pointer-generator over prompt lookup's candidate (:mod:`spec_core.drafters.copying`).

``python -m spec_core train copy --data-dir DIR --draft assets/drafts/feature.json --name feature --out-dir OUT``

1. examples — on token-id shards, the target's features are recomputed online (:mod:`.features`); the frozen draft
   predicts each answer position from the target's feature of the one before (its first drafted token), over the
   trimmed head widened by the text's own tokens so far, as the drafter proposes; a :class:`Pointer` over the text
   so far gives the copy candidate and its evidence. The teacher is the target's greedy token;
2. loss — the pointer-generator's likelihood of the teacher (See, Liu & Manning, arXiv 1704.04368):
   ``−log((1 − g) · p_draft(y) + g · [copy = y])``, over the positions that have a candidate; the draft is frozen,
   only the gate (one row: the draft's feature and the evidence) learns;
3. held-out check — greedy agreement with the target at the first, second and third drafted token (the later ones
   on the draft's own features, as the draft trainer's unrolled passes), of the draft alone, of the copy alone, of
   the gated draft, and of an oracle that always picks the right one of the two; split by whether the copy is
   right (the split of ``scripts/draft_confidence.py``);
4. output — the draft with its gate (``NAME.safetensors`` + ``NAME.json``); the card is the base draft's with
   ``copy`` (evidence, training, held-out results) and ``base_sha256`` added, written here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from spec_core.core.cli_args import add_threads, apply_threads
from spec_core.core.errors import SpecScopeError
from spec_core.drafters.copying import Pointer, copy_evidence
from spec_core.model.draft_assets import load_draft, save_draft
from spec_core.model.draft_networks import FeatureDraft
from spec_core.model.models import load_target
from spec_core.train.copy_block import evaluate_block_copy, train_block_copy
from spec_core.train.copy_gate import (
    CopyTrainConfig,
    Examples,
    agreement,
    design_of,
    gate_of,
    gated_card,
    gated_right,
    split_paths,
    train_gate,
)
from spec_core.train.data import TARGET_LAYERS, read_shards, split_sequences
from spec_core.train.draft import collate, data_layer_positions, text_extras
from spec_core.train.features import OnlineFeatures

__all__ = [
    "CopyTrainConfig",
    "Examples",
    "agreement",
    "evaluate_copy",
    "gated_right",
    "main",
    "train_copy",
    "train_gate",
]


def _logp_of(logp_cols: torch.Tensor, where_col: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` the draft's log-probability of ``token`` ``[B, T]`` (−30 where it is outside the widened head
    or there is none, −1)."""
    col = where_col[token.clamp(min=0)]
    got = logp_cols.gather(-1, col.clamp(min=0)[..., None])[..., 0]
    return torch.where((col >= 0) & (token >= 0), got, torch.tensor(-30.0)).clamp(min=-30.0)


@torch.no_grad()
def build_examples(draft, target, seqs, layers, special_ids, depths: int = 1, batch_size: int = 8) -> list[Examples]:
    """The rows of :class:`Examples` for every answer position of ``seqs`` (see the module's step 1), one
    :class:`Examples` per drafted depth 1..``depths``: depth k reads the features the draft predicted at depth
    k − 1 (the trainer's unrolled passes, :meth:`spec_core.train.draft.Distiller.predict`), the text the target's."""
    features = OnlineFeatures(target, list(TARGET_LAYERS) if layers else (), torch.bfloat16, batch_size)
    head = target.lm_head.weight.float()
    vocab = head.shape[0]
    in_head = torch.zeros(vocab, dtype=torch.bool)
    in_head[draft.vocab_subset if draft.vocab_subset.numel() else slice(None)] = True
    never = torch.tensor(sorted(special_ids), dtype=torch.long)
    banned = frozenset(int(i) for i in special_ids)
    rows: list[dict[str, list[torch.Tensor]]] = [{k: [] for k in Examples.__dataclass_fields__} for _ in range(depths)]
    for i in range(0, len(seqs), batch_size):
        tokens, hidden, weight, layer_hidden = collate(seqs[i : i + batch_size], "cpu", 0.0, layers, features)
        answer = weight == 1.0
        choice = (hidden.float() @ head.T).argmax(-1)  # [B, T] the target's greedy next token
        # the pointer's candidate at every answer position: the text up to and with j (the draft predicts j + 1)
        cand = torch.full_like(tokens, -1)
        match = torch.zeros(*tokens.shape, 3)  # n, run, recurred
        for b in range(tokens.shape[0]):
            where = answer[b].nonzero().flatten().tolist()
            if not where:
                continue
            seq = tokens[b].tolist()
            pointer = Pointer(banned)
            pointer.extend(seq[: where[0]])
            for j in where:
                pointer.extend([seq[j]])
                found = pointer.candidate()
                if found is not None:
                    cand[b, j] = found[0]
                    match[b, j] = torch.tensor(found[1:], dtype=torch.float32)
        ids, seen = text_extras(tokens, in_head, never)  # the text's own ids join the head, as the drafter widens it
        cols = torch.cat([draft.vocab_subset if draft.vocab_subset.numel() else torch.arange(vocab), ids])
        where_col = torch.full((vocab,), -1, dtype=torch.long)  # a token's column, −1 outside the widened head
        where_col[cols] = torch.arange(len(cols))
        lh = layer_hidden[:, :-1].float() if layer_hidden is not None else None
        feats = draft.target_features(hidden[:, :-1].float(), lh)
        pred = draft(feats, tokens[:, 1:]).float()  # [B, T − 1, H] depth 1
        has = answer & (cand >= 0)
        for depth in range(depths):
            if depth:  # the draft's own features of the positions before
                pred = draft(torch.cat([feats[:, :1], pred[:, :-1]], dim=1), tokens[:, 1:]).float()
            out = F.pad(pred, (0, 0, 1, 0))  # [B, T, H] aligned with the target's positions
            logits = out @ head[cols].T  # [B, T, C] only the columns the drafter can propose
            logits[..., len(cols) - len(ids) :].masked_fill_(~seen, float("-inf"))
            logp_cols = torch.log_softmax(logits, -1)
            del logits
            top_logp, top_col = logp_cols.max(-1)
            top = cols[top_col]
            logp_copy = _logp_of(logp_cols, where_col, cand)
            evidence = copy_evidence(
                match[..., 0], match[..., 1], match[..., 2], logp_copy, top_logp, top == cand, ~in_head[cand.clamp(0)]
            )
            evidence[~has] = 0.0
            r = rows[depth]
            r["features"].append(out[answer].half())
            r["evidence"].append(evidence[answer])
            r["has_copy"].append(has[answer])
            r["copy_right"].append((cand == choice)[answer])
            r["draft_right"].append((top == choice)[answer])
            r["copy_is_top"].append((top == cand)[answer])
            r["logp_teacher"].append(_logp_of(logp_cols, where_col, choice)[answer])
            r["logp_copy"].append(logp_copy[answer])
            r["logp_top"].append(top_logp[answer])
    return [Examples(**{k: torch.cat(v) for k, v in r.items()}) for r in rows]


def main(argv: list[str] | None = None) -> int:
    d = CopyTrainConfig(Path("."), Path("."))
    ap = argparse.ArgumentParser(prog="python -m spec_core train copy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="a folder of token-id shards (spec_core.train.data)")
    ap.add_argument("--train-shards", default=d.train_shards, help="the shards to train on, a slice of the sorted list")
    ap.add_argument(
        "--heldout-shards", default=d.heldout_shards, help="the held-out shards, a slice of the sorted list"
    )
    ap.add_argument(
        "--draft", type=Path, default=d.draft, help="the card (NAME.json) of the feature draft or block drafter to gate"
    )
    ap.add_argument("--name", default=d.name, help="the gated draft's asset name (default: the base's)")
    ap.add_argument("--out-dir", type=Path, default=None, help="where the gated draft is written (to train one)")
    ap.add_argument("--epochs", type=int, default=d.epochs)
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--max-sequences", type=int, default=None, help="at most this many training sequences")
    ap.add_argument("--depths", type=int, default=d.depths, help="drafted depths to train on (held out: 1 to 3)")
    ap.add_argument("--anchors", type=int, default=d.anchors, help="a block drafter's: whole blocks per sequence")
    ap.add_argument(
        "--evaluate",
        action="store_true",
        help="train nothing: print a gated --draft's held-out agreement at drafted depths 1 to 3 (JSON)",
    )
    add_threads(ap)
    args = ap.parse_args(argv)
    if args.out_dir is None and not args.evaluate:
        ap.error("--out-dir is needed to train a gate (or --evaluate a gated draft)")
    cfg = CopyTrainConfig(
        **{k: getattr(args, k) for k in CopyTrainConfig.__dataclass_fields__ if k != "out_dir"},
        out_dir=args.out_dir or Path("."),
    )
    try:
        block = design_of(cfg) == "block"
        if block:
            apply_threads(cfg.threads)
        if args.evaluate:
            print(json.dumps((evaluate_block_copy if block else evaluate_copy)(cfg), indent=1))
        else:
            print(f"wrote {(train_block_copy if block else train_copy)(cfg)}")
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    return 0


def _load(cfg: CopyTrainConfig, target, special_ids):
    """(draft in float32, its card, the target, its special ids, the training shards, the held-out shards)."""
    apply_threads(cfg.threads)
    card_path = Path(cfg.draft).with_suffix(".json")
    design_of(cfg)
    train_paths, held_paths = split_paths(cfg)
    if target is None:
        target, tokenizer = load_target("cpu", torch.float32)
        special_ids = set(tokenizer.all_special_ids)
    target = target.float().eval().requires_grad_(False)
    loaded, card = load_draft(target, card_path.stem, card_path.parent)
    if card.get("design") != "feature" or not isinstance(loaded, FeatureDraft):
        raise SpecScopeError(f"{cfg.draft}: a {card.get('design')} draft; a copy gate is for a feature draft")
    return loaded.float().eval(), card, target, set(special_ids or ()), train_paths, held_paths


def evaluate_copy(cfg: CopyTrainConfig, target=None, special_ids: set[int] | None = None) -> dict:
    """A gated draft's held-out agreement at drafted depths 1..3 (the module's step 3), training nothing."""
    draft, card, target, special, _, held_paths = _load(cfg, target, special_ids)
    if draft.copy_gate is None:
        raise SpecScopeError(f"{cfg.draft}: this draft has no copy gate (its card has no 'copy')")
    gate = draft.copy_gate.float()
    layers = data_layer_positions(cfg.data_dir, tuple(draft.feature_layers))
    helds = build_examples(draft, target, list(split_sequences(read_shards(held_paths, ()))), layers, special, 3)
    out = {f"depth{k + 1}": agreement(held, gate_of(gate, held)) for k, held in enumerate(helds)}
    return {"draft_sha256": card.get("sha256"), "heldout_shards": [p.stem for p in held_paths], **out}


def train_copy(cfg: CopyTrainConfig, target=None, special_ids: set[int] | None = None) -> Path:
    """Train the gate of ``cfg.draft`` and write the gated draft; ``target`` (default: the embedded one, float32)
    and its ``special_ids`` may be passed in (tests)."""
    draft, card, target, special, train_paths, held_paths = _load(cfg, target, special_ids)
    layers = data_layer_positions(cfg.data_dir, tuple(draft.feature_layers))
    started = time.perf_counter()
    seqs = list(split_sequences(read_shards(train_paths, ())))
    if cfg.max_sequences:
        random.Random(cfg.seed).shuffle(seqs)
        seqs = seqs[: cfg.max_sequences]
    trains = build_examples(draft, target, seqs, layers, special, cfg.depths)
    train = Examples(*(torch.cat(parts) for parts in zip(*(dataclasses.astuple(e) for e in trains))))
    helds = build_examples(draft, target, list(split_sequences(read_shards(held_paths, ()))), layers, special, 3)
    print(f"{len(train)} training rows, {len(helds[0])} held-out positions ({time.perf_counter() - started:.0f} s)")
    gate = train_gate(train, draft.config.hidden_size, cfg.epochs, cfg.lr, cfg.seed)
    results = {
        "heldout": {f"depth{k + 1}": agreement(held, gate_of(gate, held)) for k, held in enumerate(helds)},
        "train": agreement(train, gate_of(gate, train)),
    }
    print(json.dumps(results["heldout"], indent=1))
    draft.copy_gate = gate
    training = {"sequences": len(seqs), "positions": len(train), "depths": cfg.depths}
    out = gated_card(card, cfg, train_paths, held_paths, training, results, started)
    return save_draft(draft.to(torch.bfloat16), cfg.name or card_path_stem(cfg), out, cfg.out_dir)


def card_path_stem(cfg: CopyTrainConfig) -> str:
    """The base draft's own asset name (its card's file name)."""
    return Path(cfg.draft).with_suffix(".json").stem


if __name__ == "__main__":
    raise SystemExit(main())
