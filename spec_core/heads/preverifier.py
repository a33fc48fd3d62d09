"""PACER's pre-verification layer M_B: a per-token acceptance estimate from the draft's own state.

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274): the draft
drafts in blocks; after each block a small trained layer reads the block's draft hidden states plus a learned
embedding of each token's position in the current draft and estimates, per token, the probability that the
target will accept it. The paper's layer is not published; this one is ours (docs/ALGORITHMS.md §1):

    â_i = σ( MLP( LN(h_i) W_h + E[pos_i] + [log q_i, Σ_{j≤i} log q_j] W_q ) )

- ``h_i`` ``[H_d]``: the draft's last hidden state at drafted token i (``DraftSoFar.hidden``);
- ``E[pos_i]``: a learned embedding of i's position in the current draft, 1..``max_len`` (later positions share
  the last row); ``use_position=False`` drops it (the paper's ablation);
- ``log q_i`` and its running sum over the draft so far (``DraftSoFar.token_probs``): what the draft already
  knows about its own confidence, free at inference. The label is *cumulative* (token i counts as accepted only
  if every token before it was), so the running sum carries the prefix that a per-token MLP cannot see; it is
  kept because it measured better held-out AUC than the hidden state and position alone (see the card's
  ``ablations`` and docs/PACER.md); ``use_token_prob=False`` drops both.

An MLP rather than the causal self-attention layer docs/ALGORITHMS.md §1 allowed: the running sum gives it the prefix, and
a per-token head scores a token once, whatever block it ends up in. About 10 thousand parameters (≈ 20 kB in
bfloat16): wider heads over-fitted the few thousand simulated tokens. Assets live in ``assets/heads`` as
``pacer-<draft>[-variant]`` (safetensors + card), matched to the
draft by the sha256 of the draft's weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from spec_core.assets import HEADS_DIR, available, load_asset, read_card, save_asset
from spec_core.errors import SpecScopeError

KIND = "pacer"  # the `kind` field of a pre-verifier's card
TRAIN_COMMAND = "python -m spec_core train pacer --draft {draft}"


@dataclass(frozen=True)
class PreVerifierConfig:
    hidden_size: int  # H_d: the draft's hidden size
    max_len: int = 12  # positions 1..max_len get their own embedding (later ones share the last)
    width: int = 16  # the MLP's width
    use_position: bool = True  # the learned position embedding (False: the paper's ablation)
    use_token_prob: bool = True  # log q_i and its running sum as two extra inputs


class PreVerifier(nn.Module):
    """M_B: ``forward(hidden [..., n, H_d], positions [..., n], token_probs [..., n]) -> logits [..., n]``."""

    def __init__(self, cfg: PreVerifierConfig):
        super().__init__()
        self.cfg = cfg
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.proj = nn.Linear(cfg.hidden_size, cfg.width)
        self.position = nn.Embedding(cfg.max_len + 1, cfg.width) if cfg.use_position else None  # row 0 unused
        self.confidence = nn.Linear(2, cfg.width, bias=False) if cfg.use_token_prob else None
        self.mlp = nn.Sequential(nn.GELU(), nn.Linear(cfg.width, cfg.width), nn.GELU(), nn.Linear(cfg.width, 1))

    @staticmethod
    def prob_features(token_probs: torch.Tensor) -> torch.Tensor:
        """``[..., n]`` draft probabilities of the drafted tokens (from position 1 of the draft) →
        ``[..., n, 2]``: log q_i and Σ_{j≤i} log q_j (clamped away from log 0)."""
        logq = token_probs.float().clamp_min(1e-6).log()
        return torch.stack([logq, logq.cumsum(-1)], dim=-1)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor, prob_features: torch.Tensor | None = None):
        """Logits of acceptance. ``hidden`` ``[..., n, H_d]``; ``positions`` ``[..., n]`` (1-based position in
        the draft); ``prob_features`` ``[..., n, 2]`` from :meth:`prob_features` (needed when ``use_token_prob``)."""
        x = self.proj(self.norm(hidden.to(self.proj.weight.dtype)))  # [..., n, W]
        if self.position is not None:
            x = x + self.position(positions.clamp(1, self.cfg.max_len))
        if self.confidence is not None:
            if prob_features is None:
                raise SpecScopeError("this pre-verifier reads the draft's token probabilities; pass prob_features")
            x = x + self.confidence(prob_features.to(x.dtype))
        return self.mlp(x).squeeze(-1)  # [..., n]

    @torch.inference_mode()
    def predict(self, hidden: torch.Tensor, positions: torch.Tensor, prob_features: torch.Tensor | None = None):
        """â = σ(logits) ``[n]`` for one block (inference)."""
        return torch.sigmoid(self.forward(hidden, positions, prob_features))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def head_name(draft: str, variant: str = "") -> str:
    """``pacer-feature``, ``pacer-feature-nopos``: one head per draft (and per ablation variant)."""
    return f"{KIND}-{draft}" + (f"-{variant}" if variant else "")


def save_head(head: PreVerifier, name: str, card: dict, directory=HEADS_DIR) -> None:
    save_asset(head.state_dict(), name, {"kind": KIND, "config": asdict(head.cfg), **card}, directory)


def load_head(name: str, directory=HEADS_DIR) -> tuple[PreVerifier, dict]:
    """A saved pre-verifier (float32, eval mode) and its card."""
    tensors, card = load_asset(name, directory, "pre-verifier head")
    head = PreVerifier(PreVerifierConfig(**card["config"]))
    head.load_state_dict({k: v.float() for k, v in tensors.items()})
    return head.eval(), card


def find_head(draft_card: dict, variant: str = "", directory=HEADS_DIR) -> str:
    """The name of the pre-verifier trained with the draft whose card is ``draft_card`` (matched by sha256)."""
    sha, design = draft_card.get("sha256"), draft_card.get("design", "feature")
    for name in available(directory):
        card = read_card(name, directory, "pre-verifier head")
        if card.get("kind") == KIND and card.get("variant", "") == variant and sha and card.get("draft_sha256") == sha:
            return name
    what = f"{KIND} head{' (variant ' + variant + ')' if variant else ''}"
    extra = f" --variant {variant}" if variant else ""
    raise SpecScopeError(
        f"no {what} matches this pair's draft ({design}, sha256 {str(sha)[:12]}…) in {directory}; "
        f"train one with `{TRAIN_COMMAND.format(draft=design)}{extra}`"
    )
