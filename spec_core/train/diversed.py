"""Train DIVERSED's ensemble head with REINFORCE: ``python -m spec_core train diversed``.

"DIVERSED: Relaxed Speculative Decoding via Dynamic Ensemble Verification" (arXiv 2604.07622), objective
E[R(x_{1:T}) + λ Σ_t (1 − TV(q_t, ν_t))] with ν_t = w_t·p_t + (1 − w_t)·q_t and w_t from the head
(:mod:`spec_core.heads.ensemble`). We follow the paper's intent — more 1 − TV (more acceptance) is rewarded —
where the authors' code's sign looks inverted (docs/ALGORITHMS.md §2).

1. Rollouts: the real speculative engine (``fixed:4+diversed`` at ``--temperature``, default 1) with the head
   being trained. At temperature 0 the ``argmax`` rule decides deterministically, so ``--estimator gaussian
   --explore σ`` perturbs the head's logit with N(0, σ²) noise in the rollouts and scores that noise
   (:func:`gaussian_score`); the head ships as the noise-free mean. For each emitted drafted position the recorder keeps the draft's and the target's hidden
   states, whether the draft was accepted, p_t and q_t of the drafted token x_t and of the emitted token y_t,
   and TV(p_t, q_t).
2. The score (``--estimator``, :func:`score_logprobs`). A rollout's text is a function of every random choice
   the verifier made, so an unbiased policy gradient needs the log-probability of each choice that depends on
   w_t: ``decision`` (the default) takes log a_t for an accepted draft (a_t = min(1, ν_t(x_t)/q_t(x_t))) and
   log(1 − a_t) + log r_t(y_t) at the rejection, r_t = norm(max(0, ν_t − q_t)); drafting from q and the bonus
   token from p do not depend on w. ``token`` is the earlier Σ_t log ν_t(y_t): each *marginal* token is ν_t,
   but whether y_t came from an accepted draft or from a rejection decides whether the next token is a bonus
   drawn from p, so that score is biased (docs/DIVERSED.md, "The policy gradient"; tests/unit/test_diversed_gradient.py).
3. Loss per batch, REINFORCE++ style (arXiv 2501.03262): the advantage A = R − b, with b the mean reward of
   the item's *other* rollouts when ``--group G`` > 1 (the leave-one-out baseline, "RLOO", Kool et al. 2019,
   which takes out how hard the item is) or a running mean per task when G = 1; then normalised over the batch
   (``--advantage-norm batch``: (A − mean)/std; ``none`` keeps it raw). Per rollout −Σ_t min(ρ_t·A,
   clip(ρ_t, 1 − ε, 1 + ε)·A) − λ·Σ_t (1 − w_t·TV(p_t, q_t)), averaged over the batch, where ρ_t is the ratio
   of a decision's probability under the head being updated to that under the head that rolled out
   (``--clip-eps`` ε, default 0.2; ``--updates`` optimiser steps per batch of rollouts, default 1, where ρ = 1
   and the gradient is plain REINFORCE), and the gradient's norm clipped to ``--max-grad-norm`` (0 = off).
   1 − TV(q, ν) = 1 − w·TV(p, q) for a probability mixture, so the regulariser is exact and differentiable.
4. AdamW (the authors' lr 5e-4), progress bar, a validation check after each epoch (quality and acceptance
   of ``fixed:4+diversed`` at the rollouts' ``--temperature``, the one the head ships under, on the *last* ``--val-per-task`` items of each task of the
   **train** split, which are never rolled out; the eval split stays untouched for ``pareto``), checkpoint
   after each epoch in ``--work-dir`` (rerun the same command to resume), and the asset (safetensors + card)
   in ``--out-dir``.
5. Model selection on that validation set: the same items run with ``lossless`` once, and the shipped head is
   the epoch with the best validation quality among those accepting at least ``--min-acceptance-ratio`` ×
   lossless (the issue's 1.2×); the last epoch when none does, or when the ratio is 0.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from spec_core.core import rules
from spec_core.core.assets import HEADS_DIR, save_asset, source_commit
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.methods import parse_method
from spec_core.engine.rewards import TASKS, EvalItem, load_items, reward, run_item
from spec_core.heads.ensemble import EnsembleHead, pair_hidden_sizes
from spec_core.model.models import load_pair
from spec_core.verifiers.diversed import DiversedParams, DiversedVerifier

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

TRAIN_HEAD = "__training__"  # the pair.extras key the rollouts find the head under


@dataclass(frozen=True)
class TrainConfig:
    name: str = "diversed"  # asset name in --out-dir
    estimator: str = "decision"  # the score: "decision" (unbiased) | "token" (Σ log ν_t(y_t), biased; kept to show it)
    # | "gaussian" (temperature 0: the argmax rule decides deterministically, so the rollouts explore w_t instead)
    explore: float = 0.0  # σ of the Gaussian noise on the head's logit in "gaussian" rollouts
    policy: str = "fixed:4"  # draft-length policy of the rollouts
    temperature: float = 1.0  # rollouts sample ν (> 0), or 0 with the "gaussian" estimator
    temperatures: str = ""  # a comma list (e.g. "0.1,0.4,0.7,1"): the band the head serves; rollout and validation
    # item n run at its n-th temperature in turn (overrides --temperature)
    epochs: int = 2  # the authors' default
    batch_size: int = 8  # items per update (the authors' default), each rolled out --group times
    group: int = 1  # rollouts per item; > 1 uses the leave-one-out baseline of the item's other rollouts
    lam: float = 0.1  # λ of the acceptance regulariser (per token, summed over the rollout)
    advantage_norm: str = "batch"  # REINFORCE++: "batch" = (A − mean)/std over the batch's rollouts | "none"
    clip_eps: float = 0.2  # ε of the clipped ratio of each decision's probability (PPO, REINFORCE++; 0 = no clip)
    updates: int = 1  # optimiser steps per batch of rollouts (1: the ratio is 1, the clip never binds)
    max_grad_norm: float = 1.0  # clip the gradient's global norm (REINFORCE++; 0 = off)
    lr: float = 5e-4  # AdamW, the authors' default
    init_w: float = 0.5  # the head's w everywhere before training (0.5 = the authors' init)
    freeze_bias: bool = False  # centre the inputs on the first batch and keep the bias: the mean w stays init_w
    train_per_task: int = 0  # first N training items of each task (0 = all)
    val_per_task: int = 4  # the last N training items of each task: never rolled out, checked each epoch (0 = skip)
    max_new_tokens: int = 0  # cap on each item's own limit (0 = the item's)
    baseline_momentum: float = 0.8  # running-mean baseline per task
    min_acceptance_ratio: float = 1.2  # model selection: held-out acceptance ≥ this × lossless (0 = last epoch)
    seed: int = 0
    dtype: str = "bfloat16"
    threads: int = 1
    work_dir: str = "runs/diversed/train"
    out_dir: str = str(HEADS_DIR)
    progress: bool = True


class RecordingVerifier(DiversedVerifier):
    """The diversed verifier that also records, per emitted drafted position, what the score and the loss need:
    whether the draft was accepted, p and q of the drafted token x and of the emitted token y (y = x when
    accepted, the recovered token at the rejection), TV(p, q) and both hidden states."""

    def __init__(self, head: EnsembleHead, params: DiversedParams, explore: float = 0.0, seed: int = 0):
        super().__init__(head, params)
        self.rounds: list[dict[str, torch.Tensor]] = []
        self.explore = explore  # σ of the Gaussian exploration on the head's logit (0: none)
        self.noise = torch.Generator().manual_seed(seed)
        self.sampled_logit: torch.Tensor | None = None  # [γ] the perturbed logits of the current round

    def weights(self, inputs: RoundInputs) -> torch.Tensor:
        if self.explore <= 0:
            return super().weights(inputs)
        assert inputs.target_hidden is not None  # needs_target_hidden
        mean = self.head.logit(inputs.draft_hidden, inputs.target_hidden[: inputs.gamma]).detach().float()  # [γ]
        self.sampled_logit = mean + self.explore * torch.randn(mean.shape, generator=self.noise)
        return torch.sigmoid(self.sampled_logit)

    def verify(self, inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None):
        verdict = super().verify(inputs, sampling, generator)
        assert inputs.target_hidden is not None  # needs_target_hidden (weights refuses a round without it)
        gamma = inputs.gamma
        n = min(verdict.accepted + 1, gamma)  # the accepted drafts + the rejected one (not the bonus position)
        drafted = inputs.draft_tokens[:n]  # [n] x_t
        emitted = torch.cat(
            [inputs.draft_tokens[: verdict.accepted], inputs.draft_tokens.new_tensor([verdict.next_token])]
        )[:n]  # [n] y_t
        if sampling.greedy:  # the argmax rule's ν reads the temperature-1 softmaxes (so does its 1 − TV)
            p = torch.softmax(inputs.target_logits[:n].float(), -1)  # [n, V]
        else:
            p = rules.warp_probs(inputs.target_logits[:n], sampling.temperature, sampling.top_k, sampling.top_p)
        q = inputs.draft_probs[:n].float()  # [n, V]
        idx = torch.arange(n)
        explored = {} if self.sampled_logit is None else {"z": self.sampled_logit[:n].clone()}
        self.rounds.append(
            {
                **explored,
                "draft_hidden": inputs.draft_hidden[:n].float(),
                "target_hidden": inputs.target_hidden[:n].float(),
                "accepted": idx < verdict.accepted,
                "p_x": p[idx, drafted],
                "q_x": q[idx, drafted],
                "p_y": p[idx, emitted],
                "q_y": q[idx, emitted],
                "tv": rules.total_variation(p, q),
            }
        )
        return verdict


class RolloutGeneration(Generation):
    """A generation whose verifier is the recording one (the policy and drafter as the method says)."""

    def __init__(self, verifier: RecordingVerifier, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.recording = verifier

    def _parts(self):
        drafter, policy, _ = super()._parts()
        return drafter, policy, self.recording


def rollout(
    pair: ModelPair, head: EnsembleHead, item: EvalItem, cfg: TrainConfig, seed: int, temperature: float
) -> tuple[float, dict[str, torch.Tensor] | None, str]:
    """One ensemble rollout at ``temperature``: (reward, the recorded positions concatenated or None, text)."""
    explore = cfg.explore if cfg.estimator == "gaussian" else 0.0
    verifier = RecordingVerifier(head, DiversedParams(head=TRAIN_HEAD, t0="argmax"), explore, seed)
    limit = min(item.max_new_tokens, cfg.max_new_tokens) if cfg.max_new_tokens else item.max_new_tokens
    sampling = SamplingConfig(temperature=temperature, seed=seed)
    pair.extras[f"diversed-head:{TRAIN_HEAD}"] = (head, {"drafter": rollout_drafter(cfg.policy)})  # what the
    # engine's own build finds (then replaced by the recorder)
    run = RolloutGeneration(verifier, pair, item.prompt, f"{cfg.policy}+diversed:head={TRAIN_HEAD}", limit, sampling)
    events = [e for e in run.rounds() if e.draft_len]
    text = run.result().text
    kept = [{k: v[: len(e.emitted)] for k, v in rec.items()} for rec, e in zip(verifier.rounds, events)]
    if not kept:
        return reward(item.task, text, item.reference), None, text
    # clone outside inference mode: the engine's tensors are inference tensors, unusable by autograd
    batch = {k: torch.cat([r[k] for r in kept]).clone() for k in kept[0]}
    return reward(item.task, text, item.reference), batch, text


def rollout_drafter(policy: str) -> str:
    """The drafter of ``--policy`` (``"default"`` or ``"block:LOSS"``): the head trains on its hidden states, and
    its card says so (``diversed`` refuses any other drafter)."""

    drafter = parse_method(policy).drafter
    if drafter is None:  # a peer (hf-...): transformers' generate, no drafter of ours
        raise SpecScopeError(f"--policy {policy!r} has no drafter to train the head on; use default or block:LOSS")
    return drafter.text


def temperature_grid(cfg: TrainConfig) -> tuple[float, ...]:
    """The temperatures the head trains and is chosen at: ``--temperatures`` parsed, else ``(--temperature,)``."""
    if not cfg.temperatures.strip():
        return (cfg.temperature,)
    try:
        grid = tuple(float(t) for t in cfg.temperatures.split(",") if t.strip())
    except ValueError as err:
        raise SpecScopeError(f"--temperatures must be a comma list of numbers, got {cfg.temperatures!r}") from err
    if not grid or min(grid) <= 0:
        raise SpecScopeError(f"--temperatures must be > 0 (the decisions are sampled), got {cfg.temperatures!r}")
    return grid


def item_temperature(grid: tuple[float, ...], index: int) -> float:
    """The temperature item ``index`` runs at: the grid in turn, so every temperature of the band is trained and
    validated on a third (or a quarter, …) of the items."""
    return grid[index % len(grid)]


def rollout_seed(cfg: TrainConfig, epoch: int, index: int, member: int) -> int:
    """The sampling seed of rollout ``member`` of training item ``index`` in ``epoch`` (distinct for all three)."""
    return cfg.seed + 1000 * epoch + index + 100_000 * member


def serving_fields(cfg: TrainConfig, grid: tuple[float, ...]) -> dict:
    """The card's ``rule``, ``serves`` and ``ships_for``, derived from what the training ran: a head serves the
    rule and the temperatures it was rolled out and chosen at (docs/DIVERSED.md)."""
    if max(grid) <= 0:
        return {
            "rule": "argmax",
            "serves": "temperature 0",
            "ships_for": f"temperature 0 under the argmax rule it was trained with ({cfg.estimator} estimator)",
        }
    band = f"temperature {grid[0]:g}" if len(grid) == 1 else f"temperatures {min(grid):g}–{max(grid):g}"
    return {
        "rule": "sampled",
        "serves": band,
        "ships_for": f"{band}: rolled out and chosen there ({cfg.estimator} estimator)",
    }


def split_train_val(
    tasks: tuple[str, ...], train_per_task: int = 0, val_per_task: int = 4
) -> tuple[list[EvalItem], list[EvalItem]]:
    """(rollout items, validation items) from the train split: per task the last ``val_per_task`` items are the
    validation set and the first ``train_per_task`` of the rest (0 = all) are rolled out. The eval split is left
    for ``pareto``."""
    train_items: list[EvalItem] = []
    val_items: list[EvalItem] = []
    for task in tasks:
        items = load_items("train", (task,))
        if val_per_task >= len(items):
            raise SpecScopeError(
                f"--val-per-task {val_per_task} leaves no {task} item to train on ({len(items)} in all)"
            )
        cut = len(items) - val_per_task
        train_items += items[:cut][:train_per_task] if train_per_task else items[:cut]
        val_items += items[cut:]
    return train_items, val_items


ESTIMATORS = ("decision", "token", "gaussian")
ADVANTAGE_NORMS = ("batch", "none")
CHOICES = {"estimator": ESTIMATORS, "advantage_norm": ADVANTAGE_NORMS}  # the command line's fixed choices
LOG_FLOOR = 1e-12  # probabilities are floored here before the log (a recorded 0 would give −inf)


def gaussian_score(logit: torch.Tensor, sampled: torch.Tensor, sigma: float) -> torch.Tensor:
    """``[T]`` log N(z_t; μ_t, σ²) up to a constant: the score of the exploration the ``gaussian`` estimator adds
    at temperature 0, where the argmax rule is a deterministic function of w_t. The rollout used w_t = σ(z_t),
    z_t = μ_t + σ·ε_t with μ_t the head's logit; REINFORCE on that policy is unbiased for ∇ E_ε[R]
    (tests/unit/test_diversed_gradient.py), and the shipped head is the mean μ, run without noise."""
    return -((sampled - logit) ** 2) / (2.0 * sigma * sigma)


def score_logprobs(w: torch.Tensor, rec: dict[str, torch.Tensor], estimator: str = "decision") -> torch.Tensor:
    """``[T]`` per recorded position t, the log-probability of the random choices there that depend on w_t, so
    that ∇ Σ_t of it is the rollout's score (REINFORCE: ∇E[R] = E[R·∇ log P(rollout)]).

    ``w`` ``[T]`` (differentiable); ``rec`` per position: ``accepted`` ``[T]`` bool, ``p_x``, ``q_x`` (the
    drafted token), ``p_y``, ``q_y`` (the emitted token: = x when accepted, the recovered token otherwise) and
    ``tv`` = TV(p_t, q_t), with ν_t = w_t·p_t + (1 − w_t)·q_t:

    - ``decision``: log a_t for an accepted draft, a_t = min(1, ν_t(x)/q_t(x)); at the rejection
      log(1 − a_t) + log r_t(y), r_t = max(0, ν_t − q_t)/Σ max(0, ν_t − q_t), whose normaliser is
      TV(q_t, ν_t) = w_t·TV(p_t, q_t). Drafting (from q) and the bonus token (from p) do not depend on w, nor
      do decisions after the emitted text ends (the trainer drops those positions). Unbiased.
    - ``token``: log ν_t(y) — the marginal of each emitted token, blind to whether it came from an accepted
      draft (the next token may then be a bonus from p) or from a rejection (the next round starts). Biased;
      kept to show it (tests/unit/test_diversed_gradient.py).
    """
    if estimator == "gaussian":
        raise SpecScopeError("the gaussian estimator scores the head's logit: use loss_terms(..., explore=σ)")
    if estimator == "token":
        return (w * rec["p_y"] + (1.0 - w) * rec["q_y"]).clamp_min(LOG_FLOOR).log()
    if estimator != "decision":
        raise SpecScopeError(f"unknown estimator {estimator!r}; one of {ESTIMATORS}")
    p_x, q_x = rec["p_x"], rec["q_x"].clamp_min(LOG_FLOOR)  # x was drawn from q: q(x) > 0
    nu_x = w * p_x + (1.0 - w) * q_x
    log_accept = torch.minimum(nu_x / q_x, torch.ones_like(nu_x)).clamp_min(LOG_FLOOR).log()
    # 1 − ν/q = w·(q − p)/q where ν < q, the only place a draft can be rejected
    log_reject = (q_x - nu_x).clamp_min(LOG_FLOOR).log() - q_x.log()
    nu_y = w * rec["p_y"] + (1.0 - w) * rec["q_y"]
    log_residual = (nu_y - rec["q_y"]).clamp_min(LOG_FLOOR).log() - (w * rec["tv"]).clamp_min(LOG_FLOOR).log()
    return torch.where(rec["accepted"], log_accept, log_reject + log_residual)


def loss_terms(
    head: EnsembleHead, rec: dict[str, torch.Tensor], estimator: str = "decision", explore: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(``[T]`` score per position — :func:`score_logprobs`, or :func:`gaussian_score` with σ = ``explore`` —,
    Σ_t (1 − TV(q_t, ν_t)), ``[T]`` w_t) of one rollout, differentiable in the head."""
    logit = head.logit(rec["draft_hidden"], rec["target_hidden"])  # [T]
    w = torch.sigmoid(logit)
    score = gaussian_score(logit, rec["z"], explore) if estimator == "gaussian" else score_logprobs(w, rec, estimator)
    return score, (1.0 - w * rec["tv"]).sum(), w


def normalise_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``[N]`` → (A − mean)/std over the batch (REINFORCE++'s global normalisation, population std). A batch
    whose advantages are all equal (or of one rollout) gives zeros: nothing in it tells rollouts apart."""
    centred = advantages - advantages.mean()
    return centred / (advantages.std(unbiased=False) + eps)


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, advantage: float, eps: float) -> torch.Tensor:
    """Σ_t min(ρ_t·A, clip(ρ_t, 1 − ε, 1 + ε)·A), ρ_t = exp(logp_t − logp_old_t), for one rollout (PPO's clipped
    surrogate per decision, as REINFORCE++ uses it); ``eps`` ≤ 0 leaves ρ unclipped. ``logp``, ``logp_old``
    ``[T]`` (:func:`score_logprobs` now and at the rollout). At ρ = 1 its gradient is A·∇Σ_t logp_t, REINFORCE's;
    a ratio already past 1 ± ε in the direction A pushes gets no more gradient."""
    ratio = (logp - logp_old.detach()).exp()
    if eps <= 0:
        return (ratio * advantage).sum()
    return torch.minimum(ratio * advantage, ratio.clamp(1.0 - eps, 1.0 + eps) * advantage).sum()


def update_head(
    head: EnsembleHead,
    opt: torch.optim.Optimizer,
    rollouts: list[tuple[dict[str, torch.Tensor] | None, float]],
    cfg: TrainConfig,
    stats: dict | None = None,
) -> float | None:
    """``cfg.updates`` optimiser steps on one batch of (recorded positions, advantage) rollouts; returns the first
    step's loss (None when no rollout drafted anything). Loss = −(Σ clipped surrogate + λ Σ_t (1 − w_t·TV)),
    averaged over the batch, the gradient's norm clipped to ``cfg.max_grad_norm``. ``stats`` (when given) gets
    ``clipped``: the share of decisions whose ratio lay outside 1 ± ε at the last step (0 with one update)."""
    kept = [(rec, a) for rec, a in rollouts if rec is not None]
    if not kept:
        return None
    with torch.no_grad():  # the head that rolled out: the ratio's denominator
        old = [loss_terms(head, rec, cfg.estimator, cfg.explore)[0] for rec, _ in kept]
    params = [p for group in opt.param_groups for p in group["params"]]
    first = None
    for _ in range(cfg.updates):
        opt.zero_grad()
        total = torch.zeros(())
        outside, decisions = 0, 0
        for (rec, a), logp_old in zip(kept, old):
            logp, keep, _ = loss_terms(head, rec, cfg.estimator, cfg.explore)
            total = total - clipped_surrogate(logp, logp_old, a, cfg.clip_eps) - cfg.lam * keep
            ratio = (logp.detach() - logp_old).exp()
            outside += int(((ratio < 1.0 - cfg.clip_eps) | (ratio > 1.0 + cfg.clip_eps)).sum())
            decisions += ratio.numel()
        loss = total / len(rollouts)
        loss.backward()
        if cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        opt.step()
        first = float(loss.detach()) if first is None else first
        if stats is not None:
            stats["clipped"] = outside / max(1, decisions) if cfg.clip_eps > 0 else 0.0
    return first


def evaluate_method(
    pair: ModelPair, items: list[EvalItem], method: str, temperature: float | tuple[float, ...] = 0.0
) -> dict:
    """Quality (macro mean reward over tasks), acceptance and mean w_t of ``method`` on ``items`` (item n with
    seed n at the n-th temperature of ``temperature`` in turn, one :func:`spec_core.engine.rewards.run_item` each)."""
    grid = temperature if isinstance(temperature, tuple) else (temperature,)
    records = [run_item(pair, method, item, item_temperature(grid, n), n) for n, item in enumerate(items)]
    rewards: dict[str, list[float]] = {}
    for rec in records:
        rewards.setdefault(rec["task"], []).append(rec["reward"])
    drafted = sum(sum(r["rounds"]["gamma"]) for r in records)
    accepted = sum(sum(r["rounds"]["measured"]) for r in records)
    ws = [w for r in records for w in r["rounds"]["w"]]
    task_ws: dict[str, list[float]] = {}
    for r in records:
        task_ws.setdefault(r["task"], []).extend(x for x in r["rounds"]["w"] if x is not None)
    per_task = {t: round(statistics.fmean(v), 4) for t, v in rewards.items()}
    return {
        "quality": round(statistics.fmean(per_task.values()), 4),
        "per_task": per_task,
        "acceptance_rate": round(accepted / max(1, drafted), 4),
        "mean_w": round(statistics.fmean(ws), 4) if ws else None,
        "w_by_task": {t: round(statistics.fmean(v), 4) for t, v in task_ws.items() if v},
    }


def evaluate(
    pair: ModelPair,
    head: EnsembleHead,
    items: list[EvalItem],
    policy: str,
    temperature: float | tuple[float, ...] = 0.0,
) -> dict:
    """Quality and acceptance of ``POLICY+diversed`` with ``head`` (:func:`evaluate_method`)."""
    pair.extras[f"diversed-head:{TRAIN_HEAD}"] = (head, {"drafter": rollout_drafter(policy)})
    return evaluate_method(pair, items, f"{policy}+diversed:head={TRAIN_HEAD}", temperature)


def epoch_w_by_task(epoch_log: list[dict]) -> dict[str, float]:
    """Mean w_t per task over an epoch's rollouts (whether the head tells the tasks apart); drops the raw lists."""
    pooled: dict[str, list[float]] = {}
    for log in epoch_log:
        for task, ws in log.pop("w_by_task", {}).items():
            pooled.setdefault(task, []).extend(ws)
    return {t: round(statistics.fmean(v), 4) for t, v in sorted(pooled.items())}


def select_epoch(history: list[dict], lossless_acceptance: float | None, min_ratio: float) -> tuple[int, str]:
    """(index into ``history``, why): the best held-out quality among epochs accepting ≥ ``min_ratio`` × lossless
    (ties: the higher acceptance), else the last epoch."""
    last = len(history) - 1
    if not min_ratio or not lossless_acceptance or not history or not history[0].get("heldout"):
        return last, "the last epoch"
    floor = min_ratio * lossless_acceptance
    ok = [i for i, h in enumerate(history) if h["heldout"]["acceptance_rate"] >= floor]
    if not ok:
        return last, f"the last epoch (none accepted ≥ {min_ratio:g}× lossless's {lossless_acceptance:.3f} held out)"
    best = max(ok, key=lambda i: (history[i]["heldout"]["quality"], history[i]["heldout"]["acceptance_rate"]))
    return best, (
        f"the best held-out quality among epochs accepting ≥ {min_ratio:g}× lossless "
        f"({floor:.3f} = {min_ratio:g} × {lossless_acceptance:.3f})"
    )


def same_run(saved: dict, config: dict) -> bool:
    """Whether a checkpoint's config is this run's: every field equal but ``epochs`` (so a run can be cut short
    or carried further: ``--epochs 2`` after three epochs ships the best of the first two) and ``progress``."""
    loose = ("epochs", "progress")
    return {k: v for k, v in saved.items() if k not in loose} == {k: v for k, v in config.items() if k not in loose}


def train(
    pair: ModelPair, cfg: TrainConfig, train_items: list[EvalItem], val_items: list[EvalItem]
) -> tuple[EnsembleHead, dict]:
    """Run the REINFORCE loop; returns the head and the card (resumes from ``cfg.work_dir``)."""
    if cfg.estimator == "gaussian" and cfg.explore <= 0:
        raise SpecScopeError("--estimator gaussian explores w_t with Gaussian noise on the logit: give --explore σ > 0")
    grid = temperature_grid(cfg)
    if min(grid) <= 0 and cfg.estimator != "gaussian":
        raise SpecScopeError(
            "at --temperature 0 the argmax rule is deterministic, so the decisions carry no gradient: "
            "use --estimator gaussian --explore σ (noise on w_t), or a temperature > 0"
        )
    if min(grid) < 0:
        raise SpecScopeError(f"--temperature must be ≥ 0, got {cfg.temperature}")
    if not train_items:
        raise SpecScopeError("no training items")
    if cfg.estimator not in ESTIMATORS:
        raise SpecScopeError(f"--estimator must be one of {ESTIMATORS}, got {cfg.estimator!r}")
    if cfg.group < 1 or cfg.batch_size < 1 or cfg.updates < 1:
        raise SpecScopeError(
            f"--group, --batch-size and --updates must be ≥ 1, got {cfg.group}, {cfg.batch_size} and {cfg.updates}"
        )
    if cfg.advantage_norm not in ADVANTAGE_NORMS:
        raise SpecScopeError(f"--advantage-norm must be one of {ADVANTAGE_NORMS}, got {cfg.advantage_norm!r}")

    draft_h, target_h = pair_hidden_sizes(pair)
    head = EnsembleHead(draft_h, target_h, cfg.init_w)
    opt = torch.optim.AdamW([head.linear.weight] if cfg.freeze_bias else head.parameters(), lr=cfg.lr)
    work = Path(cfg.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    ckpt = work / "checkpoint.pt"
    state: dict[str, Any] = {"epoch": 0, "step": 0, "baseline": {}, "history": [], "heads": [], "lossless": None}
    state["commit"] = source_commit()  # the code the run starts with (a resumed run keeps its first one)
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        if same_run(saved.get("config") or {}, asdict(cfg)):
            head.load_state_dict(saved["head"]), opt.load_state_dict(saved["opt"])
            state = saved["state"]
    steps_per_epoch = (len(train_items) + cfg.batch_size - 1) // cfg.batch_size
    bar = tqdm(
        total=cfg.epochs * steps_per_epoch, initial=state["step"], desc="train diversed", disable=not cfg.progress
    )
    t0 = time.perf_counter()
    if val_items and state["lossless"] is None:  # the reference the selection compares acceptance with
        state["lossless"] = evaluate_method(pair, val_items, f"{cfg.policy}+lossless", grid)
        print(json.dumps({"lossless": state["lossless"]}), flush=True)
    for epoch in range(state["epoch"], cfg.epochs):
        order = list(range(len(train_items)))
        random.Random(cfg.seed + epoch).shuffle(order)
        epoch_log: list[dict] = []
        for b in range(steps_per_epoch):
            picked = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            head.eval()
            outs = {
                (i, g): rollout(
                    pair, head, train_items[i], cfg, rollout_seed(cfg, epoch, i, g), item_temperature(grid, i + epoch)
                )
                for i in picked
                for g in range(cfg.group)
            }
            if cfg.freeze_bias and state["step"] == 0:  # centre on the first batch's positions (kept in the head)
                firsts = [o[1] for o in outs.values() if o[1] is not None]
                if firsts:
                    with torch.no_grad():
                        feats = head.features(
                            torch.cat([r["draft_hidden"] for r in firsts]),
                            torch.cat([r["target_hidden"] for r in firsts]),
                        )
                        head.center += feats.mean(0)
            head.train()
            # advantages: A = R − b, b the mean of the item's other rollouts (group > 1) or the task's running mean
            task_ws: dict[str, list[float]]
            ws, rs, task_ws, raw = [], [], {}, []
            for i in picked:
                item, rewards = train_items[i], [outs[i, g][0] for g in range(cfg.group)]
                for r, rec, _ in (outs[i, g] for g in range(cfg.group)):
                    if cfg.group > 1:  # leave-one-out: the mean of this item's other rollouts
                        base = (sum(rewards) - r) / (cfg.group - 1)
                    else:
                        base = state["baseline"].get(item.task, r)
                    rs.append(r)
                    raw.append(r - base)
                    if rec is not None:
                        with torch.no_grad():
                            w = head(rec["draft_hidden"], rec["target_hidden"]).tolist()
                        ws += w
                        task_ws.setdefault(item.task, []).extend(w)
                    running = state["baseline"].get(item.task, r)
                    state["baseline"][item.task] = cfg.baseline_momentum * running + (1 - cfg.baseline_momentum) * r
            adv = torch.tensor(raw, dtype=torch.float64)
            if cfg.advantage_norm == "batch":
                adv = normalise_advantages(adv)
            recs = [outs[i, g][1] for i in picked for g in range(cfg.group)]  # the order of raw
            update: dict = {}
            loss = update_head(head, opt, list(zip(recs, adv.tolist())), cfg, update)
            state["step"] += 1
            log = {
                "step": state["step"],
                "reward": round(statistics.fmean(rs), 4),
                "mean_w": round(statistics.fmean(ws), 4) if ws else None,
                "loss": None if loss is None else round(loss, 4),
                "clipped": update.get("clipped", 0.0),
            }
            log["w_by_task"] = task_ws  # pooled per epoch by epoch_w_by_task
            epoch_log.append(log)
            bar.set_postfix(reward=log["reward"], w=log["mean_w"])
            bar.update()
        head.eval()
        heldout = evaluate(pair, head, val_items, cfg.policy, grid) if val_items else {}
        state["history"].append(
            {
                "epoch": epoch + 1,
                "elapsed_s": round(time.perf_counter() - t0, 1),
                "train_reward": round(statistics.fmean(x["reward"] for x in epoch_log), 4),
                "train_mean_w": epoch_log[-1]["mean_w"],
                "train_clipped": round(statistics.fmean(x["clipped"] for x in epoch_log), 4),
                "train_w_by_task": epoch_w_by_task(epoch_log),
                "heldout": heldout,
            }
        )
        print(json.dumps(state["history"][-1]), flush=True)
        state["heads"].append({k: v.clone() for k, v in head.state_dict().items()})  # a few KB per epoch
        state["epoch"] = epoch + 1
        torch.save({"config": asdict(cfg), "head": head.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt)
    bar.close()
    lossless_acc = (state["lossless"] or {}).get("acceptance_rate")
    state["history"] = state["history"][: cfg.epochs]  # a checkpoint carried further than --epochs
    state["heads"] = state["heads"][: cfg.epochs]
    chosen, why = select_epoch(state["history"], lossless_acc, cfg.min_acceptance_ratio)
    if state["heads"]:
        head.load_state_dict(state["heads"][chosen])
    serving = serving_fields(cfg, grid)
    card = {
        "kind": "diversed-ensemble-head",
        "paper": "DIVERSED, arXiv 2604.07622",
        "draft_sha256": (pair.draft_card or {}).get("sha256"),
        "drafter": rollout_drafter(cfg.policy),
        "draft_hidden": draft_h,
        "target_hidden": target_h,
        "data": {
            "train_items": len(train_items),
            "val_items": len(val_items),
            "tasks": sorted({i.task for i in train_items}),
            "source": "prompts/eval/*.jsonl, split=train (the last val_per_task items of each task for the validation check, the rest for rollouts); split=eval is never read",
        },
        "steps": min(state["step"], cfg.epochs * steps_per_epoch),
        "lambda": cfg.lam,
        "commit": state.get("commit") or source_commit(),
        **serving,
        "training": {**asdict(cfg), "rule": serving["rule"], "temperature_grid": list(grid)},
        "history": state["history"],
        "heldout_items": "validation: the last val_per_task items of each task of the train split, never rolled out",
        "lossless_heldout": state["lossless"],
        "selected_epoch": chosen + 1 if state["history"] else None,
        "selection": why,
        "selection_metric": (
            f"validation quality (macro mean reward) of {cfg.policy}+diversed at {serving['serves']}, among epochs "
            f"accepting ≥ {cfg.min_acceptance_ratio:g}× lossless there"
        ),
        "results": state["history"][chosen]["heldout"] if state["history"] else {},
    }
    return head, card


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core train diversed", description=__doc__.splitlines()[0])
    defaults = TrainConfig()
    for field, value in asdict(defaults).items():
        if field == "progress":
            continue
        flag = "--" + field.replace("_", "-")
        if isinstance(value, bool):
            ap.add_argument(flag, action="store_true")
        else:
            ap.add_argument(flag, type=type(value), default=value, choices=CHOICES.get(field))
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    cfg = TrainConfig(**{k: getattr(a, k) for k in asdict(defaults) if k != "progress"}, progress=not a.no_progress)
    try:
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)

        tasks = tuple(t for t in a.tasks.split(",") if t)
        train_items, val_items = split_train_val(tasks, cfg.train_per_task, cfg.val_per_task)
        pair = load_pair("embedded", "cpu", cfg.dtype)
        head, card = train(pair, cfg, train_items, val_items)
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    path = save_asset(head.tensors(), cfg.name, card, Path(cfg.out_dir))
    print(
        f"wrote {path} ({card['steps']} steps; epoch {card['selected_epoch']}: {card['selection']}; "
        f"held-out {card['results']})"
    )
    return 0
