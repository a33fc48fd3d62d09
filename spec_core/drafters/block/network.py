"""The parallel block drafter network (DFlash-style) for a target; the runtime drafter is in :mod:`.runtime`.

DFlash (Chen et al., "DFlash: Block Diffusion for Flash Speculative Decoding", arXiv 2602.06036; code
``z-lab/dflash``) drafts a whole block in one forward pass. Our version for the embedded target:

- **Context.** Hidden states of several target layers (``target_layers``, indices into HF ``hidden_states``:
  i = output of decoder layer i) are RMS-normalised one layer at a time (our addition, see ``layer_norms``),
  concatenated per position → ``Linear(L·H → H)`` → RMSNorm. These
  *context features* exist for every position strictly before the anchor: the anchor is the last verified
  token, which the target has not run yet (the engine's *pending* token), so its own features are unknown.
- **Block.** B positions: the anchor's embedding (the target's, frozen) followed by B − 1 copies of a learned
  mask embedding, at absolute positions a..a + B − 1 (RoPE). Block position k predicts token a + k.
- **Layers.** ``num_layers`` Llama-style decoder layers whose attention keys/values are
  [k/v_proj(context features) ⊕ k/v_proj(block states)]: every block position sees the whole context and
  every block position (bidirectional inside the block). As in DFlash, each layer projects the *same* context
  features (they do not flow through the layers), so a layer's context K/V depend only on the features and
  are computed once per position and cached across rounds (:class:`BlockDrafter`).
- **Output.** Final RMSNorm and the target's (tied, frozen) head; neither embedding nor head is stored.

Training (``spec_core.train.block``) weights the per-position cross-entropy by a fixed schedule (uniform,
DFlash's decay) or by D-PACE (arXiv 2605.18810, :func:`spec_core.core.rules.dpace_weights`).

Assets (``assets/block/LOSS``) are read and written by :mod:`.assets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half

from spec_core.model.draft_networks import CopyGate


@dataclass(frozen=True)
class BlockConfig:
    """Shape of a block drafter; the attention/MLP sizes follow the target's so layers can start as its own."""

    hidden_size: int  # H, the target's
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    target_layers: tuple[int, ...]  # indices into the target's hidden_states (0 = embeddings)
    num_layers: int = 1  # draft decoder layers
    block_size: int = 8  # B: the anchor + B − 1 drafted tokens

    @classmethod
    def from_target(
        cls, target_config, target_layers: tuple[int, ...], num_layers: int = 1, block_size: int = 8
    ) -> BlockConfig:
        rope = getattr(target_config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(target_config, "rope_theta", 10000.0))
        return cls(
            hidden_size=target_config.hidden_size,
            num_heads=target_config.num_attention_heads,
            num_kv_heads=target_config.num_key_value_heads,
            head_dim=getattr(target_config, "head_dim", None)
            or target_config.hidden_size // target_config.num_attention_heads,
            intermediate_size=target_config.intermediate_size,
            rope_theta=float(theta),
            rms_norm_eps=float(target_config.rms_norm_eps),
            target_layers=tuple(int(i) for i in target_layers),
            num_layers=num_layers,
            block_size=block_size,
        )

    def llama_config(self) -> LlamaConfig:
        """A LlamaConfig carrying the sizes, for transformers' MLP, norm and rotary modules."""
        return LlamaConfig(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            intermediate_size=self.intermediate_size,
            rms_norm_eps=self.rms_norm_eps,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            num_hidden_layers=self.num_layers,
            vocab_size=1,
            hidden_act="silu",
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding; ``x`` ``[..., T, heads, d]``, ``cos``/``sin`` ``[..., T, d]``."""
    return x * cos.unsqueeze(-2) + rotate_half(x) * sin.unsqueeze(-2)


class BlockLayer(nn.Module):
    """One decoder layer whose keys/values are [context features ⊕ block states] (DFlash attention).

    Parameter names match a Llama decoder layer so that it can start as one of the target's layers.
    """

    def __init__(self, config: BlockConfig):
        super().__init__()
        c, self.c = config, config
        self.input_layernorm = LlamaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = nn.ModuleDict(
            {
                "q_proj": nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=False),
                "k_proj": nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False),
                "v_proj": nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False),
                "o_proj": nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False),
            }
        )
        self.mlp = LlamaMLP(c.llama_config())

    def kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys (roped) and values of states ``x`` ``[..., T, H]`` → two ``[..., T, kv_heads, d]``."""
        c, attn = self.c, self.self_attn
        k = attn["k_proj"](x).unflatten(-1, (c.num_kv_heads, c.head_dim))
        v = attn["v_proj"](x).unflatten(-1, (c.num_kv_heads, c.head_dim))
        return _rope(k, cos, sin), v

    def forward(
        self,
        x: torch.Tensor,  # [S, N, B, H] block states (S sequences, N blocks each)
        ctx_k: torch.Tensor,  # [S, T, kv, d] context keys (roped at positions 0..T−1)
        ctx_v: torch.Tensor,  # [S, T, kv, d]
        ctx_visible: torch.Tensor | None,  # [S, N, T] bool: context position t is before block n's anchor
        cos: torch.Tensor,  # [S, N, B, d] rotary tables of the block positions
        sin: torch.Tensor,
    ) -> torch.Tensor:
        c, attn = self.c, self.self_attn
        groups = c.num_heads // c.num_kv_heads
        h = self.input_layernorm(x)
        q = _rope(attn["q_proj"](h).unflatten(-1, (c.num_heads, c.head_dim)), cos, sin)  # [S, N, B, nh, d]
        q = q.unflatten(-2, (c.num_kv_heads, groups)) * c.head_dim**-0.5  # [S, N, B, kv, g, d]
        blk_k, blk_v = self.kv(h, cos, sin)  # [S, N, B, kv, d]
        s_ctx = torch.einsum("snbkgd,stkd->snkgbt", q, ctx_k)  # [S, N, kv, g, B, T]
        if ctx_visible is not None:
            s_ctx = s_ctx.masked_fill(~ctx_visible[:, :, None, None, None, :], float("-inf"))
        s_blk = torch.einsum("snbkgd,snckd->snkgbc", q, blk_k)  # [S, N, kv, g, B, B] bidirectional
        probs = torch.softmax(torch.cat([s_ctx, s_blk], dim=-1).float(), dim=-1).to(q.dtype)
        t = ctx_k.shape[1]
        out = torch.einsum("snkgbt,stkd->snbkgd", probs[..., :t], ctx_v)
        out = out + torch.einsum("snkgbc,snckd->snbkgd", probs[..., t:], blk_v)  # [S, N, B, kv, g, d]
        x = x + attn["o_proj"](out.flatten(-3))
        return x + self.mlp(self.post_attention_layernorm(x))


class BlockDraftModel(nn.Module):
    """The trainable block drafter around a target's frozen embedding and head (module docstring)."""

    def __init__(self, config: BlockConfig, embed: nn.Embedding, head: nn.Module):
        super().__init__()
        self.config = config
        c = config
        # one RMSNorm per target layer before the projection (our addition): SmolLM2's residual stream carries
        # a few "massive" dimensions (mean |x| ≈ 200–340 against a median RMS of 6–22 in layers 8–27) that would
        # dominate the concatenation; over a 150-step probe it changed position-1 CE little (7.18 → 7.14)
        self.layer_norms = nn.ModuleList(LlamaRMSNorm(c.hidden_size, c.rms_norm_eps) for _ in c.target_layers)
        self.fc = nn.Linear(len(c.target_layers) * c.hidden_size, c.hidden_size, bias=False)
        self.context_norm = LlamaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mask_embedding = nn.Parameter(torch.zeros(c.hidden_size))
        self.layers = nn.ModuleList(BlockLayer(c) for _ in range(c.num_layers))
        self.norm = LlamaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.rotary = LlamaRotaryEmbedding(c.llama_config())
        self.embed = [embed]  # in lists: the target's, shared and frozen, not registered as submodules
        self.head = [head]
        self.copy_gate: CopyGate | None = None  # a copying drafter's pointer-generator gate (drafters/copying.py)
        nn.init.normal_(self.fc.weight, std=0.02)
        with torch.no_grad():
            self.mask_embedding.copy_(embed.weight.float().mean(0))

    @classmethod
    def for_target(
        cls, target, target_layers: tuple[int, ...], num_layers: int = 1, block_size: int = 8, init: str = "target"
    ) -> BlockDraftModel:
        """A drafter for ``target``; ``init="target"`` starts the layers as the target's last ones and the
        context projection as "pass the deepest chosen layer through" (a warm start for short CPU training)."""
        config = BlockConfig.from_target(target.config, target_layers, num_layers, block_size)
        model = cls(config, target.model.embed_tokens, target.lm_head)
        if init == "target":
            n_target = target.config.num_hidden_layers
            with torch.no_grad():
                for i, layer in enumerate(model.layers):
                    src = target.model.layers[n_target - num_layers + i]
                    missing = layer.load_state_dict(src.state_dict(), strict=False).missing_keys
                    assert not missing, missing
                h = config.hidden_size
                model.fc.weight.zero_()
                model.fc.weight[:, -h:].copy_(torch.eye(h))  # the deepest chosen target layer
                first = model.layers[0]
                assert isinstance(first, BlockLayer)
                model.context_norm.weight.copy_(first.input_layernorm.weight)
                model.norm.weight.copy_(target.model.norm.weight)
        return model.to(next(target.parameters()).dtype)

    # -- pieces -------------------------------------------------------------------------------------------

    def rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin ``[*positions.shape, d]`` for integer ``positions`` of any shape."""
        flat = positions.reshape(1, -1)
        dummy = torch.empty(0, dtype=self.fc.weight.dtype, device=positions.device)
        cos, sin = self.rotary(dummy, flat)  # [1, P, d]
        return cos[0].reshape(*positions.shape, -1), sin[0].reshape(*positions.shape, -1)

    def project_context(self, layer_hidden: torch.Tensor) -> torch.Tensor:
        """Context features: ``[..., T, L, H]`` target layer states → ``[..., T, H]``."""
        x = layer_hidden.to(self.fc.weight.dtype)
        x = torch.cat([norm(x[..., i, :]) for i, norm in enumerate(self.layer_norms)], dim=-1)  # [..., T, L·H]
        return self.context_norm(self.fc(x))

    def context_kv(self, features: torch.Tensor, start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, keys/values of context features ``[..., T, H]`` at positions start..start+T−1."""
        positions = torch.arange(start, start + features.shape[-2], device=features.device)
        cos, sin = self.rope_tables(positions)  # [T, d]
        return [cast(BlockLayer, layer).kv(features, cos, sin) for layer in self.layers]

    def block_states(
        self,
        anchor_tokens: torch.Tensor,  # [S, N] the anchor (last verified) token of each block
        anchor_pos: torch.Tensor,  # [S, N] its absolute position a
        ctx_kv: list[tuple[torch.Tensor, torch.Tensor]],  # per layer, two [S, T, kv, d]
        ctx_visible: torch.Tensor | None,  # [S, N, T] bool, None = all visible
    ) -> torch.Tensor:
        """Final-norm hidden states of every block position, ``[S, N, B, H]``."""
        b = self.config.block_size
        x = self.mask_embedding.expand(*anchor_tokens.shape, b, -1).clone()  # [S, N, B, H]
        x[:, :, 0] = self.embed[0](anchor_tokens).to(x.dtype)
        positions = anchor_pos[..., None] + torch.arange(b, device=anchor_pos.device)  # [S, N, B]
        cos, sin = self.rope_tables(positions)
        for layer, (k, v) in zip(self.layers, ctx_kv):
            x = layer(x, k, v, ctx_visible, cos, sin)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head[0](hidden)

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """What an asset stores (the rotary tables are recomputed; embedding and head are the target's)."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("rotary")}
