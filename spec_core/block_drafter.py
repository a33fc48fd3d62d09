"""Parallel block drafter (DFlash-style) for a target, its asset files, and the runtime drafter.

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
DFlash's decay) or by D-PACE (arXiv 2605.18810, :func:`spec_core.rules.dpace_weights`).

An asset is ``assets/block/LOSS.safetensors`` (trainable weights, bf16) + ``LOSS.json`` (its card, with the
weights' sha256).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half

from spec_core.cached_lm import LMOutput
from spec_core.drafters import DraftChunk, draw
from spec_core.errors import SpecScopeError
from spec_core.types import SamplingConfig

BLOCK_DIR = Path(__file__).resolve().parent.parent / "assets" / "block"


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
            hidden_size=self.hidden_size, num_attention_heads=self.num_heads, num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim, intermediate_size=self.intermediate_size, rms_norm_eps=self.rms_norm_eps,
            rope_theta=self.rope_theta, rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            num_hidden_layers=self.num_layers, vocab_size=1, hidden_act="silu", bos_token_id=None,
            eos_token_id=None, pad_token_id=None,
        )  # fmt: skip


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

    def __init__(self, config: BlockConfig, embed: nn.Module, head: nn.Module):
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
                model.context_norm.weight.copy_(model.layers[0].input_layernorm.weight)
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
        return [layer.kv(features, cos, sin) for layer in self.layers]

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


class BlockDrafter:
    """Drafts one block per round: ``block_len = B − 1`` tokens from one forward of :class:`BlockDraftModel`.

    Per request it keeps, for every context position (all tokens before the pending one), each layer's
    context keys/values; :meth:`commit` appends those of the positions the target just verified, from
    ``verified.layer_hidden``. Nothing of old positions is recomputed.
    """

    def __init__(self, model: BlockDraftModel):
        self.model = model.eval()
        self.target_layers = model.config.target_layers
        self.block_len = model.config.block_size - 1
        self.device = model.fc.weight.device
        self.ids: list[int] = []
        self.ctx_kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.n_ctx = 0
        self.drafted: list[int] = []

    @torch.inference_mode()
    def _extend(self, layer_hidden: torch.Tensor) -> None:
        """Append the context K/V of ``layer_hidden`` ``[T, L, H]`` (positions n_ctx..n_ctx+T−1)."""
        new = self.model.context_kv(self.model.project_context(layer_hidden.to(self.device)), self.n_ctx)
        if self.ctx_kv:
            self.ctx_kv = [(torch.cat([k, nk]), torch.cat([v, nv])) for (k, v), (nk, nv) in zip(self.ctx_kv, new)]
        else:
            self.ctx_kv = new
        self.n_ctx += layer_hidden.shape[0]

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        self.ids, self.ctx_kv, self.n_ctx, self.drafted = list(prompt_ids), [], 0, []
        if prefill is not None:
            if prefill.layer_hidden is None:
                raise SpecScopeError("the block drafter needs the target's layer hidden states (CachedLM layers=)")
            self._extend(prefill.layer_hidden)  # positions 0..len−2

    @torch.inference_mode()
    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        n = min(n, self.block_len - len(self.drafted))
        if n <= 0:
            return DraftChunk([], None, [], [], [])
        if not self.ctx_kv:  # a one-token prompt: empty context
            h, d = self.model.config.num_kv_heads, self.model.config.head_dim
            empty = torch.empty(0, h, d, dtype=self.model.fc.weight.dtype, device=self.device)
            self.ctx_kv = [(empty, empty) for _ in self.model.layers]
        anchor_pos = len(self.ids) - 1  # the pending token; the context holds positions 0..anchor_pos−1
        assert self.n_ctx == anchor_pos, (self.n_ctx, anchor_pos)
        kv = [(k[None], v[None]) for k, v in self.ctx_kv]  # add S = 1
        tokens = torch.tensor([[self.ids[-1]]], device=self.device)
        hidden = self.model.block_states(tokens, torch.tensor([[anchor_pos]], device=self.device), kv, None)[0, 0]
        hidden = hidden[1 : n + 1]  # [n, H] block positions 1..n
        logits = self.model.logits(hidden).float()  # [n, V]
        out_tokens, qs, token_probs = [], [], []
        for row in logits:  # each position from its own warped distribution (q rows are what was sampled)
            token, q, prob = draw(row, sampling, generator)
            out_tokens.append(token), qs.append(q), token_probs.append(prob)
        self.drafted += out_tokens
        probs = torch.stack(qs) if qs[0] is not None else None
        return DraftChunk(out_tokens, probs, token_probs, list(hidden), list(logits))

    def commit(self, accepted: int, next_token: int, verified: LMOutput) -> None:
        self.ids += [*self.drafted[:accepted], next_token]
        self.drafted = []
        if verified.layer_hidden is None:
            raise SpecScopeError("the block drafter needs the target's layer hidden states (CachedLM layers=)")
        self._extend(verified.layer_hidden[: accepted + 1])  # [pending, x_1..x_accepted]


# ----------------------------------------------------------------------------------------------------------
# Assets


def save_block_model(model: BlockDraftModel, name: str, card: dict, directory: Path = BLOCK_DIR) -> Path:
    """Write ``NAME.safetensors`` (bf16 trainable weights) + ``NAME.json`` (card with config and sha256)."""
    from spec_core.draft_models import file_sha256

    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / f"{name}.safetensors"
    tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.trainable_state().items()}
    save_file(tensors, str(weights))
    card = {**card, "name": name, "design": "block", "config": asdict(model.config), "weights": weights.name,
            "sha256": file_sha256(weights)}  # fmt: skip
    (directory / f"{name}.json").write_text(json.dumps(card, indent=2) + "\n")
    return weights


def load_block_model(target, name: str, directory: Path = BLOCK_DIR) -> tuple[BlockDraftModel, dict]:
    """Build the block drafter of card ``name`` around ``target`` and load its weights (hash-checked)."""
    from spec_core.draft_models import file_sha256

    path = directory / f"{name}.json"
    if not path.exists():
        have = sorted(p.stem for p in directory.glob("*.json"))
        raise SpecScopeError(
            f"no block drafter {name!r} in {directory} (available: {have}); train it with "
            f"`python -m spec_core train block --loss {name}`"
        )
    card = json.loads(path.read_text())
    weights = directory / card["weights"]
    if not weights.exists() or file_sha256(weights) != card["sha256"]:
        raise SpecScopeError(f"block drafter {name!r}: {weights.name} is missing or does not match its card's sha256")
    cfg = dict(card["config"])
    config = BlockConfig(**{**cfg, "target_layers": tuple(cfg["target_layers"])})
    if config.hidden_size != target.config.hidden_size:
        raise SpecScopeError(f"block drafter {name!r} was trained for hidden size {config.hidden_size}")
    model = BlockDraftModel(config, target.model.embed_tokens, target.lm_head)
    missing, unexpected = model.load_state_dict(load_file(str(weights)), strict=False)
    missing = [k for k in missing if not k.startswith("rotary")]
    if missing or unexpected:
        raise SpecScopeError(f"block drafter {name!r}: weights do not fit ({missing[:3]}, {unexpected[:3]})")
    return model.to(next(target.parameters()).dtype).eval(), card


def make_block_drafter(pair, spec: str) -> BlockDrafter:
    """The drafter of method ``block:LOSS`` for ``pair`` (loaded once, then cached in ``pair.extras``).

    A model already in ``pair.extras["block:LOSS"]`` is used as is (tests and ablations inject one there);
    otherwise the asset ``assets/block/LOSS`` is loaded, which exists for the embedded target only.
    """
    from spec_core.methods import BLOCK_LOSSES

    loss = spec.partition(":")[2]
    if loss not in BLOCK_LOSSES:
        raise SpecScopeError(f"block drafters: block:{{{','.join(BLOCK_LOSSES)}}}, got {spec!r}")
    key = f"block:{loss}"
    if key not in pair.extras:
        if pair.name != "embedded":
            raise SpecScopeError(
                f"{spec!r} needs a block drafter trained for the target; the shipped ones are for the embedded "
                f"pair only, not {pair.name!r}"
            )
        model, _ = load_block_model(pair.target, loss)
        pair.extras[key] = model.to(pair.device)
    return BlockDrafter(pair.extras[key])
