"""PACER's pre-verification layer M_B: per-token acceptance estimates for a drafted block.

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274): the draft
drafts in blocks; after each block a small trained layer reads the block's draft hidden states plus positional
embeddings and estimates, per token, the probability that the target will keep it. The paper's point is to avoid
the draft's own (poorly calibrated) probabilities and entropy. Its layer is not published; two designs live here
(docs/ALGORITHMS.md §1, docs/PACER.md):

**The paper head** (:class:`BlockPreVerifier`, ``design = "paper"``, ``pacer:head=paper``) reads, per token of
the block, only

- ``h_i`` ``[H_d]``: the draft's hidden state that x_i was read off (``DraftSoFar.hidden``);
- ``E[x_i]`` ``[H_d]``: the embedding of the drafted token (the target's input embedding, which every embedded
  draft shares): without it a head cannot tell which token was drafted from ``h_i`` (taken before x_i was
  drawn), and at T > 0 the same ``h_i`` yields many tokens. The state that *consumed* x_i would cost one more
  draft forward at each block's end; the embedding is a table look-up;
- ``P[pos_i]``: a learned embedding of i's position in the current draft, 1..``max_len`` (later ones share the
  last row);

and no probability, log-probability or entropy of the draft. Then one pre-norm transformer layer (single-head
self-attention, causal within the block, and an MLP) and a linear read-out:

    z_i = LN(h_i) W_h + LN(E[x_i]) W_e + P[pos_i];   z = z + Attn_causal-in-block(LN z);   z = z + MLP(LN z)
    â_i = σ(w · LN(z_i))

Training packs the blocks of many decoding steps into one sequence under a block-diagonal causal mask
(:func:`block_mask`), the paper's efficiency trick; a test checks that it equals training them one by one.

**The hybrid head** (:class:`PreVerifier`, ``design = "hybrid"``, ``pacer:head=hybrid``), SpecScope's first design,
a per-token MLP that also reads the draft's log q_i and its running sum:

    â_i = σ( MLP( LN(h_i) W_h + E[pos_i] + [log q_i, Σ_{j≤i} log q_j] W_q ) )

It ranks about as well as the draft's own Π q (a confidence rule with a learned calibration), which is what the
paper's layer is meant to avoid. ``pacer`` runs the paper head (:func:`find_head`); the hybrid stays a named
ablation, measured a little faster on the embedded pair (docs/PACER.md has the numbers).

Assets live in ``assets/heads`` as ``pacer-<draft>[-variant]`` (safetensors + card), matched to the draft by the
sha256 of the draft's weights; the card's ``config.design`` says which class reads them (absent: hybrid).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from spec_core.core.assets import HEADS_DIR, available, load_asset, read_card, save_asset
from spec_core.core.errors import SpecScopeError

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
        self.inputs = (
            ("hidden",)
            + (("position",) if cfg.use_position else ())
            + (("log_q", "sum_log_q") if cfg.use_token_prob else ())
        )
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


@dataclass(frozen=True)
class BlockPreVerifierConfig:
    hidden_size: int  # H_d: the draft's hidden size (= its token embedding's)
    max_len: int = 8  # positions 1..max_len get their own embedding (later ones share the last)
    width: int = 16  # W: the layer's width (small: a few tens of thousands of simulated tokens)
    use_position: bool = True  # the learned position embedding (False: the paper's ablation)
    use_token: bool = True  # the drafted token's embedding E[x_i] beside h_i
    design: str = "paper"  # the card says which class reads the weights
    dropout: float = 0.0  # on the summed input (training only): the inputs are 2 × 576 wide, the data small
    use_draft_logit: bool = False  # ablation only: h_i · E[x_i], the draft's unnormalised logit of x_i (tied head)


def block_mask(segments: torch.Tensor) -> torch.Tensor:
    """``[..., n]`` segment ids (one per block; −1 = padding) → ``[..., n, n]`` bool, True where token i may
    attend to token j: same block and j ≤ i (block-diagonal, causal within a block). A padding row attends to
    itself only, so its softmax stays finite."""
    n = segments.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=segments.device).tril()
    same = segments.unsqueeze(-1) == segments.unsqueeze(-2)  # [..., n, n]
    eye = torch.eye(n, dtype=torch.bool, device=segments.device)
    return (same & causal & (segments.unsqueeze(-1) >= 0)) | eye


class BlockPreVerifier(nn.Module):
    """M_B, the paper's design: ``forward(hidden [..., n, H_d], token_embeds [..., n, H_d], positions [..., n],
    segments [..., n] | None) -> logits [..., n]``. ``segments`` packs several blocks into one sequence (None: the
    n tokens are one block). No input carries the draft's probabilities (``inputs`` lists what it reads)."""

    def __init__(self, cfg: BlockPreVerifierConfig):
        super().__init__()
        self.cfg = cfg
        self.inputs = (
            ("hidden",)
            + (("token_embedding",) if cfg.use_token else ())
            + (("position",) if cfg.use_position else ())
            + (("draft_logit",) if cfg.use_draft_logit else ())
        )
        w = cfg.width
        self.norm_h = nn.LayerNorm(cfg.hidden_size, elementwise_affine=False)
        self.proj_h = nn.Linear(cfg.hidden_size, w)
        self.norm_e = nn.LayerNorm(cfg.hidden_size, elementwise_affine=False) if cfg.use_token else None
        self.proj_e = nn.Linear(cfg.hidden_size, w, bias=False) if cfg.use_token else None
        self.position = nn.Embedding(cfg.max_len + 1, w) if cfg.use_position else None  # row 0 unused
        self.drop = nn.Dropout(cfg.dropout)
        self.logit = nn.Linear(1, w, bias=False) if cfg.use_draft_logit else None
        self.norm_attn, self.qkv, self.out = nn.LayerNorm(w), nn.Linear(w, 3 * w), nn.Linear(w, w)
        self.norm_mlp = nn.LayerNorm(w)
        self.mlp = nn.Sequential(nn.Linear(w, 2 * w), nn.GELU(), nn.Linear(2 * w, w))
        self.norm_read, self.read = nn.LayerNorm(w), nn.Linear(w, 1)
        self._fused_weights: dict[str, torch.Tensor] | None = None  # predict_one's, made at its first call

    def forward(
        self,
        hidden: torch.Tensor,
        token_embeds: torch.Tensor | None,
        positions: torch.Tensor,
        segments: torch.Tensor | None = None,
    ) -> torch.Tensor:
        dtype = self.proj_h.weight.dtype
        z = self.proj_h(self.norm_h(hidden.to(dtype)))  # [..., n, W]
        if self.proj_e is not None:
            if token_embeds is None:
                raise SpecScopeError("this pre-verifier reads the drafted tokens' embeddings; pass token_embeds")
            assert self.norm_e is not None  # built with proj_e
            z = z + self.proj_e(self.norm_e(token_embeds.to(dtype)))
        if self.position is not None:
            z = z + self.position(positions.clamp(1, self.cfg.max_len))
        if self.logit is not None:  # the ablation that hands the head the draft's own (unnormalised) confidence
            if token_embeds is None:
                raise SpecScopeError("this pre-verifier reads the draft's logit from token_embeds; pass token_embeds")
            z = z + self.logit((hidden.float() * token_embeds.float()).sum(-1, keepdim=True).to(dtype) / 16)
        z = self.drop(z)
        if segments is None:
            segments = torch.zeros(positions.shape, dtype=torch.long, device=positions.device)
        mask = block_mask(segments)  # [..., n, n]
        q, k, v = self.qkv(self.norm_attn(z)).chunk(3, dim=-1)  # [..., n, W] each
        z = z + self.out(nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        z = z + self.mlp(self.norm_mlp(z))
        return self.read(self.norm_read(z)).squeeze(-1)  # [..., n]

    @torch.inference_mode()
    def predict(self, hidden: torch.Tensor, token_embeds: torch.Tensor | None, positions: torch.Tensor):
        """â = σ(logits) ``[n]`` for one block (inference)."""
        return torch.sigmoid(self.forward(hidden, token_embeds, positions))

    @torch.inference_mode()
    def predict_one(self, hidden: torch.Tensor, token_embed: torch.Tensor, position: int) -> float:
        """â of a block of one token (``pacer``'s b = 1): :meth:`predict` in half its tensor operations.

        A token alone in its block attends to itself only, so the attention's softmax is exactly 1 and its output
        is the token's value row: out(v) = LN(z) W_v W_o + (b_v W_o + b_o), one product through the two matrices
        multiplied once. The two input norms (no affine part) run as one, and the two projections as one product
        over [LN h, LN E[x]]. The same numbers up to float rounding (``tests/engine/test_preverifier.py``).

        Why it matters: the head runs once a round between two target passes, which leave the caches cold, and
        then each of its small tensor operations costs tens of microseconds. On the embedded pair at int8 the
        head's time a round fell from 0.68 to 0.29 ms (of about 24; docs/LOG.md, "2026-12-06 (seventh session)")."""
        f = self._fused()
        F, width = nn.functional, (self.cfg.width,)
        rows = torch.cat([hidden.reshape(1, -1), token_embed.reshape(1, -1)]).to(f["w_in"].dtype)  # [2, H_d]
        normed = F.layer_norm(rows, (self.cfg.hidden_size,), eps=self.norm_h.eps).reshape(1, -1)  # [1, 2 H_d]
        z = torch.addmm(f["bias"][min(max(position, 1), self.cfg.max_len)], normed, f["w_in"])  # [1, W]
        a = F.layer_norm(z, width, self.norm_attn.weight, self.norm_attn.bias, self.norm_attn.eps)
        z = z + torch.addmm(f["b_vo"], a, f["w_vo"])
        m = F.layer_norm(z, width, self.norm_mlp.weight, self.norm_mlp.bias, self.norm_mlp.eps)
        z = z + F.linear(F.gelu(F.linear(m, f["up_w"], f["up_b"])), f["down_w"], f["down_b"])
        r = F.layer_norm(z, width, self.norm_read.weight, self.norm_read.bias, self.norm_read.eps)
        return float(torch.sigmoid(F.linear(r, self.read.weight, self.read.bias))[0, 0])

    def _fused(self) -> dict[str, torch.Tensor]:
        """The weights :meth:`predict_one` reads, multiplied out once at inference (``train``/``eval`` and
        ``load_state_dict`` forget them: an optimiser changes the weights only in training mode)."""
        fused = self._fused_weights
        if fused is None:
            if self.proj_e is None or self.position is None or self.logit is not None or self.training:
                raise SpecScopeError("predict_one is for the shipped design at inference: token, position, no logit")
            w = self.cfg.width
            w_v, b_v = self.qkv.weight[2 * w :].detach(), self.qkv.bias[2 * w :].detach()
            w_o, b_o = self.out.weight.detach(), self.out.bias.detach()
            position = self.position.weight.detach().clone()
            position[0] = 0.0  # row 0 is never read (positions are clamped to 1..max_len)
            fused = {
                "w_in": torch.cat([self.proj_h.weight, self.proj_e.weight], dim=1).detach().t().contiguous(),
                "bias": position + self.proj_h.bias.detach(),  # [max_len + 1, W]: the projection's bias + P[pos]
                "w_vo": (w_v.t() @ w_o.t()).contiguous(),  # [W, W]
                "b_vo": b_v @ w_o.t() + b_o,  # [W]
            }
            for key, layer in (("up", self.mlp[0]), ("down", self.mlp[2])):  # the MLP's two linears, as they are
                assert isinstance(layer, nn.Linear)
                fused[f"{key}_w"], fused[f"{key}_b"] = layer.weight.detach(), layer.bias.detach()
            self._fused_weights = fused
        return fused

    def train(self, mode: bool = True):
        self._fused_weights = None
        return super().train(mode)

    def load_state_dict(self, *args, **kwargs):
        self._fused_weights = None
        return super().load_state_dict(*args, **kwargs)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def head_name(draft: str, variant: str = "") -> str:
    """``pacer-feature``, ``pacer-feature-nopos``: one head per draft (and per ablation variant)."""
    return f"{KIND}-{draft}" + (f"-{variant}" if variant else "")


def save_head(head: PreVerifier | BlockPreVerifier, name: str, card: dict, directory=HEADS_DIR) -> None:
    config = {"design": "hybrid", **asdict(head.cfg)}
    save_asset(
        head.state_dict(), name, {"kind": KIND, "config": config, "inputs": list(head.inputs), **card}, directory
    )


def load_head(name: str, directory=HEADS_DIR) -> tuple[PreVerifier | BlockPreVerifier, dict]:
    """A saved pre-verifier (float32, eval mode) and its card."""
    tensors, card = load_asset(name, directory, "pre-verifier head")
    config = card["config"]
    head: PreVerifier | BlockPreVerifier
    if config.get("design", "hybrid") == "paper":
        head = BlockPreVerifier(BlockPreVerifierConfig(**config))
    else:
        head = PreVerifier(PreVerifierConfig(**{k: v for k, v in config.items() if k != "design"}))
    head.load_state_dict({k: v.float() for k, v in tensors.items()})
    return head.eval(), card


def find_head(draft_card: dict, variant: str = "", directory=HEADS_DIR) -> str:
    """The name of the pre-verifier trained with the draft whose card is ``draft_card`` (matched by sha256).

    ``variant=""`` is ``pacer``'s head: the paper head when one was trained for this draft (its card's variant is
    ``paper``, or it is the draft's unsuffixed head), else the draft's unsuffixed head (a draft whose paper head
    has not been trained yet: the standalone's). ``variant="hybrid"`` also finds the unsuffixed head when that
    one is a hybrid head."""
    sha, design = draft_card.get("sha256"), draft_card.get("design", "feature")
    found: dict[str, str] = {}
    for name in sorted(available(directory)):
        card = read_card(name, directory, "pre-verifier head")
        if card.get("kind") != KIND or not sha or card.get("draft_sha256") != sha:
            continue
        found.setdefault(card.get("variant", ""), name)
        if not card.get("variant") and card["config"].get("design", "hybrid") == "hybrid":
            found.setdefault("hybrid-unsuffixed", name)
    lookup = {"": ("paper", ""), "hybrid": ("hybrid", "hybrid-unsuffixed")}.get(variant, (variant,))
    for key in lookup:
        if key in found:
            return found[key]
    what = f"{KIND} head{' (variant ' + variant + ')' if variant else ''}"
    extra = f" --variants {variant} --ship {variant}" if variant else ""
    raise SpecScopeError(
        f"no {what} matches this pair's draft ({design}, sha256 {str(sha)[:12]}…) in {directory}; "
        f"train one with `{TRAIN_COMMAND.format(draft=design)}{extra}`"
    )
