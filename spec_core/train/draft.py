"""Train a draft for the embedded target by distillation on the target's own answers.

``python -m spec_core train draft --design {feature,standalone}`` (``--help`` for every option):

1. data — the shards of :mod:`spec_core.train.data` (generated first if missing): the target's answers to
   prompts, and its last hidden state at every position, so the teacher's logits are ``lm_head(hidden)``. A
   shard of the first format stores the states; for a token-id shard a bfloat16 prefill of the target
   recomputes them batch by batch (:mod:`spec_core.train.features`, as SpecForge and EAGLE-3 train);
2. loss — KL(target ‖ draft) over a trimmed vocabulary (the most frequent tokens of the data, ``--head-size``),
   counted on answer positions only (never on prompt or chat-template tokens); the feature design adds
   EAGLE's feature regression (smooth L1) and a second, unrolled pass whose input features are the draft's own
   predictions, which is what drafting past the first token sees (Li et al., EAGLE, arXiv 2401.15077;
   "training-time test" in EAGLE-3, arXiv 2503.01840). With ``--widen-head`` the vocabulary of position j also
   holds the sequence's own tokens up to j that the trimmed head lacks, as the drafter widens it while drafting
   (:mod:`spec_core.drafters.feature`), so the draft learns to propose the rare words a text copies;
3. held-out check — greedy agreement of draft and target on answer tokens of held-out shards, one step ahead
   and with the draft's own features (the unrolled step), logged as training goes;
4. output — ``assets/drafts/<name>.safetensors`` + ``<name>.json`` (design, data size, steps, wall time,
   held-out loss and agreement); checkpoints in ``--work-dir`` so a stopped run resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
import torch.nn.functional as F
from tqdm import tqdm

from spec_core.core.assets import DRAFTS_DIR
from spec_core.core.cli_args import add_threads
from spec_core.model.draft_assets import load_draft, save_draft
from spec_core.model.draft_networks import FeatureDraft, build_standalone
from spec_core.model.models import load_target
from spec_core.train.data import TARGET_LAYERS, DataConfig, generate_dataset, read_shards, shard_paths, split_sequences
from spec_core.train.features import OnlineFeatures


@dataclass(frozen=True)
class DraftTrainConfig:
    data_dir: Path | tuple[Path, ...] = Path("data/train")  # one folder of shards, or several
    design: str = "feature"  # "feature" (EAGLE-style) or "standalone"
    name: str = ""  # asset name (default: the design)
    num_layers: int = 1
    head_size: int = 8192  # trimmed vocabulary of the loss (and of the feature draft's head); 0 = full
    steps: int = 2000
    batch_size: int = 8  # sequences per step
    lr: float = 1e-3
    warmup: int = 100
    unroll_weight: float = 0.5  # weight of each unrolled (own-feature) pass; 0 disables them (feature only)
    unroll_steps: int = 1  # unrolled passes: pass k reads the features pass k − 1 predicted (feature only)
    feature_layers: tuple[int, ...] = ()  # target layers fused into the input feature (EAGLE-3); () = EAGLE-1
    feature_weight: float = 0.2  # weight of the feature regression (feature only)
    prompt_weight: float = 0.25  # weight of prompt positions in the loss (the teacher is valid there too)
    heldout_shards: int = 3  # last shards kept out of training
    eval_every: int = 250
    seed: int = 0
    threads: int = 2
    device: str = "cpu"
    work_dir: Path = Path("runs/draft")
    out_dir: Path = DRAFTS_DIR
    max_shards: int | None = None
    train_fraction: float = 1.0  # train on the first fraction of each folder's training shards (scaling study)
    cache_features: bool = False  # keep online features in memory after their first prefill (bf16, 6.9 KB a token)
    init: Path | None = None  # a draft's .safetensors to start from (its design, layers and trimmed head kept)
    widen_head: bool = False  # train over the trimmed head widened by each text's own tokens, as it drafts


def vocab_subset(seqs, size: int, vocab: int, always: list[int]) -> torch.Tensor:
    """The ``size`` most frequent token ids of the data (plus ``always``), sorted."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for tokens, *_ in seqs:
        counts += torch.bincount(tokens, minlength=vocab)
    counts[always] = counts.max() + 1
    return torch.topk(counts, min(size, vocab)).indices.sort().values


def with_features(batch, features: OnlineFeatures | None):
    """``batch`` with the target's features filled in where a token-id shard left them out (None)."""
    todo = [i for i, (_, _, h, _) in enumerate(batch) if h is None]
    if not todo:
        return batch
    if features is None:
        raise ValueError("token-id sequences need an OnlineFeatures to compute their hidden states")
    hidden, layer_hidden = features([batch[i][0] for i in todo])
    out = list(batch)
    for i, h, lh in zip(todo, hidden, layer_hidden):
        out[i] = (batch[i][0], batch[i][1], h, lh)
    return out


def collate(
    batch, device, prompt_weight: float = 0.0, layers: list[int] | None = None, features: OnlineFeatures | None = None
):
    """Right-padded tensors: tokens [B, T], hidden [B, T, H], loss weights [B, T], and layer_hidden
    [B, T, L, H] of the data's layers at positions ``layers`` (None when ``layers`` is None). Sequences of
    token-id shards get their features from ``features``.

    Weight 1 on answer positions (j ≥ a − 1: the logits at j predict answer token j + 1), ``prompt_weight`` on
    the prompt's positions, 0 on padding. Held-out agreement is counted where the weight is 1 only.
    """
    batch = with_features(batch, features)
    width = max(len(t) for t, *_ in batch)
    hidden_size = batch[0][2].shape[-1]
    tokens = torch.zeros(len(batch), width, dtype=torch.long)
    hidden = torch.zeros(len(batch), width, hidden_size, dtype=torch.bfloat16)
    weight = torch.zeros(len(batch), width)
    layer_hidden = (
        None if layers is None else torch.zeros(len(batch), width, len(layers), hidden_size, dtype=torch.bfloat16)
    )
    for b, (t, a, h, lh) in enumerate(batch):
        tokens[b, : len(t)], hidden[b, : len(t)] = t, h
        if layer_hidden is not None:
            layer_hidden[b, : len(t)] = lh[:, layers]
        weight[b, 1 : max(a - 1, 1)] = prompt_weight
        weight[b, max(a - 1, 0) : len(t) - 1] = 1.0
    layer_hidden = layer_hidden.to(device) if layer_hidden is not None else None
    return tokens.to(device), hidden.to(device), weight.to(device), layer_hidden


def text_extras(tokens: torch.Tensor, in_head: torch.Tensor, never: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens a drafter adds to its trimmed head while drafting ``tokens`` [B, T]: (ids [E], seen [B, T, E]),
    where ``seen[b, j, e]`` says that id e occurs in sequence b at or before position j, so the head that predicts
    token j + 1 holds it. ``in_head`` [V] marks the trimmed head's ids; ``never`` holds ids never added (the chat
    template's special tokens). As :class:`~spec_core.drafters.feature.FeatureDrafter` widens its head with the
    prompt's and the verified text's tokens (EAGLE-3's draft-to-target map, Li et al., arXiv 2503.01840)."""
    outside = tokens[~in_head[tokens]]
    ids = torch.unique(outside[~torch.isin(outside, never)]) if outside.numel() else outside
    seen = (tokens[:, :, None] == ids).to(torch.int8).cummax(dim=1).values.bool()  # [B, T, E]
    return ids, seen


class Distiller:
    """Computes the losses of one design on a batch (shared by training and the held-out check)."""

    def __init__(self, draft, target, cfg: DraftTrainConfig, subset: torch.Tensor, special_ids=()):
        self.draft, self.target, self.cfg = draft, target, cfg
        self.head = target.lm_head.weight[subset].detach().float()  # [V', H]
        self.embed = target.model.embed_tokens
        self.in_head = torch.zeros(target.lm_head.weight.shape[0], dtype=torch.bool, device=subset.device)
        self.in_head[subset] = True
        self.never = torch.as_tensor(list(special_ids), dtype=torch.long, device=subset.device)

    def _logp(self, states: torch.Tensor, widened=None) -> torch.Tensor:
        """Log-probabilities over the trimmed head [N, V'], or over it and the text's own ids [N, V' + E] when
        ``widened`` = (their rows [E, H], where each position may propose them [N, E])."""
        logits = states.float() @ self.head.T
        if widened is not None:
            rows, allowed = widened
            extra = (states.float() @ rows.T).masked_fill(~allowed, float("-inf"))
            logits = torch.cat([logits, extra], dim=-1)
        return torch.log_softmax(logits, dim=-1)

    def predict(self, tokens, hidden, layer_hidden=None):
        """Draft features/hidden states aligned with the target's: out[:, j] should match hidden[:, j].

        One list entry per pass: pass 0 reads the target's features; unrolled pass k reads the features that
        pass k − 1 predicted (position j's input is the draft's own prediction for j − 1, as when drafting the
        (k+1)-th token of a round), EAGLE-3's "training-time test" in its chain form.
        """
        if self.cfg.design == "standalone":
            return [self.draft.model(input_ids=tokens).last_hidden_state]  # [B, T, H]
        lh = layer_hidden[:, :-1] if layer_hidden is not None else None
        feats = self.draft.target_features(hidden[:, :-1], lh).to(self.draft.fc.weight.dtype)  # positions 0..T-2
        first_feat = feats[:, :1]
        pred = self.draft(feats, tokens[:, 1:])  # [B, T-1, H] predicted features of positions 1..T-1
        outs = [F.pad(pred, (0, 0, 1, 0))]  # position 0 has no prediction
        for _ in range(self.cfg.unroll_steps if self.cfg.unroll_weight > 0 else 0):
            own = torch.cat([first_feat, pred[:, :-1].detach()], dim=1)  # the draft's own features
            pred = self.draft(own, tokens[:, 1:])
            outs.append(F.pad(pred, (0, 0, 1, 0)))
        return outs

    def losses(self, tokens, hidden, weight, layer_hidden=None):
        """(total loss, dict of scalars: KL and greedy agreement on answer positions, per pass)."""
        keep = weight > 0
        w = weight[keep]  # [N]
        answer = w == 1.0
        widened = None
        if self.cfg.widen_head:  # the text's own ids join the head where the drafter would hold them
            ids, seen = text_extras(tokens, self.in_head, self.never)
            widened = (self.target.lm_head.weight[ids].detach().float(), seen[keep])
        teacher = self._logp(hidden[keep], widened)  # [N, V'] (or [N, V' + E])
        p_teacher = teacher.exp()
        total, stats = 0.0, {}
        for k, out in enumerate(self.predict(tokens, hidden, layer_hidden)):
            student = self._logp(out[keep], widened)
            kl = (p_teacher * (teacher - student).nan_to_num(0.0, posinf=0.0, neginf=0.0)).sum(-1)  # [N]
            pass_weight = 1.0 if k == 0 else self.cfg.unroll_weight
            total = total + pass_weight * (kl * w).sum() / w.sum()
            if self.cfg.design == "feature":
                reg = F.smooth_l1_loss(out[keep].float(), hidden[keep].float(), reduction="none").mean(-1)  # [N]
                total = total + pass_weight * self.cfg.feature_weight * (reg * w).sum() / w.sum()
            stats[f"kl{k}"] = float(kl[answer].mean().detach())
            stats[f"agree{k}"] = float((student[answer].argmax(-1) == teacher[answer].argmax(-1)).float().mean())
        return total, stats


def build_draft(target, cfg: DraftTrainConfig, subset: torch.Tensor):
    draft: torch.nn.Module
    if cfg.design == "feature":
        draft = FeatureDraft(
            target, cfg.num_layers, init_from_target=True, head_size=len(subset), feature_layers=cfg.feature_layers
        )
        draft.set_vocab_subset(subset)
    elif cfg.design == "standalone":
        draft = build_standalone(target, cfg.num_layers, init_from_target=True)
    else:
        raise ValueError(f"unknown design {cfg.design!r}")
    return draft.float().train()


@torch.no_grad()
def heldout(distiller: Distiller, seqs, device, batch_size: int, layers=None, features=None) -> dict[str, float]:
    distiller.draft.eval()
    sums: dict[str, float] = {}
    n = 0
    for i in range(0, len(seqs), batch_size):
        tokens, hidden, weights, layer_hidden = collate(
            seqs[i : i + batch_size], device, layers=layers, features=features
        )
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            _, stats = distiller.losses(tokens, hidden, weights, layer_hidden)
        weight = int((weights == 1.0).sum())
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v * weight
        n += weight
    distiller.draft.train()
    return {k: v / n for k, v in sums.items()}


def train(cfg: DraftTrainConfig, target=None) -> Path:
    """Train one draft; returns the path of its weights in ``cfg.out_dir``."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    device = torch.device(cfg.device)
    special_ids: list[int] = []
    if target is None:
        target, tokenizer = load_target(device, torch.float32)
        special_ids = list(tokenizer.all_special_ids)
    target = target.float().eval().requires_grad_(False)
    train_seqs, eval_seqs, layers, stored = [], [], None, list(TARGET_LAYERS)
    for data_dir in data_dirs(cfg):  # the last `heldout_shards` of each folder are held out
        layers = data_layer_positions(data_dir, cfg.feature_layers)
        stored = data_layers(data_dir)
        paths, skip = shard_paths(data_dir, cfg.max_shards), () if layers else ("layer_hidden",)
        if len(paths) <= cfg.heldout_shards:
            raise SystemExit(f"need more than {cfg.heldout_shards} shards in {data_dir}, found {len(paths)}")
        train_paths = paths[: -cfg.heldout_shards]  # only the shards used are read (--train-fraction)
        train_seqs += split_sequences(
            read_shards(train_paths[: max(1, round(len(train_paths) * cfg.train_fraction))], skip)
        )
        eval_seqs += split_sequences(read_shards(paths[-cfg.heldout_shards :], skip))
    features = None
    if any(h is None for _, _, h, _ in train_seqs + eval_seqs):  # token-id shards: the features online
        features = OnlineFeatures(target, stored if layers else (), torch.bfloat16, cfg.batch_size)
        # the held-out set is read at every check: its features are computed once and kept (bf16, in memory)
        eval_seqs = [s for i in range(0, len(eval_seqs), 8) for s in with_features(eval_seqs[i : i + 8], features)]
    answer_tokens = sum(len(t) - a for t, a, *_ in train_seqs)
    vocab = target.config.vocab_size
    subset = vocab_subset(train_seqs, cfg.head_size or vocab, vocab, [target.config.eos_token_id or 0])
    if cfg.init is not None:  # warm start: the draft's own trimmed head replaces the data's top tokens
        draft, init_card = load_draft(target, cfg.init.stem, cfg.init.parent)
        check_init(cfg, init_card, cfg.init)
        if getattr(draft, "copy_gate", None) is not None:  # a gate fits the draft it was trained on: retrain it after
            setattr(draft, "copy_gate", None)  # noqa: B010 (the attribute is typed as the module it holds)
            print(
                "the warm start's copy gate is left out: train it again on this draft (python -m spec_core train copy)"
            )
        if cfg.design == "feature" and int(init_card["num_layers"]) < cfg.num_layers:
            draft = grow_draft(draft, target, cfg.num_layers)
        if cfg.design == "feature":
            subset = torch.as_tensor(draft.vocab_subset).cpu()
        draft = draft.float().train().to(device)
    else:
        draft = build_draft(target, cfg, subset).to(device)
    covered = torch.zeros(vocab, dtype=torch.bool)
    covered[subset] = True
    coverage = float(covered[torch.cat([t[a:] for t, a, *_ in eval_seqs])].float().mean())  # of answer tokens
    distiller = Distiller(draft, target, cfg, subset.to(device), special_ids)
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (1 + math.cos(math.pi * min(s / cfg.steps, 1.0)))
    )
    name = cfg.name or cfg.design
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    ckpt = cfg.work_dir / f"{name}.ckpt.pt"
    log_path = cfg.work_dir / f"{name}.log.jsonl"
    step, elapsed = 0, 0.0
    if ckpt.exists():  # resume
        state = torch.load(ckpt, weights_only=False)
        draft.load_state_dict(state["draft"], strict=False)
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, elapsed = state["step"], state["elapsed"]
    rng = random.Random(cfg.seed + step)
    order: list[int] = []
    history = []
    best_score, best_state = -1.0, None  # the held-out best is what ships (the data is small: it can overfit)
    if cfg.init is not None and step == 0:  # the warm start's own held-out score, in the same run: the bar
        ev = heldout(distiller, eval_seqs, device, cfg.batch_size, layers, features)
        history.append({"step": 0, "elapsed_s": 0.0, "train_loss": None, **{f"heldout_{k}": v for k, v in ev.items()}})
        best_score, best_row = mean_agreement(ev), history[-1]
        best_state = {k: v.detach().clone() for k, v in draft.state_dict().items()}
        with log_path.open("a") as f:
            f.write(json.dumps(history[-1]) + "\n")
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train draft ({name})", unit="step")
    t_last = time.time()
    while step < cfg.steps:
        if len(order) < cfg.batch_size:
            order = list(range(len(train_seqs)))
            rng.shuffle(order)
        picked = [order.pop() for _ in range(cfg.batch_size)]
        batch = [train_seqs[i] for i in picked]
        if cfg.cache_features and features is not None:  # later epochs read the features kept in memory
            batch = with_features(batch, features)
            for i, seq in zip(picked, batch):
                train_seqs[i] = seq
        tokens, hidden, weights, layer_hidden = collate(batch, device, cfg.prompt_weight, layers, features)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            loss, stats = distiller.losses(tokens, hidden, weights, layer_hidden)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        step += 1
        now = time.time()
        elapsed += now - t_last
        t_last = now
        bar.update(1)
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}", agree=f"{stats['agree0']:.2f}")
        if step % cfg.eval_every == 0 or step == cfg.steps:
            ev = heldout(distiller, eval_seqs, device, cfg.batch_size, layers, features)
            row: dict[str, float | int | None] = {
                "step": step,
                "elapsed_s": round(elapsed, 1),
                "train_loss": float(loss.detach()),
                **{f"heldout_{k}": v for k, v in ev.items()},
            }
            history.append(row)
            score = mean_agreement(ev)
            if score > best_score:
                best_score, best_row = score, row
                best_state = {k: v.detach().clone() for k, v in draft.state_dict().items()}
            with log_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            torch.save(
                {
                    "draft": draft.state_dict(),
                    "opt": opt.state_dict(),
                    "sched": sched.state_dict(),
                    "step": step,
                    "elapsed": elapsed,
                },
                ckpt,
            )
            t_last = time.time()
    bar.close()
    if best_state is not None:
        draft.load_state_dict(best_state)
    final = (
        best_row if best_state is not None else heldout(distiller, eval_seqs, device, cfg.batch_size, layers, features)
    )
    card = {
        "design": cfg.design,
        "num_layers": cfg.num_layers,
        "head_size": len(subset) if cfg.design == "feature" else 0,
        "feature_layers": list(cfg.feature_layers) if cfg.design == "feature" else [],
        "target": "SmolLM2-135M-Instruct (embedded, de-quantized Q4_1 GGUF)",
        "trainable_parameters": sum(p.numel() for p in params),
        "data": {
            "dir": ", ".join(map(str, data_dirs(cfg))),
            "train_sequences": len(train_seqs),
            "train_answer_tokens": answer_tokens,
            "heldout_sequences": len(eval_seqs),
            "trimmed_vocab_coverage_heldout": round(coverage, 4),
            "features": "stored" if features is None else "online (bfloat16 prefill of the target)",
        },
        "training": {k: str(v) for k, v in cfg.__dict__.items()} | {"steps_done": step, "wall_s": round(elapsed, 1)},
        "init": None
        if cfg.init is None
        else {
            "from": cfg.init.name,
            "sha256": init_card.get("sha256", ""),
            "train_answer_tokens": answer_tokens_seen(init_card),
            "data": init_card.get("data", {}).get("dir"),
            "num_layers": int(init_card.get("num_layers", 0)),
            "copy_gate": "left out (train copy retrains it)" if init_card.get("copy") else None,
        },
        "heldout": {k: v if v is None else round(v, 4) for k, v in final.items()},  # the shipped (best) step's
        "history": history,
        "loss": "KL(target || draft) on answer tokens over the trimmed vocabulary"
        + (", widened at each position by the text's own tokens so far" if cfg.widen_head else "")
        + (
            f" + feature smooth-L1 + {cfg.unroll_steps} unrolled own-feature pass(es)"
            if cfg.design == "feature"
            else ""
        )
        + (f"; input feature fuses target layers {list(cfg.feature_layers)} (EAGLE-3)" if cfg.feature_layers else ""),
    }
    return save_draft(draft, name, card, cfg.out_dir)


def mean_agreement(ev: dict[str, float]) -> float:
    """The held-out score a run keeps its best step by: agreement averaged over the drafted positions."""
    return sum(v for k, v in ev.items() if k.startswith("agree")) / sum(1 for k in ev if k.startswith("agree"))


def answer_tokens_seen(card: dict) -> int | None:
    """The answer tokens a draft saw in all: its own run's and, for a warm start, all its start had seen (a card's
    ``init.train_answer_tokens`` counts so, so a chain of warm starts adds up). None when the card does not say."""
    own = (card.get("data") or {}).get("train_answer_tokens")
    if own is None:
        return None
    return int(own) + int((card.get("init") or {}).get("train_answer_tokens") or 0)


def check_init(cfg: DraftTrainConfig, card: dict, path: Path) -> None:
    """Refuse a warm start whose draft is not the one ``cfg`` describes (design, layers, fused layers); a feature
    draft may have fewer layers than asked for: :func:`grow_draft` adds the rest."""
    grows = cfg.design == "feature" == card.get("design") and 0 < int(card.get("num_layers", 0)) < cfg.num_layers
    want = {"design": cfg.design, "num_layers": cfg.num_layers, "feature_layers": list(cfg.feature_layers)}
    have = {"design": card.get("design"), "num_layers": cfg.num_layers if grows else int(card.get("num_layers", 0))}
    have["feature_layers"] = list(card.get("feature_layers", [])) if cfg.design == "feature" else []
    if cfg.design != "feature":
        want["feature_layers"] = []
    if want != have:
        raise SystemExit(f"--init {path}: that draft is {have}, the run asks for {want}; pass matching options")


def grow_draft(draft: torch.nn.Module, target, num_layers: int) -> FeatureDraft:
    """``draft`` with layers appended up to ``num_layers``, each starting as the identity: a target layer whose two
    output projections (attention's and the MLP's) are zero, so the residual stream passes through and the grown
    draft drafts exactly as ``draft`` did at step 0. A second layer is what copying needs (an induction head reads
    a first layer's output: Olsson et al., "In-context Learning and Induction Heads", arXiv 2209.11895)."""
    if not isinstance(draft, FeatureDraft):
        raise ValueError(f"only a feature draft grows, not a {type(draft).__name__}")
    grown = FeatureDraft(
        target,
        num_layers,
        init_from_target=True,
        head_size=int(draft.vocab_subset.numel()),
        feature_layers=draft.feature_layers,
    )
    missing, unexpected = grown.load_state_dict(draft.state_dict(), strict=False)
    new = {f"body.layers.{i}." for i in range(len(draft.body.layers), num_layers)}
    if unexpected or any(not k.startswith(tuple(new)) for k in missing):
        raise ValueError(f"cannot grow the draft: {missing[:3]} missing, {unexpected[:3]} extra")
    with torch.no_grad():
        for layer in list(grown.body.layers)[len(draft.body.layers) :]:
            for name in ("self_attn.o_proj", "mlp.down_proj"):  # the two writes to the residual stream
                cast(torch.nn.Linear, layer.get_submodule(name)).weight.zero_()
    grown.set_vocab_subset(draft.vocab_subset)
    return grown


def data_dirs(cfg: DraftTrainConfig) -> tuple[Path, ...]:
    return tuple(map(Path, cfg.data_dir)) if isinstance(cfg.data_dir, (tuple, list)) else (Path(cfg.data_dir),)


def _layers(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def data_layers(data_dir: Path) -> list[int]:
    """The target layers of the data's ``layer_hidden`` (those a token-id shard's features are computed for)."""
    config = Path(data_dir) / "config.json"
    return list(json.loads(config.read_text())["target_layers"]) if config.exists() else list(TARGET_LAYERS)


def data_layer_positions(data_dir: Path, feature_layers: tuple[int, ...]) -> list[int] | None:
    """Where each of ``feature_layers`` sits in the data's ``layer_hidden`` (None when none are asked for)."""
    if not feature_layers:
        return None
    stored = data_layers(data_dir)
    missing = [i for i in feature_layers if i not in stored]
    if missing:
        raise SystemExit(f"layers {missing} are not in the data of {data_dir} (it holds layers {stored})")
    return [stored.index(i) for i in feature_layers]


def main(argv: list[str] | None = None) -> int:
    defaults = DraftTrainConfig()
    ap = argparse.ArgumentParser(prog="python -m spec_core train draft", description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", choices=["feature", "standalone"], default=defaults.design)
    ap.add_argument("--name", default="", help="asset name (default: the design)")
    ap.add_argument(
        "--data-dir",
        type=Path,
        nargs="+",
        default=[defaults.data_dir],
        help="folder(s) of shards; the last --heldout-shards of each are held out",
    )
    ap.add_argument("--generate-prompts", type=int, default=1280, help="prompts to answer if data is missing")
    ap.add_argument("--num-layers", type=int, default=defaults.num_layers)
    ap.add_argument("--head-size", type=int, default=defaults.head_size, help="trimmed vocabulary (0 = full)")
    ap.add_argument("--steps", type=int, default=defaults.steps)
    ap.add_argument("--batch-size", type=int, default=defaults.batch_size)
    ap.add_argument("--lr", type=float, default=defaults.lr)
    ap.add_argument("--warmup", type=int, default=defaults.warmup)
    ap.add_argument("--unroll-weight", type=float, default=defaults.unroll_weight)
    ap.add_argument(
        "--unroll-steps",
        type=int,
        default=defaults.unroll_steps,
        help="unrolled passes on the draft's own features (training-time test)",
    )
    ap.add_argument(
        "--feature-layers",
        type=_layers,
        default=defaults.feature_layers,
        help="target layers fused into the feature, e.g. 1,14,27 (EAGLE-3; default: none, EAGLE-1)",
    )
    ap.add_argument("--prompt-weight", type=float, default=defaults.prompt_weight)
    ap.add_argument("--heldout-shards", type=int, default=defaults.heldout_shards)
    ap.add_argument("--eval-every", type=int, default=defaults.eval_every)
    ap.add_argument("--max-shards", type=int, default=None)
    ap.add_argument(
        "--train-fraction",
        type=float,
        default=defaults.train_fraction,
        help="train on this fraction of the training shards; the held-out shards stay the same (data scaling)",
    )
    ap.add_argument(
        "--cache-features",
        action="store_true",
        help="keep each training sequence's online features in memory after its first prefill, so later epochs "
        "skip the target (bfloat16, about 6.9 KB a token with five fused layers)",
    )
    ap.add_argument(
        "--init",
        type=Path,
        default=None,
        help="start from this draft's weights and trimmed head (a .safetensors with its .json card), e.g. "
        "assets/drafts/feature.safetensors; a feature draft of fewer layers than --num-layers gains layers that "
        "start as the identity",
    )
    ap.add_argument(
        "--widen-head",
        action="store_true",
        help="train over the trimmed head widened by each text's own tokens so far, as the drafter widens it "
        "(the draft learns to propose the rare words a passage holds)",
    )
    ap.add_argument("--seed", type=int, default=defaults.seed)
    add_threads(ap, defaults.threads)
    ap.add_argument("--device", default=defaults.device)
    ap.add_argument("--work-dir", type=Path, default=defaults.work_dir)
    ap.add_argument("--out-dir", type=Path, default=defaults.out_dir)
    args = ap.parse_args(argv)
    if not 0 < args.train_fraction <= 1:
        ap.error(f"--train-fraction must be in (0, 1], got {args.train_fraction}")
    args.data_dir = tuple(args.data_dir)
    if args.init is not None and not args.init.with_suffix(".json").is_file():
        ap.error(f"--init {args.init}: no draft there (its card {args.init.with_suffix('.json')} is missing)")
    if not any(args.data_dir[0].glob("shard_*.safetensors")):
        target, tok = load_target(args.device, "bfloat16")
        generate_dataset(target, tok, DataConfig(out_dir=args.data_dir[0], num_prompts=args.generate_prompts))
    cfg = DraftTrainConfig(**{k: v for k, v in vars(args).items() if k != "generate_prompts"})
    path = train(cfg)
    print(f"wrote {path} and {path.with_suffix('.json')}")
    return 0
