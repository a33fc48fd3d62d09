"""``python -m spec_core train pacer``: PACER's pre-verifier, trained on simulated speculative rounds.

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274) trains its
pre-verification layer M_B with a cross-entropy loss on data "built by simulating speculative decoding against
the target", so that training sees exactly what inference sees. Here:

1. **simulate** — run the engine (:class:`spec_core.engine.loop.Generation`) with a long window (``fixed:8``) on
   training prompts (:mod:`spec_core.train.prompts`, never the benchmark prompts), greedy and sampled. A
   recording policy keeps, per round, the draft's hidden state at each drafted token, the drafted token id, its
   position in the draft (1..8), the draft's probability of its own token and the label: 1 iff that token *and
   every token before it in the round* was accepted by the verifier (``label_i = i <= accepted``). The draft's
   hidden state at position i depends only on the tokens before it, so a round drafted to 8 shows exactly what a
   shorter draft would have shown at its first positions. Shards of ``shard_size`` prompts go to
   ``runs/pacer/<draft>/`` and are skipped when present (resumable).
2. **train** — BCE on the labels (AdamW, a tqdm bar), prompts split into train / held-out. The paper head
   (:class:`~spec_core.heads.preverifier.BlockPreVerifier`) trains on the blocks of many rounds packed into rows
   under a block-diagonal causal mask (the paper's trick; :func:`packed_loss`), every round segmented at each
   block size of ``block_sizes``; the hybrid head on per-token batches. The held-out AUC, expected calibration
   error and reliability bins go into the card, with the same numbers for every variant trained beside it.
3. **save** — ``assets/heads/pacer-<draft>[-variant].{safetensors,json}`` for the shipped variants (the default
   head as ``pacer-<draft>``), every variant in ``runs/pacer/<draft>/heads/`` for ``analyze preverifier``;
   matched to the draft by its sha256.

The per-round records (accepted count, window, greedy or sampled) also feed ``analyze policies`` (the oracle).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from spec_core.core.assets import HEADS_DIR
from spec_core.core.cli_args import add_threads
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.heads.metrics import calibration, roc_auc
from spec_core.heads.preverifier import (
    BlockPreVerifier,
    BlockPreVerifierConfig,
    PreVerifier,
    PreVerifierConfig,
    head_name,
    save_head,
)
from spec_core.model.models import load_pair
from spec_core.policies.base import DraftSoFar
from spec_core.policies.fixed import FixedLength
from spec_core.train.prompts import training_prompts, written_prompts

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

RUNS_DIR = Path("runs/pacer")
SAMPLED = SamplingConfig(temperature=0.7, top_p=0.9, seed=0)  # the sampled rounds (as the draft's own data)
PROMPT_SEED = 4242  # templated prompts drawn with another seed than the draft's data (1234)


# -- 1. simulation -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimConfig:
    out_dir: Path  # runs/pacer/<draft>
    num_prompts: int = 64  # templated + written training prompts, in shards of `shard_size`
    written_share: float = 0.5  # share of them from the written prompt bank (natural prompts, like the benchmark)
    shard_size: int = 4
    window: int = 8  # the long window the rounds are drafted with (= the head's max position)
    max_new_tokens: int = 48
    sampled_fraction: float = 0.5  # share of shards decoded by sampling (T = 0.7, top-p 0.9) instead of greedy
    seed: int = PROMPT_SEED
    prompts: tuple[str, ...] = ()  # explicit prompts instead of the training prompt lists (tests)


class RecordingWindow(FixedLength):
    """``fixed:window`` that keeps each round's draft hidden states, draft probabilities and verdict."""

    def __init__(self, window: int):
        super().__init__(window)
        # (hidden [γ, H], token_probs [γ], accepted, tokens [γ])
        self.rounds: list[tuple[torch.Tensor, torch.Tensor, int, torch.Tensor]] = []
        self._probs: list[float] = []

    def next_chunk(self, so_far: DraftSoFar) -> int:
        self._probs = so_far.token_probs
        return super().next_chunk(so_far)

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        hidden = inputs.draft_hidden.detach().to("cpu", torch.bfloat16)  # [γ, H_d]
        probs = torch.tensor(self._probs[: inputs.gamma], dtype=torch.float32)  # [γ]
        tokens = inputs.draft_tokens.detach().to("cpu", torch.int32)  # [γ] x_1..x_γ (the paper head embeds them)
        self.rounds.append((hidden, probs, accepted, tokens))


class _RecordingGeneration(Generation):
    """A generation whose policy is a :class:`RecordingWindow` (the engine is otherwise untouched)."""

    def __init__(self, *args, window: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.recorder = RecordingWindow(window)

    def _parts(self):
        drafter, _, verifier = super()._parts()
        return drafter, self.recorder, verifier


def simulation_prompts(cfg: SimConfig) -> list[tuple[str, str]]:
    """(category, prompt) pairs: written-bank and templated training prompts, interleaved, deterministic."""
    if cfg.prompts:
        return [("given", p) for p in cfg.prompts]
    n_written = round(cfg.num_prompts * cfg.written_share)
    written = written_prompts(cfg.seed)[:n_written]
    templated = training_prompts(cfg.num_prompts - len(written), seed=cfg.seed)
    rng = random.Random(cfg.seed)
    out = written + templated
    rng.shuffle(out)
    return out


def simulate_prompt(pair: ModelPair, prompt: str, cfg: SimConfig, sampling: SamplingConfig) -> dict[str, torch.Tensor]:
    """One generation with the long window: per drafted token (N of them) and per round (R)."""
    run = _RecordingGeneration(pair, prompt, f"fixed:{cfg.window}", cfg.max_new_tokens, sampling, window=cfg.window)
    run.run()
    rounds = run.recorder.rounds
    if not rounds:
        return {}
    gammas = torch.tensor([r[0].shape[0] for r in rounds])  # [R]
    accepted = torch.tensor([r[2] for r in rounds])  # [R]
    position = torch.cat([torch.arange(1, int(g) + 1) for g in gammas])  # [N] 1..γ
    kept = torch.repeat_interleave(accepted, gammas)  # [N]
    return {
        "hidden": torch.cat([r[0] for r in rounds]),  # [N, H_d] bf16
        "token_prob": torch.cat([r[1] for r in rounds]),  # [N]
        "token": torch.cat([r[3] for r in rounds]),  # [N] int32 drafted token ids
        "position": position.to(torch.int16),  # [N]
        "label": (position <= kept).to(torch.uint8),  # [N] 1 iff it and all before it were kept
        "round_gamma": gammas.to(torch.int16),  # [R]
        "round_accepted": accepted.to(torch.int16),  # [R]
    }


def sampled_shards(cfg: SimConfig, n_shards: int) -> set[int]:
    """The shards decoded by sampling: ``sampled_fraction`` of them, spread evenly."""
    n_sampled = round(n_shards * cfg.sampled_fraction)
    return set(torch.linspace(0, n_shards - 1, n_sampled).round().long().tolist()) if n_sampled else set()


def prompt_sampling(cfg: SimConfig, shard: int, j: int, sampled: bool) -> SamplingConfig:
    """Greedy, or the sampled setting with a seed of its own for prompt ``j`` of ``shard`` (a rerun reproduces
    every round)."""
    if not sampled:
        return SamplingConfig()
    return SamplingConfig(SAMPLED.temperature, SAMPLED.top_p, seed=cfg.seed + shard * 1000 + j)


def shard_path(out_dir: Path, index: int) -> Path:
    return Path(out_dir) / f"shard_{index:05d}.safetensors"


SHARD_SETTINGS = ("num_prompts", "written_share", "shard_size", "window", "max_new_tokens", "sampled_fraction", "seed")


def sim_config_json(cfg: SimConfig) -> dict[str, str]:
    """What ``config.json`` in a shard folder records (every field, as text)."""
    return {k: str(v) for k, v in asdict(cfg).items()}


def check_resumable(cfg: SimConfig) -> None:
    """Refuse to resume a folder simulated with other settings: shard i holds prompts i·size … of *its* prompt list,
    and the list is shuffled as a whole (another ``--prompts`` reorders it), so mixing two lists would label rounds
    with the wrong prompts and break the held-out split."""
    path = cfg.out_dir / "config.json"
    if not path.exists() or not any(cfg.out_dir.glob("shard_*.safetensors")):
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    new = sim_config_json(cfg)
    changed = [k for k in (*SHARD_SETTINGS, "prompts") if k in old and old[k] != new[k]]
    if changed:
        was = ", ".join(f"{k} = {old[k]}" for k in changed)
        raise SpecScopeError(
            f"{cfg.out_dir} holds shards simulated with {was}; resuming with other settings would mix two prompt "
            "lists. Simulate into an empty --work-dir, or repeat those settings"
        )


def simulation_prompt_texts(config: dict) -> list[str] | None:
    """The prompts of a shard folder, index by index, rebuilt from its ``config.json`` (None when it cannot be)."""
    try:
        cfg = SimConfig(
            Path(config.get("out_dir", ".")),
            num_prompts=int(config["num_prompts"]),
            written_share=float(config.get("written_share", 0.5)),
            seed=int(config.get("seed", PROMPT_SEED)),
        )
    except (KeyError, TypeError, ValueError):
        return None
    if config.get("prompts", "()") != "()":
        return None  # explicit prompts (tests): not the training lists
    return [text for _, text in simulation_prompts(cfg)]


def trained_prompt_texts(card: dict) -> set[str]:
    """The prompts a head's training split read: its card's simulation (prompt count, seed, written share), every
    index not a multiple of ``heldout_every``. A card from before these were recorded: the count it simulated and
    the default seed and share, which that run used."""
    data, training = card.get("data", {}), card.get("training", {})
    config = {
        "num_prompts": data.get("num_prompts", data.get("prompts_simulated", 0)),
        "seed": data.get("prompt_seed", PROMPT_SEED),
        "written_share": data.get("written_share", 0.5),
    }
    texts = simulation_prompt_texts(config) or []
    every = int(training.get("heldout_every", TrainConfig.heldout_every))
    return {t for i, t in enumerate(texts) if i % every != 0}


def simulate(pair: ModelPair, cfg: SimConfig, progress: bool = True) -> list[Path]:
    """Write the shards that are missing (resumable with the same settings); returns every shard's path."""
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    check_resumable(cfg)
    (cfg.out_dir / "config.json").write_text(json.dumps(sim_config_json(cfg), indent=2))  # before the first shard
    prompts = simulation_prompts(cfg)
    n_shards = math.ceil(len(prompts) / cfg.shard_size)
    todo = [i for i in range(n_shards) if not shard_path(cfg.out_dir, i).exists()]
    bar = tqdm(todo, desc=f"simulate rounds ({cfg.out_dir.name})", unit="shard", disable=not progress)
    for i in bar:
        sampled = i in sampled_shards(cfg, n_shards)
        parts, prompt_ids = [], []
        for j, (_, prompt) in enumerate(prompts[i * cfg.shard_size : (i + 1) * cfg.shard_size]):
            rec = simulate_prompt(pair, prompt, cfg, prompt_sampling(cfg, i, j, sampled))
            if rec:
                parts.append(rec)
                prompt_ids.append(torch.full((rec["position"].shape[0],), i * cfg.shard_size + j, dtype=torch.int32))
        if not parts:
            continue
        shard = {k: torch.cat([p[k] for p in parts]).contiguous() for k in parts[0]}
        shard["prompt"] = torch.cat(prompt_ids)
        shard["round_prompt"] = torch.cat(
            [
                torch.full((p["round_gamma"].shape[0],), int(ids[0]), dtype=torch.int32)
                for p, ids in zip(parts, prompt_ids)
            ]
        )
        meta = {"sampled": str(sampled), "window": str(cfg.window), "draft_sha256": str(pair.draft_card.get("sha256"))}
        tmp = shard_path(cfg.out_dir, i).with_suffix(".tmp")
        save_file(shard, str(tmp), metadata=meta)
        tmp.rename(shard_path(cfg.out_dir, i))
        bar.set_postfix(tokens=int(shard["label"].shape[0]), kept=f"{float(shard['label'].float().mean()):.2f}")
    return sorted(Path(cfg.out_dir).glob("shard_*.safetensors"))


# -- 2. training ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    # steps, weight decay and dropout: chosen on a validation split of the *training* prompts (index % 4 == 2,
    # the held-out ones set aside; docs/PACER.md): the paper head over-fits its 2 × 576-wide inputs past ~600 steps
    # (3,000 steps: validation AUC 0.80), the hybrid is indifferent (0.944 at 400 steps, wd 0.1, or 600, wd 1.0)
    steps: int = 600
    batch_size: int = 256  # tokens per step (the paper head: packed rows of seq_len)
    lr: float = 1e-3
    weight_decay: float = 1.0
    width: int = 16  # measured: 16 wide is as good held out as 64 and calibrates better on this data
    heldout_every: int = 4  # prompts whose index is a multiple of this are held out
    seed: int = 0
    variants: tuple[str, ...] = ("paper", "paper-nopos", "paper-notoken", "paper-logit", "hybrid", "nopos")
    ship_variants: tuple[str, ...] = ("paper",)  # saved in assets/heads (the others: in runs/pacer/<draft>/heads)
    block_sizes: tuple[int, ...] = (1, 2, 4)  # the paper head learns every block size (one head serves any b)
    seq_len: int = 64  # packed sequence length of the paper head's training batches
    eval_block: int = 2  # the block size the paper head's held-out numbers in the card are computed at
    dropout: float = 0.3  # the paper head's input dropout


VARIANTS = {  # hybrid heads (PreVerifier): name → (use_position, use_token_prob)
    "hybrid": (True, True),  # SpecScope's first head, `pacer-<draft>` (docs/PACER.md says why it stays the default)
    "nopos": (False, True),
    "noprob": (True, False),
    "hidden": (False, False),
}
PAPER_VARIANTS = {  # paper heads (BlockPreVerifier): name → (use_position, use_token, use_draft_logit)
    "paper": (True, True, False),
    "paper-nopos": (False, True, False),  # no position anywhere in the inputs
    "paper-notoken": (True, False, False),  # h_i alone: cannot tell which token was drafted
    "paper-logit": (True, True, True),  # a diagnosis, never shipped: plus h_i · E[x_i], the draft's own logit
}
DEFAULT_HEAD = "hybrid"  # the variant shipped as `pacer-<draft>` (`pacer`); the others keep their name as suffix


def load_data(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Every shard concatenated, plus ``prob_features`` ``[N, 2]`` (log q and its running sum per round)."""
    if not paths:
        raise SpecScopeError("no PACER data shards: run the simulation first (`python -m spec_core train pacer`)")
    shards = [load_file(str(p)) for p in paths]
    data = {k: torch.cat([s[k] for s in shards]) for k in shards[0]}
    data["prob_features"] = round_prob_features(data["token_prob"], data["position"].long())
    return data


def round_prob_features(token_prob: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """``[N]`` probabilities of rounds laid end to end (``position`` restarts at 1 each round) → ``[N, 2]``:
    log q_i and Σ_{j≤i in the same round} log q_j — what :meth:`PreVerifier.prob_features` gives per round."""
    logq = token_prob.float().clamp_min(1e-6).log()  # [N]
    total = logq.cumsum(0)  # [N]
    starts = torch.nonzero(position == 1).squeeze(-1)  # [R]
    round_id = (position == 1).long().cumsum(0) - 1  # [N]
    before = (total[starts] - logq[starts])[round_id]  # [N] the running total before each round
    return torch.stack([logq, total - before], dim=-1)


def evaluate(head: PreVerifier, data: dict[str, torch.Tensor], mask: torch.Tensor) -> dict:
    """Held-out AUC, BCE, ECE and reliability bins of ``head`` on the tokens in ``mask``."""
    with torch.inference_mode():
        logits = head(data["hidden"][mask].float(), data["position"][mask].long(), data["prob_features"][mask])
    labels = data["label"][mask].float()
    probs = torch.sigmoid(logits)
    ece, bins = calibration(probs, labels)
    return {
        "auc": round(roc_auc(probs, labels), 4),
        "bce": round(float(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)), 4),
        "ece": round(ece, 4),
        "tokens": int(mask.sum()),
        "kept_rate": round(float(labels.mean()), 4),
        "reliability": bins,
    }


def train_head(data: dict[str, torch.Tensor], cfg: TrainConfig, variant: str = "hybrid", progress: bool = True):
    """Fit one pre-verifier with BCE; returns (head, held-out metrics)."""
    use_position, use_token_prob = VARIANTS[variant]
    torch.manual_seed(cfg.seed)
    max_len = int(data["position"].max())
    head = PreVerifier(
        PreVerifierConfig(int(data["hidden"].shape[1]), max_len, cfg.width, use_position, use_token_prob)
    )
    heldout = (data["prompt"] % cfg.heldout_every) == 0  # [N] split by prompt, never within one
    train_idx = torch.nonzero(~heldout).squeeze(-1)
    if len(train_idx) == 0 or not heldout.any():
        raise SpecScopeError("PACER data too small to split into train and held-out prompts; simulate more prompts")
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    bar = tqdm(range(cfg.steps), desc=f"train pacer head ({variant})", unit="step", disable=not progress)
    for step in bar:
        idx = train_idx[torch.randint(len(train_idx), (min(cfg.batch_size, len(train_idx)),), generator=gen)]
        logits = head(data["hidden"][idx].float(), data["position"][idx].long(), data["prob_features"][idx])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, data["label"][idx].float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0:
            bar.set_postfix(bce=f"{loss.item():.4f}")
    head.eval()
    metrics = evaluate(head, data, heldout)
    # the draft's own cumulative probability Π q_j as a score: what a confidence rule already knows
    metrics["auc_draft_cumprob"] = round(roc_auc(data["prob_features"][heldout][:, 1], data["label"][heldout]), 4)
    # the decision that matters most: after the first drafted token, is it kept? (position alone says nothing)
    first = heldout & (data["position"] == 1)
    with torch.inference_mode():
        first_scores = head(data["hidden"][first].float(), data["position"][first].long(), data["prob_features"][first])
    metrics["auc_position1"] = round(roc_auc(first_scores, data["label"][first]), 4)
    metrics["auc_position1_draft_q"] = round(roc_auc(data["token_prob"][first], data["label"][first]), 4)
    return head, metrics


# -- 2b. the paper head: blocks packed under a block-diagonal mask --------------------------------------------


def block_segments(position: torch.Tensor, block: int) -> torch.Tensor:
    """``[N]`` positions of rounds laid end to end (restarting at 1) → ``[N]`` block ids: tokens (k−1)·b+1..k·b of
    a round form block k, the blocks PACER pre-verifies at block size ``block``."""
    round_id = (position == 1).long().cumsum(0) - 1  # [N]
    key = round_id * 1024 + (position.long() - 1) // block  # [N] unique per (round, block)
    return torch.unique_consecutive(key, return_inverse=True)[1]


def pack_segments(segments: torch.Tensor, seq_len: int, order: torch.Tensor | None = None):
    """Pack the blocks of ``segments`` ``[N]`` (consecutive ids, contiguous) into rows of at most ``seq_len``
    tokens, whole blocks only, in ``order`` (a permutation of block ids; default as they come). Returns
    (token index ``[S, L]``, segment id ``[S, L]``), both −1 where a row is padded."""
    counts = torch.bincount(segments)  # [B] tokens per block
    starts = torch.cumsum(counts, 0) - counts  # [B]
    order = torch.arange(len(counts)) if order is None else order
    rows: list[list[int]] = []
    row: list[int] = []
    fill = 0
    for b in order.tolist():
        n = int(counts[b])
        if fill + n > seq_len and row:
            rows.append(row)
            row, fill = [], 0
        row.append(b)
        fill += n
    if row:
        rows.append(row)
    index = torch.full((len(rows), seq_len), -1, dtype=torch.long)
    seg = torch.full((len(rows), seq_len), -1, dtype=torch.long)
    for r, blocks in enumerate(rows):
        at = 0
        for b in blocks:
            n, s0 = int(counts[b]), int(starts[b])
            index[r, at : at + n] = torch.arange(s0, s0 + n)
            seg[r, at : at + n] = b
            at += n
    return index, seg


def paper_logits(head: BlockPreVerifier, data: dict[str, torch.Tensor], index: torch.Tensor, seg: torch.Tensor):
    """Logits ``[S, L]`` of packed rows (``index`` into the flat token arrays; −1 = padding)."""
    safe = index.clamp_min(0)
    embeds = data["token_embed"][safe].float() if head.cfg.use_token else None  # [S, L, H]
    return head(data["hidden"][safe].float(), embeds, data["position"][safe].long(), seg)


def paper_predictions(
    head: BlockPreVerifier, data: dict[str, torch.Tensor], mask: torch.Tensor, block: int, seq_len: int = 256
) -> torch.Tensor:
    """â ``[n]`` of the tokens in ``mask`` (whole rounds), each scored inside its block of ``block`` tokens."""
    sel = torch.nonzero(mask).squeeze(-1)
    sub: dict[str, torch.Tensor] = {k: data[k][sel] for k in ("hidden", "position", "token_embed") if k in data}
    index, seg = pack_segments(block_segments(sub["position"], block), seq_len)
    out = torch.empty(len(sel))
    with torch.inference_mode():
        for i in range(0, len(index), 64):
            logits = paper_logits(head, sub, index[i : i + 64], seg[i : i + 64])
            valid = index[i : i + 64] >= 0
            out[index[i : i + 64][valid]] = torch.sigmoid(logits[valid]).float()
    return out


def token_embeddings(pair: ModelPair, tokens: torch.Tensor) -> torch.Tensor:
    """``[N]`` token ids → ``[N, H]`` bf16: the pair's input embeddings (which every embedded draft shares)."""
    table = cast(torch.nn.Embedding, pair.target.get_input_embeddings())
    with torch.inference_mode():
        return torch.cat(
            [
                table(tokens[i : i + 4096].long().to(table.weight.device)).to("cpu", torch.bfloat16)
                for i in range(0, len(tokens), 4096)
            ]
        )


def train_paper_head(data: dict[str, torch.Tensor], cfg: TrainConfig, variant: str = "paper", progress: bool = True):
    """Fit one paper head with BCE on packed blocks of every size in ``cfg.block_sizes``; returns (head, held-out
    metrics at ``cfg.eval_block`` and per block size)."""
    use_position, use_token, use_draft_logit = PAPER_VARIANTS[variant]
    torch.manual_seed(cfg.seed)
    max_len = int(data["position"].max())
    head = BlockPreVerifier(
        BlockPreVerifierConfig(
            int(data["hidden"].shape[1]),
            max_len,
            cfg.width,
            use_position,
            use_token,
            dropout=cfg.dropout,
            use_draft_logit=use_draft_logit,
        )
    )
    heldout = (data["prompt"] % cfg.heldout_every) == 0  # [N] split by prompt, never within one
    if heldout.all() or not heldout.any():
        raise SpecScopeError("PACER data too small to split into train and held-out prompts; simulate more prompts")
    train: dict[str, torch.Tensor] = {
        k: data[k][~heldout] for k in ("hidden", "position", "token_embed", "label") if k in data
    }
    # every training round once per block size: a block's tokens see each other (causally), never another block's
    pools = []
    for b in cfg.block_sizes:
        pools.append(block_segments(train["position"], b))
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(cfg.seed)
    rows_per_step = max(1, cfg.batch_size // cfg.seq_len)
    packed: list[tuple[torch.Tensor, torch.Tensor]] = []
    bar = tqdm(range(cfg.steps), desc=f"train pacer head ({variant})", unit="step", disable=not progress)
    for step in bar:
        if len(packed) < rows_per_step:  # a new epoch: every pool's blocks, shuffled, packed afresh
            packed = []
            for segs in pools:
                index, seg = pack_segments(segs, cfg.seq_len, torch.randperm(int(segs.max()) + 1, generator=gen))
                packed += list(zip(index, seg + 0))
            perm = torch.randperm(len(packed), generator=gen).tolist()
            packed = [packed[i] for i in perm]
        batch, packed = packed[:rows_per_step], packed[rows_per_step:]
        index = torch.stack([r[0] for r in batch])  # [S, L]
        seg = torch.stack([r[1] for r in batch])  # [S, L]
        loss = packed_loss(head, train, index, seg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0:
            bar.set_postfix(bce=f"{loss.item():.4f}")
    head.eval()
    return head, paper_metrics(head, data, heldout, cfg)


def packed_loss(head: BlockPreVerifier, data: dict[str, torch.Tensor], index: torch.Tensor, seg: torch.Tensor):
    """Mean BCE over the real tokens of packed rows (padding excluded): the same number as scoring each block
    on its own and averaging over all their tokens (tests/engine/test_preverifier.py checks it, gradients included)."""
    logits = paper_logits(head, data, index, seg)  # [S, L]
    valid = index >= 0
    labels = data["label"][index.clamp_min(0)].float()
    return torch.nn.functional.binary_cross_entropy_with_logits(logits[valid], labels[valid])


def paper_metrics(head: BlockPreVerifier, data: dict[str, torch.Tensor], heldout: torch.Tensor, cfg: TrainConfig):
    """Held-out AUC, BCE, ECE and reliability at ``cfg.eval_block``, AUC and ECE at every block size, first-position
    AUC, and the draft's own Π q AUC on the same tokens."""
    labels = data["label"][heldout].float()
    by_block = {}
    for b in sorted({*cfg.block_sizes, cfg.eval_block}):
        probs = paper_predictions(head, data, heldout, b)
        ece, bins = calibration(probs, labels)
        by_block[b] = (probs, ece, bins)
    probs, ece, bins = by_block[cfg.eval_block]
    logits = torch.logit(probs.clamp(1e-6, 1 - 1e-6))
    first = data["position"][heldout] == 1
    return {
        "auc": round(roc_auc(probs, labels), 4),
        "bce": round(float(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)), 4),
        "ece": round(ece, 4),
        "block": cfg.eval_block,
        "tokens": int(heldout.sum()),
        "kept_rate": round(float(labels.mean()), 4),
        "reliability": bins,
        "by_block": {
            str(b): {"auc": round(roc_auc(p, labels), 4), "ece": round(e, 4)} for b, (p, e, _) in by_block.items()
        },
        "auc_draft_cumprob": round(roc_auc(data["prob_features"][heldout][:, 1], labels), 4),
        "auc_position1": round(roc_auc(probs[first], labels[first]), 4),
        "auc_position1_draft_q": round(roc_auc(data["token_prob"][heldout][first], labels[first]), 4),
    }


# -- 3. command line -----------------------------------------------------------------------------------------


def data_summary(data: dict[str, torch.Tensor], paths: list[Path], sim: SimConfig) -> dict:
    sampled = [load_meta(p).get("sampled") == "True" for p in paths]
    return {
        "dir": str(sim.out_dir),
        "prompts": "training prompts (spec_core.train.prompts): written bank + templates, seed "
        f"{sim.seed}; never prompts/*.jsonl",
        "shards": len(paths),
        "prompts_simulated": int(data["prompt"].unique().numel()),
        "num_prompts": sim.num_prompts,  # with the seed and share: which prompts, index by index
        "prompt_seed": sim.seed,
        "written_share": sim.written_share,
        "heldout_prompts": "index % heldout_every == 0 (see training)",
        "sampled_shards": int(sum(sampled)),
        "sampling": f"greedy and T={SAMPLED.temperature}, top-p {SAMPLED.top_p}",
        "window": sim.window,
        "max_new_tokens": sim.max_new_tokens,
        "drafted_tokens": int(data["label"].shape[0]),
        "rounds": int(data["round_gamma"].shape[0]),
        "kept_rate": round(float(data["label"].float().mean()), 4),
        "kept_rate_by_position": [
            round(float(data["label"][data["position"] == i].float().mean()), 4)
            for i in range(1, int(data["position"].max()) + 1)
        ],
    }


def load_meta(path: Path) -> dict:
    with safe_open(str(path), "pt") as f:
        return f.metadata() or {}


def run(
    pair: ModelPair,
    draft: str,
    sim: SimConfig,
    cfg: TrainConfig,
    out_dir: Path = HEADS_DIR,
    progress: bool = True,
    train_only: bool = False,
    work_heads: Path | None = None,
    default_head: str = DEFAULT_HEAD,
):
    """Simulate (resuming; ``train_only``: use the shards already written), train every variant, save the shipped
    ones in ``out_dir`` (``default_head`` as ``pacer-<draft>``, the others as ``pacer-<draft>-<variant>``) and every
    variant in ``work_heads`` (default ``<sim.out_dir>/heads``, as ``pacer-<draft>-<variant>``, for ``analyze
    preverifier``); returns {variant: metrics}."""
    t0 = time.time()
    paths = sorted(sim.out_dir.glob("shard_*.safetensors")) if train_only else simulate(pair, sim, progress)
    data = load_data(paths)
    if any(v in PAPER_VARIANTS for v in cfg.variants):
        if "token" not in data:
            raise SpecScopeError(
                "these shards predate the drafted token ids the paper head reads: simulate again "
                "into an empty --work-dir"
            )
        data["token_embed"] = token_embeddings(pair, data["token"])
    sha = pair.draft_card.get("sha256")
    results, heads = {}, {}
    for variant in cfg.variants:
        trainer = train_paper_head if variant in PAPER_VARIANTS else train_head
        heads[variant], results[variant] = trainer(data, cfg, variant, progress)
        m = results[variant]
        print(
            f"{variant}: held-out AUC {m['auc']}, ECE {m['ece']}, BCE {m['bce']} (draft's own Π q: AUC "
            f"{m['auc_draft_cumprob']}); first position: AUC {m['auc_position1']} (draft's q: "
            f"{m['auc_position1_draft_q']})" + (f"; by block size {m['by_block']}" if "by_block" in m else "")
        )
    ablations = {v: {k: m[k] for k in ("auc", "ece", "bce", "auc_position1")} for v, m in results.items()}
    work_heads = Path(work_heads) if work_heads is not None else sim.out_dir / "heads"
    for variant, head in heads.items():
        shipped = variant in cfg.ship_variants
        suffix = "" if variant == default_head else variant  # in assets/heads: the default head is `pacer-<draft>`
        card = {
            "variant": suffix,
            "paper": "PACER: Blockwise Pre-verification for Speculative Decoding with Adaptive Length, arXiv 2602.01274",
            "draft": draft,
            "draft_sha256": sha,
            "parameters": head.num_parameters(),
            "data": data_summary(data, paths, sim),
            "training": {
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()},
                "loss": "BCE",
                "optimizer": "AdamW, one-cycle",
                "wall_s": round(time.time() - t0, 1),
                "packing": "blocks of many decoding steps per sequence, block-diagonal causal mask"
                if variant in PAPER_VARIANTS
                else "per-token batches",
            },
            "heldout": results[variant],
            "ablations": ablations,
        }
        for directory, name in [(work_heads, head_name(draft, variant))] + (
            [(Path(out_dir), head_name(draft, suffix))] if shipped else []
        ):
            save_head(head, name, {**card, "variant": name.removeprefix(head_name(draft)).lstrip("-")}, directory)
            print(f"saved {Path(directory) / name}.safetensors ({head.num_parameters()} parameters)")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core train pacer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default="feature", help="embedded draft asset: feature (default) or standalone")
    ap.add_argument("--prompts", type=int, default=SimConfig.num_prompts, help="training prompts to simulate")
    ap.add_argument("--window", type=int, default=SimConfig.window, help="the long window of the simulated rounds")
    ap.add_argument("--prompt-seed", type=int, default=PROMPT_SEED, help="which training prompts are simulated")
    ap.add_argument("--max-new-tokens", type=int, default=SimConfig.max_new_tokens)
    ap.add_argument("--sampled-fraction", type=float, default=SimConfig.sampled_fraction)
    ap.add_argument("--steps", type=int, default=TrainConfig.steps)
    ap.add_argument(
        "--batch-size",
        type=int,
        default=TrainConfig.batch_size,
        help="tokens per step (paper head: packed rows of --seq-len)",
    )
    ap.add_argument("--seq-len", type=int, default=TrainConfig.seq_len, help="packed row length (paper head)")
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--width", type=int, default=TrainConfig.width)
    ap.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay)
    ap.add_argument("--dropout", type=float, default=TrainConfig.dropout, help="the paper head's input dropout")
    ap.add_argument("--seed", type=int, default=TrainConfig.seed)
    ap.add_argument(
        "--variants",
        default=",".join(TrainConfig.variants),
        help=f"heads to train: paper {', '.join(PAPER_VARIANTS)}; hybrid {', '.join(VARIANTS)}",
    )
    ap.add_argument(
        "--ship",
        default=",".join(TrainConfig.ship_variants),
        help="variants saved in --out-dir (--default-head as pacer-<draft>, the others as pacer-<draft>-<variant>); every "
        "variant also goes to <work-dir>/<draft>/heads; '' ships none",
    )
    ap.add_argument(
        "--default-head",
        default=DEFAULT_HEAD,
        help="the shipped variant saved as pacer-<draft> (the "
        "head `pacer` uses); docs/PACER.md says why it is the default",
    )
    ap.add_argument(
        "--block-sizes",
        default=",".join(map(str, TrainConfig.block_sizes)),
        help="block sizes the paper head trains on (every round once per size)",
    )
    ap.add_argument("--eval-block", type=int, default=TrainConfig.eval_block, help="block size of the card's numbers")
    ap.add_argument("--work-dir", default=str(RUNS_DIR), help="where the simulated shards go (resumable)")
    ap.add_argument("--out-dir", default=str(HEADS_DIR))
    ap.add_argument("--simulate-only", action="store_true", help="write the data shards and stop")
    ap.add_argument("--train-only", action="store_true", help="train on the shards already written (no simulation)")
    add_threads(ap, 1)
    args = ap.parse_args(argv)
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    ship = tuple(v.strip() for v in args.ship.split(",") if v.strip())
    if unknown := [v for v in (*variants, *ship) if v not in VARIANTS and v not in PAPER_VARIANTS]:
        raise SpecScopeError(f"train pacer: unknown variants {unknown}; known: {sorted({*VARIANTS, *PAPER_VARIANTS})}")
    if missing := [v for v in ship if v not in variants]:
        raise SpecScopeError(f"train pacer: --ship {missing} not among --variants")
    blocks = tuple(int(b) for b in args.block_sizes.split(",") if b.strip())
    if args.window < 1 or args.prompts < 1 or args.steps < 1 or not 0 <= args.sampled_fraction <= 1:
        raise SpecScopeError("train pacer: --window, --prompts and --steps must be >= 1, --sampled-fraction in [0, 1]")
    if not blocks or min(blocks) < 1 or args.eval_block < 1 or args.seq_len < max(blocks):
        raise SpecScopeError("train pacer: block sizes and --eval-block must be >= 1, --seq-len >= the largest block")
    torch.set_num_threads(args.threads)

    pair = load_pair("embedded", draft=args.draft)
    if pair.draft_design != args.draft:
        raise SpecScopeError(f"train pacer: the embedded pair has no {args.draft!r} draft (got {pair.draft_design})")
    sim = SimConfig(
        Path(args.work_dir) / args.draft,
        args.prompts,
        window=args.window,
        max_new_tokens=args.max_new_tokens,
        sampled_fraction=args.sampled_fraction,
        seed=args.prompt_seed,
    )
    if args.simulate_only:
        print(f"{len(simulate(pair, sim))} shards in {sim.out_dir}")
        return 0
    cfg = TrainConfig(
        args.steps,
        args.batch_size,
        args.lr,
        args.weight_decay,
        width=args.width,
        seed=args.seed,
        variants=variants,
        dropout=args.dropout,
        ship_variants=ship,
        block_sizes=blocks,
        seq_len=args.seq_len,
        eval_block=args.eval_block,
    )
    run(pair, args.draft, sim, cfg, Path(args.out_dir), train_only=args.train_only, default_head=args.default_head)
    return 0
