"""DIVERSED's ensemble head: the draft's and the target's last hidden states → w_t ∈ [0, 1].

"DIVERSED: Relaxed Speculative Decoding via Dynamic Ensemble Verification" (arXiv 2604.07622): at each drafted
position the verifier checks against ν_t = w_t·p_t + (1 − w_t)·q_t with w_t from a small feed-forward head on
[h^q_t ⊕ h^p_t]. The authors' code (``comeusr/diversed``) uses one ``Linear(H_d + H_t, 2)`` + softmax, i.e. a
sigmoid of a linear score, initialised to w = 0.5; so does this head (one ``Linear(H_d + H_t, 1)`` + sigmoid,
zero-initialised). Our one addition: each half is RMS-normalised (no parameters) first, because the draft's and
the target's hidden states differ in scale by an order of magnitude and the linear layer trains faster on
comparable inputs. We mix *probabilities*, as the paper states (their code mixes logits).

Assets live in ``assets/heads`` (:mod:`spec_core.core.assets`): ``NAME.safetensors`` + ``NAME.json`` whose card
carries ``draft_sha256``, the sha256 of the draft the head was trained with; loading checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from spec_core.core.assets import HEADS_DIR, available, load_asset, read_card
from spec_core.core.errors import SpecScopeError

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

DEFAULT_HEAD = "diversed"  # trained at temperature 0 under the argmax rule: what `diversed` uses greedily
HEAD_KIND = "diversed-ensemble-head"  # the card ``kind`` of a DIVERSED head (assets/heads also holds PACER's)


@dataclass(frozen=True)
class ShippedHead:
    """One DIVERSED head in ``assets/heads``, as its card describes it: what ``diversed`` (no ``head=``) picks
    from by the run's temperature (:func:`head_for`)."""

    name: str
    drafter: str  # whose hidden states it reads (:func:`head_drafter`)
    rule: str  # "argmax" (temperature 0) | "sampled" (temperature > 0): the rule it was trained under
    low: float  # the band of temperatures it was rolled out and chosen at: the card's training.temperature_grid
    high: float

    @property
    def serves(self) -> str:
        """``temperature 0`` / ``temperature 0.7`` / ``temperatures 0.1–0.4`` (the trainer's words)."""
        return f"temperature {self.low:g}" if self.low == self.high else f"temperatures {self.low:g}–{self.high:g}"

    def distance(self, temperature: float) -> float:
        """0 inside the band, else how far ``temperature`` lies outside it."""
        return max(self.low - temperature, temperature - self.high, 0.0)


def card_head(name: str, card: dict) -> ShippedHead:
    """A head's band from its card: ``training.temperature_grid`` (the sampled heads), else
    ``training.temperature`` (the greedy head's card predates the grid); the rule from the card, else from
    the band (0 → argmax)."""
    training = card.get("training") or {}
    grid = [float(t) for t in training.get("temperature_grid") or [training.get("temperature", 0.0)]]
    rule = card.get("rule") or training.get("rule") or ("argmax" if max(grid) <= 0 else "sampled")
    return ShippedHead(name, head_drafter(card), str(rule), min(grid), max(grid))


def diversed_heads(directory: Path | None = None) -> tuple[ShippedHead, ...]:
    """Every DIVERSED head in ``directory`` (default :data:`HEADS_DIR`, looked up when called), read from the
    cards: the one list the verifier, ``pareto`` and the app's text choose from (no head name is typed anywhere
    else but :data:`DEFAULT_HEAD`)."""
    directory = HEADS_DIR if directory is None else directory
    heads = []
    for name in available(directory):
        card = read_card(name, directory, "ensemble head", TRAIN_HINT)
        if card.get("kind") == HEAD_KIND:
            heads.append(card_head(name, card))
    return tuple(heads)


def head_for(temperature: float, drafter: str = "default", heads: Sequence[ShippedHead] | None = None) -> ShippedHead:
    """The shipped head ``diversed`` verifies with at ``temperature`` on ``drafter``'s states: at T > 0 the sampled
    head whose band covers T, the narrowest when several do (a band's own head before a wider one), else the
    nearest band; at T = 0, or when no sampled head ships, the greedy head (:data:`DEFAULT_HEAD` first). Each
    head ships under the rule and temperatures it was trained and chosen at (docs/DIVERSED.md)."""
    mine = [h for h in (diversed_heads() if heads is None else heads) if h.drafter == drafter]
    sampled = [h for h in mine if h.rule == "sampled"]
    if temperature > 0 and sampled:
        return min(sampled, key=lambda h: (h.distance(temperature), h.high - h.low, h.name))
    greedy = sorted((h for h in mine if h.rule != "sampled"), key=lambda h: (h.name != DEFAULT_HEAD, h.name))
    return greedy[0] if greedy else ShippedHead(DEFAULT_HEAD, drafter, "argmax", 0.0, 0.0)


def shipped_head(temperature: float, drafter: str = "default") -> str:
    """The name of :func:`head_for`'s head."""
    return head_for(temperature, drafter).name


TRAIN_HINT = "train one with `python -m spec_core train diversed`"


def _rms_norm(h: torch.Tensor) -> torch.Tensor:
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)


class EnsembleHead(nn.Module):
    """w = σ(Linear([rms(h_draft) ⊕ rms(h_target)] − centre)) per position (centre = 0 unless trained with one)."""

    center: torch.Tensor  # a buffer, registered in __init__

    def __init__(self, draft_hidden: int, target_hidden: int, init_w: float = 0.5):
        super().__init__()
        if not 0.0 < init_w < 1.0:
            raise SpecScopeError(f"the ensemble head's initial w must lie in (0, 1), got {init_w}")
        self.draft_hidden, self.target_hidden = draft_hidden, target_hidden
        self.linear = nn.Linear(draft_hidden + target_hidden, 1)
        nn.init.zeros_(self.linear.weight)
        # w = init_w everywhere at the start: 0.5 is the authors' init; training may start nearer lossless
        nn.init.constant_(self.linear.bias, float(torch.logit(torch.tensor(init_w))))
        # subtracted from the normalised input (zeros = none): with a frozen bias, a centred input keeps the mean
        # w at the bias and leaves the weights to move w_t token by token (``train diversed --freeze-bias``)
        self.register_buffer("center", torch.zeros(draft_hidden + target_hidden))

    def features(self, draft_hidden: torch.Tensor, target_hidden: torch.Tensor) -> torch.Tensor:
        """``[N, H_d + H_t]``: each half RMS-normalised, then the centre subtracted."""
        return torch.cat([_rms_norm(draft_hidden.float()), _rms_norm(target_hidden.float())], dim=-1) - self.center

    def logit(self, draft_hidden: torch.Tensor, target_hidden: torch.Tensor) -> torch.Tensor:
        """``[N, H_d]``, ``[N, H_t]`` → ``[N]`` pre-sigmoid scores."""
        if draft_hidden.shape[-1] != self.draft_hidden or target_hidden.shape[-1] != self.target_hidden:
            raise SpecScopeError(
                f"ensemble head expects hidden sizes ({self.draft_hidden}, {self.target_hidden}), got "
                f"({draft_hidden.shape[-1]}, {target_hidden.shape[-1]}): it was trained for another pair or drafter"
            )
        return self.linear(self.features(draft_hidden, target_hidden)).squeeze(-1)

    def forward(self, draft_hidden: torch.Tensor, target_hidden: torch.Tensor) -> torch.Tensor:
        """w_t ∈ [0, 1], ``[N]``."""
        return torch.sigmoid(self.logit(draft_hidden, target_hidden))

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.state_dict().items()}


def head_from_tensors(tensors: dict[str, torch.Tensor], draft_hidden: int, target_hidden: int) -> EnsembleHead:
    head = EnsembleHead(draft_hidden, target_hidden)
    state = {k: v.float() for k, v in tensors.items()}
    state.setdefault("center", head.center)  # heads saved before the centre existed have none
    head.load_state_dict(state)
    return head.eval()


def pair_hidden_sizes(pair: ModelPair) -> tuple[int, int]:
    """(H_d, H_t): the default draft's hidden size (the feature it emits per drafted token) and the target's."""
    target_h = int(pair.target.config.hidden_size)
    draft_cfg = getattr(pair.draft, "config", None)
    draft_h = int(getattr(draft_cfg, "hidden_size", target_h)) if draft_cfg is not None else target_h
    return draft_h, target_h


def head_drafter(card: dict) -> str:
    """The drafter whose hidden states the head of ``card`` was trained on: its ``drafter`` (``"default"``, the
    pair's own draft, or ``"block:LOSS"``). Cards written before the field existed were all trained on the
    pair's own draft (their rollouts ran ``fixed:4``)."""
    return str(card.get("drafter", "default"))


def load_head(pair: ModelPair, name: str = DEFAULT_HEAD) -> tuple[EnsembleHead, dict]:
    """The head ``name`` for ``pair``, cached in ``pair.extras``; refuses a head trained with another draft."""

    def load():
        card = read_card(name, HEADS_DIR, "ensemble head", TRAIN_HINT)
        want = (pair.draft_card or {}).get("sha256")
        if card.get("draft_sha256") != want:
            raise SpecScopeError(
                f"ensemble head {name!r} was trained with draft sha256 {str(card.get('draft_sha256'))[:12]}…, "
                f"this pair's draft is {str(want)[:12]}…; {TRAIN_HINT}"
            )
        tensors, card = load_asset(name, HEADS_DIR, "ensemble head", TRAIN_HINT)
        return head_from_tensors(tensors, int(card["draft_hidden"]), int(card["target_hidden"])).to(pair.device), card

    return pair.learned("diversed-head", name, load)
