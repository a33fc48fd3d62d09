"""Batch-invariant target passes: a token's logits do not depend on how many tokens share its forward.

Greedy speculative decoding is lossless only if the target's verdict on a draft equals the token plain decoding
would have written. It does in exact arithmetic; in floating point the target's logits for a token depend on the
shape of the pass that computed them, because a kernel picks its blocking, its vector tails and its reduction
order from the shapes it is given. At a near-tie the argmax then flips, and ``fixed:4`` writes other text than
``ar`` at the same precision. This is the batch-invariance problem of "Defeating Nondeterminism in LLM Inference"
(Horace He and Thinking Machines Lab, 2025), and the cure is theirs (and vLLM's batch-invariant mode,
``VLLM_BATCH_INVARIANT``): every row runs the same kernels on the same shapes in the same order, whatever else is
in the pass.

Measured on this project's CPU (one thread, the embedded SmolLM2 target; docs/RESULTS.md, "Session 14"):

- the weight-only int8 linears (``_weight_int8pack_mm``) are row-invariant: a row's output is the same bits for
  1…139 rows. bfloat16 ``F.linear`` is for 1…32 rows (a wider pass, e.g. a 32-node tree with its pending token,
  switches kernels), float32 for 2…15 (one row takes another path), so :class:`RowInvariantLinear` runs wider
  passes in chunks and a float32 single row as two;
- SDPA is not: its CPU kernel sizes its key blocks by the number of keys, so the same row over the same visible
  keys gives other bits when the pass holds masked keys after them (a chain) or between them (a token tree's other
  branches). :func:`invariant_sdpa` computes each row over exactly its visible keys, in cache order, with the
  query heads of a key/value head folded into one call (``[1, H_kv, H / H_kv, D]``): the call a one-token step
  makes. Rows with the same number of visible keys share one call along its batch axis (a tree's depth).

A prompt's prefill (a pass over an empty cache) keeps the fast path: every method of a precision shares it.
Other attention variants (dropout, soft-capping, a position bias, sinks, per-head masks, a batch of several
sequences) go to :func:`~spec_core.attention.grouped_sdpa` unchanged, without the guarantee.

:func:`set_batch_invariant` switches a loaded target on or off (``$SPECSCOPE_BATCH_INVARIANT=0`` loads targets
without it, to measure what it costs).
"""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F

from spec_core import attention

NAME = "specscope_invariant"
ENV = "SPECSCOPE_BATCH_INVARIANT"  # "0": load targets without batch invariance (to measure its cost)
_UNSUPPORTED = (*attention.UNFOLDABLE, "sliding_window")  # the folded path's, and a window that hides keys
WIDEST = 129  # the widest pass kept invariant: a tree of 128 nodes and the pending token (a prompt may be wider)


def enabled_by_default() -> bool:
    """Whether :func:`spec_core.models.load_pair` makes targets batch-invariant (yes unless ``$SPECSCOPE_BATCH_INVARIANT=0``)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class _RowPlan:
    """How a pass's rows are grouped: (n visible keys, rows, gather index ``[R, n]`` or None for a prefix ``[0, n)``).

    Built once per mask (transformers hands every layer the same tensor) and kept with a reference to it.
    """

    def __init__(self) -> None:
        self.mask: torch.Tensor | None = None
        self.shape: tuple[int, int] = (0, 0)
        self.groups: list[tuple[int, list[int], torch.Tensor | None]] = []

    def of(self, mask: torch.Tensor | None, q_len: int, k_len: int, device: torch.device):
        if mask is self.mask and self.shape == (q_len, k_len) and self.groups:
            return self.groups
        groups: list[tuple[int, list[int], torch.Tensor | None]]
        if mask is None:  # causal, the rows at the end of the cache: row r sees keys [0, k_len − q_len + r]
            groups = [(k_len - q_len + r + 1, [r], None) for r in range(q_len)]
        else:
            visible = mask[0, 0].to("cpu", torch.bool)  # [Q, K]
            counts = visible.sum(dim=1).tolist()
            by_count: dict[int, list[int]] = {}
            for r, n in enumerate(counts):
                by_count.setdefault(n, []).append(r)
            groups = []
            for n, rows in sorted(by_count.items()):
                if n == 0:
                    return None  # a row that sees nothing: not a pass of ours
                if len(rows) == 1 and bool(visible[rows[0], :n].all()):
                    groups.append((n, rows, None))  # a prefix of the cache: a view, nothing copied
                else:
                    keep = torch.stack([visible[r].nonzero()[:, 0] for r in rows]).to(device)  # [R, n], ascending
                    groups.append((n, rows, keep))
        self.mask, self.shape, self.groups = mask, (q_len, k_len), groups
        return groups


_PLAN = _RowPlan()


def invariant_sdpa(
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
    """transformers' attention-function signature; returns ``([1, Q, H, D], None)``, each row computed alone over
    its visible keys (one SDPA call per number of visible keys, the query heads folded onto their key/value head)."""
    batch, heads, q_len, dim = query.shape
    k_len = key.shape[-2]
    plan = None
    if (
        batch == 1
        and q_len < k_len  # a pass after cached tokens (a prefill from an empty cache is shared by every method)
        and q_len <= WIDEST
        and dropout == 0.0
        and not any(kwargs.get(k) is not None for k in _UNSUPPORTED)
        and (
            attention_mask is None
            or (attention_mask.dim() == 4 and attention_mask.shape[:2] == (1, 1) and attention_mask.dtype == torch.bool)
        )
    ):
        plan = _PLAN.of(attention_mask, q_len, k_len, query.device)
    if plan is None:
        return attention.grouped_sdpa(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    q_rows = query[0].transpose(0, 1)  # [Q, H, D] (a view)
    parts, order = [], []
    for n, rows, keep in plan:
        r = len(rows)
        if keep is None:  # one row over a prefix of the cache: views only
            q = q_rows[rows[0] : rows[0] + 1].reshape(1, kv_heads, groups, dim)  # [1, H_kv, groups, D]
            k, v = key[:, :, :n], value[:, :, :n]  # [1, H_kv, n, D]
        else:
            q = q_rows[rows].reshape(r, kv_heads, groups, dim)  # [R, H_kv, groups, D]
            flat = keep.reshape(-1)
            k = key[0].index_select(1, flat).view(kv_heads, r, n, dim).transpose(0, 1)  # [R, H_kv, n, D]
            v = value[0].index_select(1, flat).view(kv_heads, r, n, -1).transpose(0, 1)
        parts.append(F.scaled_dot_product_attention(q, k, v, scale=scaling).reshape(r, heads, -1))  # [R, H, D]
        order += rows
    out = torch.cat(parts) if len(parts) > 1 else parts[0]  # [Q, H, D], rows in plan order
    if order != sorted(order):
        out = out[torch.tensor(order, device=out.device).argsort()]
    return out.unsqueeze(0), None


ROW_CHUNK = {torch.float32: 15, torch.bfloat16: 32}  # the widest GEMM whose rows agree with narrower ones (measured)
MIN_ROWS = {torch.float32: 2}  # float32: one row takes another GEMM path than two


class RowInvariantLinear(nn.Linear):
    """An :class:`~torch.nn.Linear` whose rows do not depend on how many rows it is given.

    Measured on this CPU (one thread): bfloat16 ``F.linear`` gives a row the same bits for 1…32 rows and switches
    kernels above (576 → 576 at 33 rows); float32 agrees for 2…15 rows, and a single row takes another path. So a
    pass wider than the chunk runs as near-equal chunks of at most :data:`ROW_CHUNK` rows, and a float32 single row
    as two (the row twice, the second dropped). A prefill wider than :data:`WIDEST` keeps one GEMM.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        chunk = ROW_CHUNK.get(x.dtype, 0)
        low = MIN_ROWS.get(x.dtype, 1)
        if not chunk or low <= rows <= chunk or rows > WIDEST:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, -1)
        if rows < low:
            out = F.linear(flat.expand(low, -1), self.weight, self.bias)[:rows]
        else:
            out = torch.cat([F.linear(part, self.weight, self.bias) for part in flat.tensor_split(-(-rows // chunk))])
        return out.view(*x.shape[:-1], self.out_features)


def register() -> str:
    """Make :data:`NAME` known to transformers (idempotent); returns it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    attention.register()
    AttentionInterface.register(NAME, invariant_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def is_batch_invariant(model: nn.Module) -> bool:
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == NAME


def set_batch_invariant(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch a target on :mod:`spec_core.attention`'s SDPA to :func:`invariant_sdpa` (and its bfloat16 / float32 linears to
    :class:`RowInvariantLinear`), or back with ``on=False``. A model on another attention (eager) is left as it is."""
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if current not in (attention.NAME, NAME, "sdpa"):
        return model
    register()
    model.set_attn_implementation(NAME if on else attention.NAME)  # type: ignore[operator]  # transformers' method
    for module in model.modules():
        if type(module) is nn.Linear and on and module.weight.dtype in ROW_CHUNK:
            module.__class__ = RowInvariantLinear
        elif type(module) is RowInvariantLinear and not on:
            module.__class__ = nn.Linear  # type: ignore[assignment]  # back to the class it was loaded as
    return model
