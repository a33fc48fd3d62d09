"""Train a parallel block drafter (DFlash, arXiv 2602.06036) with a fixed or a D-PACE position schedule.

``python -m spec_core train block --loss {uniform,decay,dpace,dpace-cumulative,dpace-continuation}``

1. Data: the target's own answers (:mod:`spec_core.train.data`) and its hidden states at ``--target-layers``:
   stored in a shard of the first format, or recomputed for each batch's context by a bfloat16 prefill of the
   target for a token-id shard (:mod:`spec_core.train.features`). The last ``--heldout-shards`` shards are
   held out.
2. Each step samples sequences, then *anchors* a in their answer regions (a ≥ answer_start − 1, so that the
   first label is an answer token). Block n sees the context features of positions strictly before a_n and
   its own block; position k = 1..B−1 predicts token a + k (the gold token of the target-generated text).
   The draws depend only on ``--seed`` and the step, so every loss sees the same anchors.
3. Loss: CE_j = −log q_j per block position; weights w_j from :func:`spec_core.core.rules.position_weights`
   computed on q_j = exp(−CE_j) under ``no_grad`` (stop-gradient); loss = Σ w·CE / Σ w over the batch.
   (DFlash normalises its decay this way; the D-PACE authors divide by the batch size instead. One batch-wide
   normaliser keeps D-PACE's relative weighting across positions *and* examples and removes only a global
   scale that AdamW would mostly ignore anyway, which makes step sizes comparable across losses.)
4. Logged through training: the mean share of weight per position and the per-position acceptance; on the
   held-out blocks: CE, per-position match rate, prefix acceptance P(x_1..x_k all match) and the greedy
   τ estimate 1 + Σ_k P(prefix k) (teacher-forced on the target's text).
5. Checkpoints in ``--work-dir`` (resume by rerunning the same command); the asset goes to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from spec_core.core import rules
from spec_core.core.assets import BLOCK_DIR
from spec_core.core.cli_args import add_threads
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.drafters.block.assets import save_block_model
from spec_core.drafters.block.network import BlockDraftModel
from spec_core.model.models import load_target
from spec_core.train.data import TARGET_LAYERS, load_shards, split_sequences
from spec_core.train.features import OnlineFeatures

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BlockTrainConfig:
    loss: str  # one of BLOCK_LOSSES
    alpha: float = 0.5  # D-PACE smoothing q̃ = (1 − α)q + α (weights only)
    gamma_w: float = 0.0  # decay constant; 0 = DFlash's choice (rules.decay_gamma: 4 for B = 8, 7 for B = 16)
    block_size: int = 8  # B (anchor + B − 1 drafted tokens)
    num_layers: int = 1
    steps: int = 1000
    batch_seqs: int = 2  # sequences per step
    anchors: int = 16  # blocks per sequence (they share its context projection); batch = batch_seqs · anchors
    lr: float = 2e-3  # AdamW peak, linear warm-up then cosine to 10%
    warmup: int = 50
    seed: int = 0
    heldout_shards: int = 4  # at most ~10% of the shards
    eval_blocks: int = 384  # held-out blocks (fixed set)
    eval_every: int = 100
    init: str = "random"  # "random" (measured better over 150 steps) or "target": layers start as its last ones
    target_layers: tuple[int, ...] = TARGET_LAYERS
    data: str = "data/train"  # a folder of shards, or several separated by commas
    out_dir: str = str(BLOCK_DIR)
    work_dir: str = "runs/block"
    name: str = ""  # asset name; default LOSS (α = 0.5) or LOSS-alphaA
    shards: int = (
        0  # use the first N shards of each folder only (0 = all present); fix it so every loss sees the same data
    )
    autocast: bool = True  # bf16 autocast on the CPU (≈ 5× faster steps here; master weights stay float32)
    threads: int = 1
    progress: bool = True

    @property
    def decay(self) -> float:
        return self.gamma_w or rules.decay_gamma(self.block_size)

    @property
    def asset_name(self) -> str:
        if self.name:
            return self.name
        return self.loss if self.alpha == 0.5 or not self.loss.startswith("dpace") else f"{self.loss}-alpha{self.alpha}"


def load_training_target(dtype: torch.dtype):
    """The embedded target (only its embedding and head are used; both stay frozen)."""

    return load_target("cpu", dtype)[0]


# ----------------------------------------------------------------------------------------------------------
# Data


@dataclass
class Sequence:
    tokens: torch.Tensor  # [T] long
    answer_start: int
    layer_hidden: torch.Tensor | None  # [T, L, H] bf16; None for a token-id shard (computed per batch)

    @property
    def anchor_range(self) -> tuple[int, int]:
        """Anchors a in [lo, hi]: a ≥ 1 (some context), a ≥ answer_start − 1, a + 1 < T (one label)."""
        return max(1, self.answer_start - 1), len(self.tokens) - 2


def load_sequences(data: str | Path, heldout: int, limit: int = 0) -> tuple[list[Sequence], list[Sequence], int]:
    """(train, held-out, shard count) from one folder of shards or several, comma-separated; the last
    shards of each folder (``heldout``, at most ~10%) are held out."""
    train, held, total = [], [], 0
    for data_dir in [Path(d) for d in str(data).split(",") if d.strip()]:
        shards = load_shards(data_dir, limit or None, skip=("hidden",))
        if len(shards) < 2:
            raise SystemExit(f"need at least 2 shards in {data_dir}, found {len(shards)}")
        n_held = max(1, min(heldout, max(2, len(shards) // 10)))  # ~10%, at least a greedy and a sampled shard
        seqs = [[Sequence(t, a, lh) for t, a, _, lh in split_sequences([s])] for s in shards]
        keep = lambda xs: [s for s in xs if s.anchor_range[1] >= s.anchor_range[0]]  # noqa: E731
        train += keep([s for part in seqs[:-n_held] for s in part])
        held += keep([s for part in seqs[-n_held:] for s in part])
        total += len(shards)
    return train, held, total


def online_features(target, seqs: list[Sequence], layers: tuple[int, ...]) -> OnlineFeatures | None:
    """A bfloat16 copy of ``target`` that computes ``layers``' states, when some of ``seqs`` lack them."""
    if all(s.layer_hidden is not None for s in seqs):
        return None
    return OnlineFeatures(target, layers, torch.bfloat16, batch_size=8)


def sample_blocks(
    seqs: list[Sequence], n_seqs: int, n_anchors: int, rng: random.Random
) -> tuple[list[int], list[list[int]]]:
    """(sequence indices [S], anchors [S, N]) — sequences weighted by their number of anchors."""
    weights = [s.anchor_range[1] - s.anchor_range[0] + 1 for s in seqs]
    idx = rng.choices(range(len(seqs)), weights=weights, k=n_seqs)
    anchors = [[rng.randint(*seqs[i].anchor_range) for _ in range(n_anchors)] for i in idx]
    return idx, anchors


def context_states(
    seqs: list[Sequence], idx: list[int], width: int, features: OnlineFeatures | None
) -> list[torch.Tensor]:
    """The layer states ``[≤ width, L, H]`` of the first ``width`` positions of each sequence of ``idx``: stored,
    or computed by ``features`` (one prefill for every sequence that lacks them)."""
    states = [seqs[i].layer_hidden for i in idx]
    todo = [r for r, x in enumerate(states) if x is None]
    if todo:
        if features is None:
            raise ValueError("token-id sequences need an OnlineFeatures to compute their layer states")
        _, computed = features([seqs[idx[r]].tokens for r in todo], max_len=width)
        for r, x in zip(todo, computed):
            states[r] = x
    return [x[:width] for x in states if x is not None]


def make_batch(
    seqs: list[Sequence],
    idx: list[int],
    anchors: list[list[int]],
    block_size: int,
    features: OnlineFeatures | None = None,
):
    """Padded tensors for :func:`block_forward` (``features`` computes the context of token-id sequences)."""
    s_, n_ = len(idx), len(anchors[0])
    anchor = torch.tensor(anchors)  # [S, N]
    width = int(anchor.max())  # context positions needed: t < a ≤ width
    states = context_states(seqs, idx, width, features)
    lh0 = states[0]
    layer_hidden = torch.zeros(s_, width, *lh0.shape[1:], dtype=lh0.dtype)  # [S, W, L, H]
    labels = torch.zeros(s_, n_, block_size - 1, dtype=torch.long)  # [S, N, B−1] tokens a+1..a+B−1
    valid = torch.zeros(s_, n_, block_size - 1, dtype=torch.bool)
    anchor_tokens = torch.zeros(s_, n_, dtype=torch.long)
    for r, i in enumerate(idx):
        seq = seqs[i]
        m = min(width, len(seq.tokens))
        layer_hidden[r, :m] = states[r][:m]
        for c, a in enumerate(anchors[r]):
            anchor_tokens[r, c] = seq.tokens[a]
            gold = seq.tokens[a + 1 : a + block_size]
            labels[r, c, : len(gold)] = gold
            valid[r, c, : len(gold)] = True
    visible = torch.arange(width)[None, None, :] < anchor[..., None]  # [S, N, W] context strictly before a
    return layer_hidden, anchor_tokens, anchor, visible, labels, valid


def block_forward(model: BlockDraftModel, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position CE ``[S, N, B−1]`` and greedy match ``[S, N, B−1]`` (bool) of a batch."""
    layer_hidden, anchor_tokens, anchor, visible, labels, valid = batch
    feats = model.project_context(layer_hidden)  # [S, W, H]
    hidden = model.block_states(anchor_tokens, anchor, model.context_kv(feats), visible)[:, :, 1:]  # [S, N, B−1, H]
    logits = model.logits(hidden).float()  # [S, N, B−1, V]
    ce = F.cross_entropy(logits.flatten(0, 2), labels.flatten(), reduction="none").view_as(labels)
    match = logits.argmax(-1) == labels
    return ce * valid, match & valid


# ----------------------------------------------------------------------------------------------------------
# Evaluation


@torch.no_grad()
def evaluate(
    model: BlockDraftModel, held: list[Sequence], cfg: BlockTrainConfig, features: OnlineFeatures | None = None
) -> dict:
    """Held-out CE, per-position match, prefix acceptance and the greedy τ estimate on a fixed block set."""
    rng = random.Random(12345)
    ce_sum, n_tokens = 0.0, 0
    match_sum = torch.zeros(cfg.block_size - 1)
    prefix_sum = torch.zeros(cfg.block_size - 1)
    valid_sum = torch.zeros(cfg.block_size - 1)
    n_blocks = 0
    per_batch = cfg.batch_seqs * cfg.anchors
    while n_blocks < cfg.eval_blocks:
        idx, anchors = sample_blocks(held, per_batch, 1, rng)
        batch = make_batch(held, idx, anchors, cfg.block_size, features)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast):
            ce, match = block_forward(model, batch)
        valid = batch[-1]
        ce_sum += float(ce.sum())
        n_tokens += int(valid.sum())
        match_sum += match.float().sum((0, 1))
        prefix_sum += match.long().cumprod(-1).float().sum((0, 1))  # all of x_1..x_k match
        valid_sum += valid.float().sum((0, 1))
        n_blocks += per_batch
    prefix = (prefix_sum / n_blocks).tolist()  # a block cut by the sequence end counts as rejected there
    return {
        "blocks": n_blocks,
        "ce": ce_sum / max(n_tokens, 1),
        "match_by_position": (match_sum / valid_sum.clamp_min(1)).tolist(),
        "accept_by_position": prefix,
        "tau_estimate": 1.0 + sum(prefix),
    }


# ----------------------------------------------------------------------------------------------------------
# Training


def lr_at(step: int, cfg: BlockTrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def train(cfg: BlockTrainConfig) -> Path:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    train_seqs, held_seqs, n_shards = load_sequences(cfg.data, cfg.heldout_shards, cfg.shards)
    target = load_training_target(torch.float32)
    for p in target.parameters():
        p.requires_grad_(False)
    model = BlockDraftModel.for_target(target, cfg.target_layers, cfg.num_layers, cfg.block_size, cfg.init).float()
    features = online_features(target, train_seqs + held_seqs, cfg.target_layers)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.95))
    work = Path(cfg.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    ckpt_path = work / f"{cfg.asset_name}.pt"
    log: list[dict]
    times: dict[str, list[float]]
    step, log, times = 0, [], {"step_s": [], "weights_s": []}
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ckpt["model"], strict=False)
        opt.load_state_dict(ckpt["opt"])
        step, log, times = ckpt["step"], ckpt["log"], ckpt["times"]
        print(f"resumed {cfg.asset_name} at step {step}")

    def checkpoint() -> None:
        tmp = ckpt_path.with_suffix(".tmp")
        torch.save(
            {
                "model": model.trainable_state(),
                "opt": opt.state_dict(),
                "step": step,
                "log": log,
                "times": times,
                "config": asdict(cfg),
            },
            tmp,
        )
        tmp.rename(ckpt_path)

    bar = tqdm(total=cfg.steps, initial=step, desc=f"block:{cfg.asset_name}", disable=not cfg.progress)
    window: dict[str, Any] = {
        "w": torch.zeros(cfg.block_size - 1),
        "acc": torch.zeros(cfg.block_size - 1),
        "n": 0,
        "loss": 0.0,
    }
    model.train()
    while step < cfg.steps:
        rng = random.Random(cfg.seed * 1_000_003 + step)  # same blocks at the same step for every loss
        batch = make_batch(
            train_seqs, *sample_blocks(train_seqs, cfg.batch_seqs, cfg.anchors, rng), cfg.block_size, features
        )
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast):
            ce, match = block_forward(model, batch)
        valid = batch[-1]
        t1 = time.perf_counter()
        with torch.no_grad():  # stop-gradient weights
            q = torch.exp(-ce)
            w = rules.position_weights(cfg.loss, q, cfg.alpha, cfg.decay, valid)  # [S, N, B−1]
        t2 = time.perf_counter()
        loss = (w * ce).sum() / w.sum().clamp_min(1e-8)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        times["step_s"].append(time.perf_counter() - t0)
        times["weights_s"].append(t2 - t1)
        step += 1
        with torch.no_grad():
            window["w"] += (w / w.sum(-1, keepdim=True).clamp_min(1e-8)).sum((0, 1))  # share per position
            window["acc"] += match.long().cumprod(-1).float().sum((0, 1))
            window["n"] += w.shape[0] * w.shape[1]
            window["loss"] += float(ce.detach().sum() / valid.sum())
        bar.update(1)
        bar.set_postfix(
            ce=f"{float(ce.detach().sum() / valid.sum()):.3f}", acc1=f"{float(match[..., 0].float().mean()):.2f}"
        )
        if step % cfg.eval_every == 0 or step == cfg.steps:
            model.eval()
            held = evaluate(model, held_seqs, cfg, features)
            model.train()
            n = max(window["n"], 1)
            entry = {
                "step": step,
                "train_ce": window["loss"] / max(1, step - (log[-1]["step"] if log else 0)),
                "weights_by_position": (window["w"] / n).tolist(),
                "train_accept_by_position": (window["acc"] / n).tolist(),
                "heldout_ce": held["ce"],
                "heldout_accept_by_position": held["accept_by_position"],
                "heldout_tau_estimate": held["tau_estimate"],
            }
            log.append(entry)
            window = {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else 0) for k, v in window.items()}
            bar.write(
                f"step {step}: held-out ce {held['ce']:.3f} τ≈{held['tau_estimate']:.3f} "
                f"accept {[round(x, 3) for x in held['accept_by_position']]}"
            )
            checkpoint()
    bar.close()
    model.eval()
    held = evaluate(model, held_seqs, cfg, features)
    step_s, weights_s = sorted(times["step_s"]), times["weights_s"]
    card = {
        "method": f"block:{cfg.loss}",
        "papers": {"block drafter": "DFlash, arXiv 2602.06036", "weights": "D-PACE, arXiv 2605.18810"},
        "loss": cfg.loss,
        "train_config": {**asdict(cfg), "decay_gamma_w": cfg.decay, "target_layers": list(cfg.target_layers)},
        "data": {
            "dir": str(cfg.data),
            "shards": n_shards,
            "train_sequences": len(train_seqs),
            "heldout_sequences": len(held_seqs),
            "heldout_shards": "the last ones",
            "features": "stored" if features is None else "online (bfloat16 prefill of the target)",
        },
        "trainable_params": sum(p.numel() for p in params),
        "steps": step,
        "wall_s": sum(times["step_s"]),
        "median_step_s": step_s[len(step_s) // 2] if step_s else 0.0,
        "mean_weights_s": sum(weights_s) / max(1, len(weights_s)),
        "heldout": held,
        "log": log,
    }
    return save_block_model(model, cfg.asset_name, card, Path(cfg.out_dir))


def parse_args(argv: list[str]) -> BlockTrainConfig:
    d = BlockTrainConfig(loss="dpace")
    ap = argparse.ArgumentParser(prog="python -m spec_core train block", description=__doc__.splitlines()[0])
    ap.add_argument("--loss", choices=BLOCK_LOSSES, required=True)
    ap.add_argument("--alpha", type=float, default=d.alpha, help="D-PACE smoothing α (weights only)")
    ap.add_argument(
        "--gamma-w", type=float, default=d.gamma_w, help="decay constant (0: 4 for B=8, 5.5 for B=12, 7 for B=16)"
    )
    ap.add_argument("--block-size", type=int, default=d.block_size, help="B, the anchor + B−1 drafted tokens")
    ap.add_argument("--num-layers", type=int, default=d.num_layers)
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--batch-seqs", type=int, default=d.batch_seqs)
    ap.add_argument("--anchors", type=int, default=d.anchors, help="blocks per sequence")
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--warmup", type=int, default=d.warmup)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--heldout-shards", type=int, default=d.heldout_shards)
    ap.add_argument("--eval-blocks", type=int, default=d.eval_blocks)
    ap.add_argument("--eval-every", type=int, default=d.eval_every)
    ap.add_argument("--init", choices=("target", "random"), default=d.init)
    ap.add_argument("--target-layers", default=",".join(map(str, d.target_layers)))
    ap.add_argument("--data", default=d.data, help="folder(s) of shards, comma-separated")
    ap.add_argument("--out-dir", default=d.out_dir)
    ap.add_argument("--work-dir", default=d.work_dir)
    ap.add_argument("--name", default="")
    ap.add_argument("--shards", type=int, default=d.shards, help="use the first N shards (0 = all)")
    ap.add_argument("--no-autocast", action="store_true", help="train in float32 (slower)")
    add_threads(ap, d.threads)
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if not 0.0 <= a.alpha <= 1.0:
        ap.error("--alpha must be in [0, 1]")
    if a.block_size < 2:
        ap.error("--block-size must be at least 2")
    return BlockTrainConfig(
        loss=a.loss,
        alpha=a.alpha,
        gamma_w=a.gamma_w,
        block_size=a.block_size,
        num_layers=a.num_layers,
        steps=a.steps,
        batch_seqs=a.batch_seqs,
        anchors=a.anchors,
        lr=a.lr,
        warmup=min(a.warmup, a.steps),
        seed=a.seed,
        heldout_shards=a.heldout_shards,
        eval_blocks=a.eval_blocks,
        eval_every=a.eval_every,
        init=a.init,
        target_layers=tuple(int(x) for x in a.target_layers.split(",")),
        data=a.data,
        out_dir=a.out_dir,
        work_dir=a.work_dir,
        name=a.name,
        shards=a.shards,
        autocast=not a.no_autocast,
        threads=a.threads,
        progress=not a.no_progress,
    )


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)
    path = train(cfg)
    card = json.loads(path.with_suffix(".json").read_text())
    print(
        f"wrote {path} (held-out τ estimate {card['heldout']['tau_estimate']:.3f}, {card['steps']} steps, "
        f"{card['wall_s']:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
