"""Attention for a few queries against a long cache, without copying the cache (grouped-query attention).

A verification pass feeds a handful of tokens after a cache of hundreds. Its causal mask is not the square one
SDPA's ``is_causal`` draws, so transformers passes an explicit mask, and with a mask its SDPA path repeats every
key/value head for each query head that shares it (``repeat_kv``): a copy of the whole cache per layer and per
pass, measured at 70 µs a layer against 30 µs without it for 2 queries over 202 keys (bfloat16, one thread).

:func:`grouped_sdpa` folds the query heads that share a key/value head into that head's query axis instead —
``[B, H, Q, D] → [B, H_kv, (H / H_kv) · Q, D]``, the mask tiled to match — so SDPA reads the cache as it is. The
sums are the same ones, so the output equals the repeated path's: bit for bit on an Intel Xeon with AMX, and to
float32's last bits (≤ 3e-6 in a test) on an AMD EPYC with AVX2, whose GEMM inside SDPA rounds a query row by its
place in a block of rows (a pass's 5 queries against 10 folded ones; a test checks both). This extends it to the
few queries of a verification pass or a token tree.

One query without a mask (a draft's one-token step) is folded too. transformers folds one query only when a mask is
given (``pack_gqa``); without one it asks SDPA for ``enable_gqa``, whose CPU kernel took 206 µs against 32 µs
folded for 9 heads over 3, 300 keys, bfloat16 (244 against 82 µs after a pass over other weights had left the
caches cold; AMD EPYC Zen 5, one thread; docs/LOG.md, "2026-12-06 (seventh session)"). Everything else (a per-head mask, a position bias,
soft-capping) goes to transformers' own ``sdpa_attention_forward``.

:func:`use_grouped_sdpa` registers it under :data:`NAME` (transformers' ``AttentionInterface`` and, for its
masks, ``AttentionMaskInterface``, which builds the same boolean masks as for ``sdpa``) and switches a loaded
model to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch.nn import functional as F

if TYPE_CHECKING:
    from transformers import PreTrainedModel

NAME = "specscope_sdpa"
UNFOLDABLE = ("softcap", "position_bias", "cache", "sinks")  # attention options the folded path does not implement


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature; returns ``([B, Q, H, D], None)`` like its SDPA path."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # loads sympy (~1 s)

    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q_len, dim = query.shape
    if (
        groups > 1
        and q_len == 1
        and attention_mask is None
        and dropout == 0.0
        and not any(kwargs.get(k) is not None for k in UNFOLDABLE)
    ):  # one query sees every key: fold its heads onto their key/value head, no mask at all
        out = F.scaled_dot_product_attention(
            query.reshape(batch, heads // groups, groups, dim), key, value, scale=scaling
        )
        return out.reshape(batch, 1, heads, value.shape[-1]), None
    foldable = (
        groups > 1
        and q_len > 1
        and attention_mask is not None
        and attention_mask.dim() == 4
        and attention_mask.shape[1] == 1  # one mask for every head
        and dropout == 0.0
        and not any(kwargs.get(k) is not None for k in UNFOLDABLE)
    )
    if not foldable:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    folded = query.reshape(batch, heads // groups, groups * q_len, dim)  # a group's heads, one after the other
    assert attention_mask is not None  # foldable
    mask = attention_mask.repeat(1, 1, groups, 1)  # [B, 1, groups · Q, K]: the same rows for each folded head
    out = F.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    out = out.reshape(out.shape[0], heads, q_len, value.shape[-1])
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Make :data:`NAME` known to transformers (idempotent); returns it."""
    from transformers import AttentionInterface  # in modeling_utils: transformers' modeling code (~2 s)
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask  # loads sympy (~1 s)

    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def use_grouped_sdpa(model: torch.nn.Module) -> torch.nn.Module:
    """Switch ``model`` (loaded with SDPA) to :func:`grouped_sdpa`; a model on another attention is left as it is."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return model
    register()
    cast("PreTrainedModel", model).set_attn_implementation(NAME)  # a transformers model (it has an sdpa config)
    return model
