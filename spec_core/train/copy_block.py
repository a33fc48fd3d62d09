"""Train a block drafter's copy gate: the feature draft's pointer-generator (:mod:`spec_core.train.copy`) along a block.

``python -m spec_core train copy --draft assets/block/dpace.json --data-dir DIR --train-shards 148:156
--heldout-shards 144:148 --out-dir OUT`` (``train copy`` sends a block drafter's card here)

A parallel block drafter (DFlash, arXiv 2602.06036) drafts B − 1 positions from one forward, none of which sees the
tokens drafted before it, so it cannot carry a quote on; the pointer (:class:`~spec_core.drafters.copying.Pointer`)
can, reading the text with the block's drafted tokens so far. The gate (See, Liu & Manning, arXiv 1704.04368) reads
the drafter's state at the position and the match's evidence.

1. examples — on token-id shards, the target's layer states are recomputed online (:mod:`.features`); ``--anchors``
   blocks a sequence, each a whole block inside its answer; at block position k the frozen drafter's distribution,
   the pointer's candidate over the text up to a + k − 1 and the label a + k are the target's text, teacher-forced
   as :func:`spec_core.train.block.evaluate` scores a block: a drafted token counts only where those before it
   were kept, and then they are the text's;
2. loss — the pointer-generator likelihood of the label where the pointer has a candidate; only the gate learns;
3. held-out check — per block position: agreement of the drafter alone, the copy alone, the gated drafter, and the
   greedy τ estimate 1 + Σ_k P(positions 1..k all agree), alone and gated;
4. output — the drafter with its gate (``NAME.safetensors`` + ``NAME.json``); the card is the drafter's with
   ``copy`` and ``base_sha256`` added, written here.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from spec_core.drafters.block.assets import load_block_model, save_block_model
from spec_core.drafters.block.network import BlockDraftModel
from spec_core.drafters.copying import Pointer, copy_evidence
from spec_core.model.models import load_target
from spec_core.train import block as tb
from spec_core.train.copy_gate import Examples, agreement, gate_of, gated_card, gated_right, split_paths, train_gate
from spec_core.train.data import read_shards, split_sequences
from spec_core.train.features import OnlineFeatures

if TYPE_CHECKING:
    from spec_core.train.copy_gate import CopyTrainConfig


def block_sequences(paths: list[Path], block_size: int) -> list[tb.Sequence]:
    """The sequences of ``paths`` whose answer holds at least one whole block."""
    seqs = [tb.Sequence(t, a, None) for t, a, _, _ in split_sequences(read_shards(paths, ("hidden", "layer_hidden")))]
    return [s for s in seqs if len(s.tokens) - block_size >= s.anchor_range[0]]


def pointer_candidates(tokens: list[int], anchors: list[int], k_max: int, banned: frozenset[int]) -> torch.Tensor:
    """``[N, k_max, 4]``: per anchor a and block position k = 1..k_max, the pointer's (candidate, n, run, recurred)
    over ``tokens[: a + k]`` (candidate −1: no match). One pointer walks the anchors in order, cut back or grown."""
    out = torch.zeros(len(anchors), k_max, 4)
    out[..., 0] = -1
    pointer = Pointer(banned)
    for i in sorted(range(len(anchors)), key=lambda r: anchors[r]):
        a = anchors[i]
        if len(pointer) > a + 1:
            pointer.truncate(a + 1)
        pointer.extend(tokens[len(pointer) : a + 1])
        for k in range(k_max):
            found = pointer.candidate()
            if found is not None:
                out[i, k] = torch.tensor([float(x) for x in found])
            pointer.extend([tokens[a + k + 1]])
    return out


@torch.no_grad()
def block_examples(
    model: BlockDraftModel,
    seqs: list[tb.Sequence],
    features: OnlineFeatures,
    banned: frozenset[int],
    anchors: int,
    seed: int,
    batch_seqs: int = 8,
) -> list[Examples]:
    """One :class:`~spec_core.train.copy.Examples` per block position (module step 1); row r of each is the same
    block, so a block's positions can be chained (:func:`tau`)."""
    rng = random.Random(seed)
    size = model.config.block_size
    rows: list[dict[str, list[torch.Tensor]]] = [
        {k: [] for k in Examples.__dataclass_fields__} for _ in range(size - 1)
    ]
    for i in range(0, len(seqs), batch_seqs):
        part = seqs[i : i + batch_seqs]
        where = [[rng.randint(s.anchor_range[0], len(s.tokens) - size) for _ in range(anchors)] for s in part]
        batch = tb.make_batch(part, list(range(len(part))), where, size, features)
        layer_hidden, anchor_tokens, anchor, visible, labels, _ = batch
        with torch.autocast("cpu", dtype=torch.bfloat16):
            feats = model.project_context(layer_hidden)
            hidden = model.block_states(anchor_tokens, anchor, model.context_kv(feats), visible)[:, :, 1:]
        hidden = hidden.float()  # [S, N, K, H]
        logp = torch.log_softmax(model.logits(hidden).float(), -1)  # [S, N, K, V]
        top_logp, top = logp.max(-1)
        found = torch.stack([pointer_candidates(s.tokens.tolist(), w, size - 1, banned) for s, w in zip(part, where)])
        cand = found[..., 0].long()  # [S, N, K]
        has = cand >= 0
        logp_copy = torch.where(has, logp.gather(-1, cand.clamp(min=0)[..., None])[..., 0], torch.tensor(-30.0))
        logp_copy = logp_copy.clamp(min=-30.0)
        evidence = copy_evidence(
            found[..., 1], found[..., 2], found[..., 3], logp_copy, top_logp, top == cand, torch.zeros_like(has)
        )
        evidence[~has] = 0.0
        teacher = logp.gather(-1, labels[..., None])[..., 0].clamp(min=-30.0)
        del logp
        for k, r in enumerate(rows):
            r["features"].append(hidden[:, :, k].flatten(0, 1).half())
            r["evidence"].append(evidence[:, :, k].flatten(0, 1))
            r["has_copy"].append(has[:, :, k].flatten())
            r["copy_right"].append((cand == labels)[:, :, k].flatten())
            r["draft_right"].append((top == labels)[:, :, k].flatten())
            r["copy_is_top"].append((top == cand)[:, :, k].flatten())
            r["logp_teacher"].append(teacher[:, :, k].flatten())
            r["logp_copy"].append(logp_copy[:, :, k].flatten())
            r["logp_top"].append(top_logp[:, :, k].flatten())
    return [Examples(**{k: torch.cat(v) for k, v in r.items()}) for r in rows]


def tau(right: list[torch.Tensor]) -> dict:
    """From per-position agreement ``[blocks]`` (one tensor a block position, rows aligned): P(positions 1..k all
    agree) per k and the greedy τ estimate 1 + Σ_k of it."""
    prefix = torch.stack(right, dim=1).long().cumprod(dim=1).float().mean(0).tolist()
    return {"accept_by_position": [round(p, 4) for p in prefix], "tau_estimate": round(1.0 + sum(prefix), 4)}


def report(gate, helds: list[Examples]) -> dict:
    """The module's step 3 on the held-out blocks."""
    gs = [gate_of(gate, held) for held in helds]
    return {
        "blocks": len(helds[0]),
        "alone": tau([held.draft_right for held in helds]),
        "gated": tau([gated_right(held, g) for held, g in zip(helds, gs)]),
        "by_position": [agreement(held, g) for held, g in zip(helds, gs)],
    }


def _load(cfg: CopyTrainConfig, target, special_ids):
    """(drafter in float32, its card, its online features, the special ids, training shards, held-out shards)."""
    card_path = Path(cfg.draft).with_suffix(".json")
    train_paths, held_paths = split_paths(cfg)
    if target is None:
        target, tokenizer = load_target("cpu", torch.float32)
        special_ids = tokenizer.all_special_ids
    target = target.float().eval().requires_grad_(False)
    model, card = load_block_model(target, card_path.stem, card_path.parent)
    model = model.float().eval()
    features = OnlineFeatures(target, model.config.target_layers, torch.bfloat16)
    banned = frozenset(int(i) for i in special_ids or ())
    return model, card, features, banned, train_paths, held_paths


def evaluate_block_copy(cfg: CopyTrainConfig, target=None, special_ids=None) -> dict:
    """A block drafter's held-out report (module step 3), its gate's if it has one, training nothing; ``target``
    (default: the embedded one) and its ``special_ids`` may be passed in (tests)."""
    model, card, features, banned, _, held_paths = _load(cfg, target, special_ids)
    held = block_sequences(held_paths, model.config.block_size)
    helds = block_examples(model, held, features, banned, cfg.anchors, cfg.seed + 1)
    gate = model.copy_gate.float() if model.copy_gate is not None else None
    head = {"draft_sha256": card.get("sha256"), "heldout_shards": [p.stem for p in held_paths]}
    if gate is None:  # no gate: the drafter alone
        return {**head, "blocks": len(helds[0]), "alone": tau([h.draft_right for h in helds])}
    return {**head, **report(gate, helds)}


def train_block_copy(cfg: CopyTrainConfig, target=None, special_ids=None) -> Path:
    """Train the gate of the block drafter ``cfg.draft`` and write the gated drafter (``target`` and
    ``special_ids`` as :func:`evaluate_block_copy`'s)."""
    model, card, features, banned, train_paths, held_paths = _load(cfg, target, special_ids)
    if model.copy_gate is not None:  # a gated drafter (the shipped ones): its gate is trained again, on the same base
        print(f"{cfg.draft}: its copy gate is left out and trained again; the drafter's weights stay")
        model.copy_gate = None
        card = {**card, "sha256": card.get("base_sha256", card.get("sha256"))}
    started = time.perf_counter()
    size = model.config.block_size
    seqs = block_sequences(train_paths, size)
    if cfg.max_sequences:
        random.Random(cfg.seed).shuffle(seqs)
        seqs = seqs[: cfg.max_sequences]
    trains = block_examples(model, seqs, features, banned, cfg.anchors, cfg.seed)
    train = Examples(*(torch.cat([getattr(e, f) for e in trains]) for f in Examples.__dataclass_fields__))
    helds = block_examples(model, block_sequences(held_paths, size), features, banned, cfg.anchors, cfg.seed + 1)
    print(f"{len(train)} training rows, {len(helds[0])} held-out blocks ({time.perf_counter() - started:.0f} s)")
    gate = train_gate(train, model.config.hidden_size, cfg.epochs, cfg.lr, cfg.seed)
    results = {"heldout": report(gate, helds), "train": agreement(train, gate_of(gate, train))}
    print(json.dumps({k: results["heldout"][k] for k in ("blocks", "alone", "gated")}, indent=1))
    model.copy_gate = gate
    training = {"sequences": len(seqs), "anchors": cfg.anchors, "positions": len(train)}
    out = gated_card(card, cfg, train_paths, held_paths, training, results, started)
    return save_block_model(model.to(torch.bfloat16), cfg.name or Path(cfg.draft).stem, out, cfg.out_dir)
