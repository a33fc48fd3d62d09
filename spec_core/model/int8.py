"""Weight-only int8 linears for the target: one scale per output channel, activations in bfloat16.

On a CPU a small model's one-token step is bound by reading its weights, and a bfloat16 matrix product
without native bf16 arithmetic (AVX2) costs nearly k one-token steps for a k-token pass. Weight-only int8
halves the bytes read and runs through ATen's ``_weight_int8pack_mm`` (the CPU path of gpt-fast), so a
pass over a few tokens stays close to one step. The draft keeps its own weights; the target's weights are
the same numbers, rounded to 8 bits per output channel (symmetric, scale = max |w| / 127).

torchao's ``Int8WeightOnlyConfig`` does the same job through transformers' ``TorchAoConfig``; measured on the
project's AVX2 machine it was slower than both bfloat16 and this module (docs/LOG.md, "Arithmetic per
machine"), and it is not a dependency: this module is the one op and its packing, nothing more.

An int8 pair runs the feature draft in int8 too (:func:`int8_draft`: a draft step and its commit 4.2 → 2.7 ms, the
same acceptance), and, on a CPU with native bf16 (:func:`native_bf16`), a prompt's prefill on the bf16 original,
where the int8 kernel's per-row work makes it several times slower (docs/LOG.md, "2026-12-01, commit 6807bab").
"""

from __future__ import annotations

import copy
import os
from typing import TYPE_CHECKING, TypeVar, cast

import torch
from torch import nn

from spec_core.core.precision import cpu_flags

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from spec_core.model.draft_networks import FeatureDraft

_Model = TypeVar("_Model", bound="PreTrainedModel")


class Int8Linear(nn.Module):
    """``y = x @ (int8 W · scale)ᵀ + b``: a drop-in for :class:`torch.nn.Linear` at inference.

    ``weight`` stays readable (the original tensor, shared and not copied) for parts that read a head's rows,
    e.g. a trimmed draft head; the forward pass never touches it.
    """

    weight_int8: torch.Tensor  # buffers, registered in __init__
    scales: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear, keep_weight: bool = False):
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-8) / 127.0
        q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
        self.register_buffer("weight_int8", q)
        self.register_buffer("scales", scale.to(torch.bfloat16))
        bias = linear.bias.detach().to(torch.bfloat16) if linear.bias is not None else None
        self.register_buffer("bias", bias)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._weight = [linear.weight] if keep_weight else []  # in a list: not a parameter of this module

    @property
    def weight(self) -> torch.Tensor:
        if not self._weight:
            return (self.weight_int8.float() * self.scales.float()[:, None]).to(torch.bfloat16)
        return self._weight[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).to(torch.bfloat16)
        y = torch.ops.aten._weight_int8pack_mm(flat, self.weight_int8, self.scales)
        if self.bias is not None:
            y = y + self.bias
        return y.view(*shape[:-1], self.out_features)


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AMX or AVX-512 BF16, not capped by
    ``ONEDNN_MAX_CPU_ISA``). There a prefill over a whole prompt runs faster in bf16 than in weight-only int8,
    whose kernel spends compute on every row (measured: 200 tokens 150 ms against 587 ms, one thread)."""

    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap and cap != "ALL" and "AMX" not in cap and "BF16" not in cap:
        return False
    return bool(cpu_flags() & {"amx_bf16", "avx512_bf16"})


def int8_target(model: _Model) -> _Model:
    """A copy of ``model`` (bfloat16) whose linears, the output head among them, are :class:`Int8Linear`.

    The copy shares the embedding with ``model`` (tied heads: the int8 head is built from the same matrix and
    keeps it readable as ``weight``); ``model`` itself is left as it was, so parts trained on the bfloat16
    target are still built from it.
    """
    if next(model.parameters()).dtype != torch.bfloat16:
        raise ValueError("int8_target expects a bfloat16 model (activations run in bfloat16)")
    embed = model.get_input_embeddings()
    shared = {id(p): p for p in embed.parameters()}
    quant = copy.deepcopy(model, memo=shared)  # the embedding is shared, not copied
    for module in list(quant.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child, keep_weight=child.weight is embed.weight))
    return quant.eval()


def int8_draft(draft: nn.Module) -> nn.Module:
    """A copy of a feature draft (:class:`~spec_core.model.draft_networks.FeatureDraft`) whose own linears and trimmed
    head run as :class:`Int8Linear`: a draft step reads half the bytes (the head's 8,192 rows were a third of it).

    The copy shares the target's embedding and head with ``draft`` (they are references, not its own weights);
    ``draft`` is left as it was. A draft of another design is returned unchanged.
    """
    if not hasattr(draft, "head_rows") or next(draft.parameters()).dtype != torch.bfloat16:
        return draft
    shared = {id(draft.embed): draft.embed, id(draft.head): draft.head}
    quant = cast("FeatureDraft", copy.deepcopy(draft, memo=shared))  # a feature draft: it has head_rows
    gate = getattr(quant, "copy_gate", None)  # a copy gate's one row stays as it was (it costs nothing)
    for module in list(quant.modules()):
        if gate is not None and module is gate:
            continue
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child, keep_weight=True))
    if quant.vocab_subset.numel():  # a trimmed head: its rows of the target's head, in int8
        rows = quant.head_rows()  # [V', H]
        head = nn.Linear(rows.shape[1], rows.shape[0], bias=False)
        head.weight = nn.Parameter(rows, requires_grad=False)
        quant.head_proj = Int8Linear(head)
    return quant.eval()
