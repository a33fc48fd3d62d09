"""Batch-invariant target passes: a token's logits do not depend on how many tokens share its forward.

Greedy speculative decoding is lossless only if the target's verdict on a draft equals the token plain decoding
would have written. It does in exact arithmetic; in floating point the target's logits for a token depend on the
shape of the pass that computed them, because a kernel picks its blocking, its vector tails and its reduction
order from the shapes it is given. At a near-tie the argmax then flips, and ``fixed:4`` writes other text than
``ar`` at the same precision. This is the batch-invariance problem of "Defeating Nondeterminism in LLM Inference"
(Horace He and Thinking Machines Lab, 2025), and the cure is theirs (and vLLM's batch-invariant mode,
``VLLM_BATCH_INVARIANT``): every row runs the same kernels on the same shapes in the same order, whatever else is
in the pass.

Measured on this project's CPUs (the embedded SmolLM2 target; docs/LOG.md, "batch-invariant verification"):

- the weight-only int8 linears (``_weight_int8pack_mm``) are row-invariant: a row's output is the same bits for
  1…139 rows. bfloat16 and float32 ``F.linear`` are not, and where they break depends on the CPU: on an Intel
  Xeon with AMX bfloat16 switches kernels above 32 rows and float32 takes another path for one row and above 15;
  on an AMD EPYC with AVX2 only, one row takes another path (bfloat16 with 1,536 input features, float32 below 4
  rows). So :func:`row_plan` probes this CPU's GEMM once per shape and :class:`RowInvariantLinear` runs every
  pass inside the widths it found invariant (narrow ones padded, wide ones in chunks);
- SDPA is not: its CPU kernel sizes its key blocks by the number of keys, so the same row over the same visible
  keys gives other bits when the pass holds masked keys after them (a chain) or between them (a token tree's other
  branches). :func:`invariant_sdpa` computes each row over exactly its visible keys, in cache order, with the
  query heads of a key/value head folded into one call (``[1, H_kv, H / H_kv, D]``): the call a one-token step
  makes. Rows with the same number of visible keys share one call along its batch axis (a tree's depth).

A prompt's prefill (a pass over an empty cache) keeps the fast path: every method of a precision shares it.
Other attention variants (dropout, soft-capping, a position bias, sinks, per-head masks, a batch of several
sequences) go to :func:`~spec_core.model.attention.grouped_sdpa` unchanged, without the guarantee.

:func:`set_batch_invariant` switches a loaded target on or off (``$SPECSCOPE_BATCH_INVARIANT=0`` loads targets
without it, to measure what it costs).
"""

from __future__ import annotations

import functools
import os

import torch
from torch import nn
from torch.nn import functional as F

from spec_core.model import attention

NAME = "specscope_invariant"
ENV = "SPECSCOPE_BATCH_INVARIANT"  # "0": load targets without batch invariance (to measure its cost)
_UNSUPPORTED = (*attention.UNFOLDABLE, "sliding_window")  # the folded path's, and a window that hides keys
WIDEST = 129  # the widest pass kept invariant: a tree of 128 nodes and the pending token (a prompt may be wider)


def enabled_by_default() -> bool:
    """Whether :func:`spec_core.model.models.load_pair` makes targets batch-invariant (yes unless ``$SPECSCOPE_BATCH_INVARIANT=0``)."""
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


INVARIANT_DTYPES = (torch.float32, torch.bfloat16)  # int8 linears are row-invariant already (the module docstring)
PROBE_COLUMNS = 512  # a probe's outputs: a slice of the real width (a row's reduction runs over the input features)
PROBE_WIDTHS = (*range(1, 41), 48, 64, 65, 96, 128, WIDEST)
PROBE_LOWS = (1, 2, 3, 4, 8)  # the fewest rows a GEMM may be given, tried in turn


@functools.cache
def row_plan(dtype: torch.dtype, in_features: int, out_features: int, threads: int) -> tuple[int, int]:
    """``(low, chunk)``: run a linear with at least ``low`` rows (a narrower pass padded with copies of its last row)
    and at most ``chunk`` (a wider one in near-equal chunks), and a row's bits do not depend on the pass's width.

    Probed on this CPU, at this thread count, once per shape: GEMM libraries pick their kernels and reduction
    orders by the shape and the instruction set, so no constant holds everywhere. Measured: on an Intel Xeon with
    AMX, bfloat16 is invariant for 1…32 rows and float32 for 2…15; on an AMD EPYC with AVX2 only, bfloat16 with
    1,536 input features needs 2 rows (one row takes another path) and float32 4, with no upper bound up to
    :data:`WIDEST`. The probe multiplies random rows by a ``[PROBE_COLUMNS, in_features]`` matrix whose sums cancel, takes
    each row alone (padded to ``low``) as the reference, and keeps the ``low`` that gives the widest
    ``chunk`` of :data:`PROBE_WIDTHS` whose every narrower width agrees bit for bit. ``tests/engine/
    test_batch_invariance.py`` checks the result on the real target."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(WIDEST, in_features, generator=generator).to(dtype)
    weight = cancelling_rows(x, min(out_features, PROBE_COLUMNS), generator).to(dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    best = (PROBE_LOWS[-1], PROBE_LOWS[-1])  # if nothing agrees: the narrowest plan, which the model's test judges
    try:
        for low in PROBE_LOWS:
            alone = torch.cat([F.linear(x[r : r + 1].expand(low, -1), weight)[:1] for r in range(WIDEST)])
            chunk = 0
            for width in PROBE_WIDTHS:
                if width < low:
                    continue
                if not torch.equal(F.linear(x[:width], weight), alone[:width]):
                    break
                chunk = width
            if chunk > best[1]:
                best = (low, chunk)
            if chunk == WIDEST:
                break
    finally:
        torch.set_num_threads(before)
    return best


def cancelling_rows(x: torch.Tensor, columns: int, generator: torch.Generator) -> torch.Tensor:
    """``[columns, in_features]`` unit rows orthogonal to the probe's rows ``x`` (when there are fewer rows than
    features): each output is a sum that cancels to almost nothing, so a change in the order of its additions shows
    in the rounded result (4% of outputs against 0.01% with plain random rows, measured at 1,536 features)."""
    raw = torch.randn(columns, x.shape[1], generator=generator, dtype=torch.float64)
    if len(x) < x.shape[1]:
        rows = x.double()
        raw = raw - (raw @ rows.T) @ torch.linalg.solve(rows @ rows.T, rows)
    return (raw / raw.norm(dim=1, keepdim=True)).float()


class RowInvariantLinear(nn.Linear):
    """An :class:`~torch.nn.Linear` whose rows do not depend on how many rows it is given.

    It runs every pass the way :func:`row_plan` found this CPU's GEMM row-invariant: a pass narrower than ``low``
    rows padded with copies of its last row (the copies dropped), a pass wider than ``chunk`` as near-equal
    chunks. A prefill wider than :data:`WIDEST` keeps one GEMM.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if x.dtype not in INVARIANT_DTYPES or rows > WIDEST:
            return F.linear(x, self.weight, self.bias)
        low, chunk = row_plan(x.dtype, self.in_features, self.out_features, torch.get_num_threads())
        if low <= rows <= chunk:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, -1)
        parts = flat.tensor_split(-(-rows // chunk)) if rows > chunk else (flat,)
        out = torch.cat([self._padded(part, low) for part in parts]) if len(parts) > 1 else self._padded(flat, low)
        return out.view(*x.shape[:-1], self.out_features)

    def _padded(self, rows: torch.Tensor, low: int) -> torch.Tensor:
        """``rows`` through one GEMM of at least ``low`` rows (copies of the last row fill it, then are dropped)."""
        n = len(rows)
        if n >= low:
            return F.linear(rows, self.weight, self.bias)
        return F.linear(torch.cat([rows, rows[-1:].expand(low - n, -1)]), self.weight, self.bias)[:n]


def register() -> str:
    """Make :data:`NAME` known to transformers (idempotent); returns it."""
    from transformers import AttentionInterface  # in modeling_utils: transformers' modeling code (~2 s)
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask  # loads sympy (~1 s)

    attention.register()
    AttentionInterface.register(NAME, invariant_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def is_batch_invariant(model: nn.Module) -> bool:
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == NAME


def set_batch_invariant(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch a target on :mod:`spec_core.model.attention`'s SDPA to :func:`invariant_sdpa` (and its bfloat16 / float32 linears to
    :class:`RowInvariantLinear`), or back with ``on=False``. A model on another attention (eager) is left as it is."""
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if current not in (attention.NAME, NAME, "sdpa"):
        return model
    register()
    model.set_attn_implementation(NAME if on else attention.NAME)  # type: ignore[operator]  # transformers' method
    for module in model.modules():
        if type(module) is nn.Linear and on and module.weight.dtype in INVARIANT_DTYPES:
            module.__class__ = RowInvariantLinear
            row_plan(module.weight.dtype, module.in_features, module.out_features, torch.get_num_threads())
        elif type(module) is RowInvariantLinear and not on:
            module.__class__ = nn.Linear  # type: ignore[assignment]  # back to the class it was loaded as
    return model
