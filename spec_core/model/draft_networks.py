"""The draft networks for a target (their assets are read and written by :mod:`spec_core.model.draft_assets`).

Three designs, all sharing the target's tokenizer, input embedding and (tied) output head, which are
never stored in an asset (they are the target's):

- ``standalone``: a small Llama (1–2 decoder layers) reading token embeddings — an ordinary causal LM that
  transformers' assisted generation can also run.
- ``feature``: EAGLE-style (Li et al., "EAGLE: Speculative Sampling Requires Rethinking Feature
  Uncertainty", arXiv 2401.15077): input at position j is [target feature of position j − 1 ⊕ embedding of
  token j] → Linear(2H → H) → one decoder layer → final norm → the target's head. While drafting past the
  verified text, the draft feeds its own output feature back in. With ``feature_layers`` the verified
  positions' feature fuses several target layers (EAGLE-3, arXiv 2503.01840).
- ``truncated``: the target's first layers with its final norm and head, untrained; the fallback when no
  trained draft is present (clearly not a trained draft).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel


def draft_config(target_config: LlamaConfig, num_layers: int, vocab_size: int | None = None) -> LlamaConfig:
    """The target's config with fewer layers (and optionally a different vocabulary size)."""
    cfg = copy.deepcopy(target_config)
    cfg.num_hidden_layers = num_layers
    if vocab_size is not None:
        cfg.vocab_size = vocab_size
        cfg.pad_token_id = None if vocab_size <= (cfg.pad_token_id or 0) else cfg.pad_token_id
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    if getattr(cfg, "_attn_implementation", None) == "specscope_invariant":  # a batch-invariant target's
        cfg._attn_implementation = "specscope_sdpa"  # a draft needs no batch invariance (spec_core/model/invariance.py)
    cfg.tie_word_embeddings = True
    return cfg


def build_standalone(target: LlamaForCausalLM, num_layers: int = 1, init_from_target: bool = True) -> LlamaForCausalLM:
    """A ``num_layers`` Llama sharing the target's embedding and head; layers start as the target's first ones."""
    # transformers wraps PreTrainedModel.to with functools.wraps(nn.Module.to), whose stub hides the bound self
    draft = LlamaForCausalLM(draft_config(target.config, num_layers)).to(target.dtype)  # type: ignore[arg-type]
    draft.model.embed_tokens = target.model.embed_tokens  # shared, frozen
    draft.lm_head = target.lm_head
    if init_from_target:
        for i in range(num_layers):
            draft.model.layers[i].load_state_dict(target.model.layers[i].state_dict())
        draft.model.norm.load_state_dict(target.model.norm.state_dict())
    return draft.eval()


def build_truncated(target: LlamaForCausalLM, num_layers: int = 2) -> LlamaForCausalLM:
    """The untrained fallback draft: the target's first ``num_layers`` layers, final norm and head."""
    return build_standalone(target, num_layers, init_from_target=True)


class FeatureDraft(nn.Module):
    """EAGLE-style draft: ([feature_{j−1} ⊕ embed(token_j)] → fc → decoder layer(s) → norm) = feature_j.

    ``forward`` returns the predicted features ``[B, T, H]``; logits are ``head(features)`` with the target's
    head. The embedding and head are references to the target's and are not part of ``trainable_state``.
    """

    def __init__(
        self,
        target: LlamaForCausalLM,
        num_layers: int = 1,
        init_from_target: bool = True,
        head_size: int = 0,
        feature_layers: tuple[int, ...] = (),
        copy_evidence_size: int = 0,
    ):
        super().__init__()
        hidden = target.config.hidden_size
        self.config = draft_config(target.config, num_layers, vocab_size=1)  # the body never embeds ids
        # Fused target features (EAGLE-3, Li et al., arXiv 2503.01840): the feature of a verified position is
        # a learned projection of several target layers' states (indices into hidden_states) and the last one,
        # each RMS-normalised first (their scales differ by an order of magnitude). Empty: EAGLE-1's feature.
        self.feature_layers = tuple(int(i) for i in feature_layers)
        if self.feature_layers:
            self.fuse = nn.Linear((len(self.feature_layers) + 1) * hidden, hidden, bias=False)
            with torch.no_grad():  # start as EAGLE-1: the last hidden state passes through
                self.fuse.weight.zero_()
                self.fuse.weight[:, -hidden:].copy_(torch.eye(hidden))
        self.fc = nn.Linear(2 * hidden, hidden, bias=True)
        self.body = LlamaModel(self.config)
        self.embed = [target.model.embed_tokens]  # in a list: shared, not registered as a submodule
        self.head = [target.lm_head]
        # Trimmed head (0 = full vocabulary): logits only over `vocab_subset`, −inf elsewhere. A draft
        # distribution with a smaller support keeps speculative sampling exact: q is what tokens are drawn from.
        self.register_buffer("vocab_subset", torch.arange(head_size, dtype=torch.long), persistent=True)
        self._head_rows: torch.Tensor | None = None
        self.head_proj: nn.Module | None = None  # features → the trimmed head's logits, when set (an int8 draft)
        # a copy gate (spec_core.drafters.copying), when the draft was trained to copy: its card's "copy" says
        self.copy_gate = CopyGate(hidden, copy_evidence_size) if copy_evidence_size else None
        with torch.no_grad():  # start as "embedding passes through": fc ≈ [0 | I]
            self.fc.weight.zero_()
            self.fc.weight[:, hidden:].copy_(torch.eye(hidden))
            self.fc.bias.zero_()
        if init_from_target:
            for i in range(num_layers):
                self.body.layers[i].load_state_dict(target.model.layers[i].state_dict())
            self.body.norm.load_state_dict(target.model.norm.state_dict())
        self.to(target.dtype)

    def target_features(self, hidden: torch.Tensor, layer_hidden: torch.Tensor | None = None) -> torch.Tensor:
        """The input feature of verified positions: ``hidden`` ``[..., H]`` (the target's last, post-norm
        state), fused with ``layer_hidden`` ``[..., L, H]`` (the states of ``feature_layers``) when the draft
        has them. The draft's own output features feed back in unchanged while drafting."""
        if not self.feature_layers:
            return hidden
        if layer_hidden is None:
            raise ValueError("this draft fuses target layers: pass their hidden states (layer_hidden)")
        parts = torch.cat([layer_hidden, hidden.unsqueeze(-2)], dim=-2).to(self.fuse.weight.dtype)  # [..., L+1, H]
        parts = parts * torch.rsqrt(parts.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(parts.dtype)
        return self.fuse(parts.flatten(-2))

    def forward(
        self,
        features: torch.Tensor,
        token_ids: torch.Tensor,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # features: [B, T, H] target (or draft) feature of the previous position; token_ids: [B, T]
        # attention_mask / position_ids: a 4D tree mask and per-node positions when drafting a token tree
        x = self.fc(torch.cat([features, self.embed[0](token_ids)], dim=-1))  # [B, T, H]
        out = self.body(
            inputs_embeds=x,
            past_key_values=past_key_values,
            use_cache=past_key_values is not None,
            attention_mask=attention_mask,
            position_ids=position_ids,
        )
        return out.last_hidden_state  # [B, T, H]

    def set_vocab_subset(self, subset: torch.Tensor) -> None:
        self.vocab_subset = subset.to(torch.long)
        self._head_rows = None

    def head_rows(self) -> torch.Tensor:
        """``[V', H]`` rows of the target's head for the trimmed vocabulary."""
        if self._head_rows is None or self._head_rows.device != self.vocab_subset.device:
            self._head_rows = self.head[0].weight[self.vocab_subset].detach()
        return self._head_rows

    def logits(self, features: torch.Tensor, extra: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Full-vocabulary logits ``[..., V]`` (−inf outside the trimmed head's vocabulary, if any). ``extra``:
        (ids ``[E]``, their rows of the target's head ``[E, H]``) that widen the trimmed head for one generation,
        e.g. the passage's own rare words (:class:`~spec_core.drafters.feature.FeatureDrafter`)."""
        if self.vocab_subset.numel() == 0:
            return self.head[0](features)
        sub = self.head_proj(features) if self.head_proj is not None else features @ self.head_rows().T  # [..., V']
        full = sub.new_full((*features.shape[:-1], self.vocab_size), float("-inf"))
        full.index_copy_(-1, self.vocab_subset, sub)
        if extra is not None and extra[0].numel():
            ids, rows = extra
            full.index_copy_(-1, ids, (features @ rows.T.to(features.dtype)).to(full.dtype))
        return full

    @property
    def vocab_size(self) -> int:
        """The target's vocabulary (the rows of its head)."""
        return int(self.head[0].out_features)

    def rows_of(self, ids: torch.Tensor) -> torch.Tensor:
        """``[E, H]`` rows of the target's head for ``ids`` (from an int8 head's own bytes, never the whole matrix)."""
        head = self.head[0]
        if hasattr(head, "weight_int8") and not getattr(head, "_weight", None):
            return (head.weight_int8[ids].float() * head.scales[ids].float()[:, None]).to(torch.bfloat16)
        return head.weight[ids].detach()


class CopyGate(nn.Module):
    """A pointer-generator's gate (See, Liu & Manning, arXiv 1704.04368) for a feature draft: how much of the draft's
    next-token distribution goes to the token a prompt lookup would copy.

    ``g = sigmoid(w · [feature ⊕ evidence] + b)`` from the draft's predicted feature ``[..., H]`` and the match's
    evidence ``[..., E]`` (:func:`spec_core.drafters.copying.copy_evidence`); the draft then proposes from
    ``q = (1 − g) · p_draft + g · δ_copy``. It starts nearly shut (``g`` ≈ 0.02), the draft as it was.
    """

    def __init__(self, hidden_size: int, evidence_size: int):
        super().__init__()
        self.hidden_size, self.evidence_size = hidden_size, evidence_size
        self.linear = nn.Linear(hidden_size + evidence_size, 1)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.fill_(-4.0)

    def forward(self, features: torch.Tensor, evidence: torch.Tensor) -> torch.Tensor:
        """``[...]`` the gate's opening for each position."""
        x = torch.cat([features.float(), evidence.float()], dim=-1).to(self.linear.weight.dtype)
        return torch.sigmoid(self.linear(x).squeeze(-1).float())


def trainable_state(draft: nn.Module) -> dict[str, torch.Tensor]:
    """The weights an asset stores: everything but the target's shared embedding and head."""
    state = draft.state_dict()
    return {k: v for k, v in state.items() if not k.startswith(("model.embed_tokens", "lm_head", "embed", "head"))}
