"""Grouped-query attention for a few queries without copying the cache (spec_core/model/attention.py)."""

from __future__ import annotations

import torch

from spec_core.model import attention
from spec_core.model.cached_lm import CachedLM, attention_mask
from tests.conftest import tiny_llama


def _passes(model, ctx, new, mask_of=None):
    """Logits of a pass over ``new`` after ``ctx`` was cached (optionally with a 4D mask built from ``mask_of``)."""
    lm = CachedLM(model, hidden=False)
    lm.reset()
    lm.forward(ctx, all_logits=False)
    mask = attention_mask(mask_of, lm.length, model, lm.device) if mask_of is not None else None
    return lm.forward(new, mask=mask).logits


def test_folded_groups_equal_transformers_sdpa(monkeypatch):
    model = tiny_llama(32, seed=3, layers=2, hidden=32)  # 4 query heads over 2 key/value heads
    ctx, new = torch.randint(0, 32, (40,)), torch.randint(0, 32, (5,))
    tree = torch.tensor(  # a branching draft: each node sees the pending token and its own ancestors
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 0, 1, 0, 0], [1, 1, 0, 1, 0], [1, 0, 1, 0, 1]], dtype=torch.bool
    )
    model.set_attn_implementation("sdpa")
    chain_ref, tree_ref = _passes(model, ctx, new), _passes(model, ctx, new, tree)

    calls = []
    sdpa = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(
        attention.F, "scaled_dot_product_attention", lambda q, *a, **k: calls.append(q.shape) or sdpa(q, *a, **k)
    )
    assert attention.use_grouped_sdpa(model) is model and model.config._attn_implementation == attention.NAME
    chain, tree_out = _passes(model, ctx, new), _passes(model, ctx, new, tree)
    # the same sums (bit for bit on an Intel Xeon with AMX; an AVX2 CPU's GEMM rounds a row by its place in a block
    # of rows, 5 queries against 10 folded: float32's last bits there); a wrong mask or fold would be off by O(1)
    torch.testing.assert_close(chain, chain_ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(tree_out, tree_ref, rtol=0, atol=1e-5)
    # the folded path ran for both passes, every layer: 2 key/value heads, each with its 2 heads' 5 queries
    assert calls.count(torch.Size([1, 2, 10, 8])) == 2 * 2


def test_one_query_is_folded_and_other_attentions_are_left_to_transformers(monkeypatch):
    model = tiny_llama(32, seed=4, layers=2, hidden=32)  # 4 query heads over 2 key/value heads
    model.set_attn_implementation("eager")
    assert attention.use_grouped_sdpa(model).config._attn_implementation == "eager"
    model.set_attn_implementation("sdpa")
    ctx = torch.randint(0, 32, (12,))
    one = _passes(model, ctx, torch.tensor([7]))
    calls = []
    sdpa = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(
        attention.F, "scaled_dot_product_attention", lambda q, *a, **k: calls.append(q.shape) or sdpa(q, *a, **k)
    )
    attention.use_grouped_sdpa(model)
    # a draft's one-token step: transformers would ask SDPA for enable_gqa; here the query's 4 heads sit on their
    # 2 key/value heads' query axis, and the sums are the same ones (a wrong fold would be off by O(1))
    torch.testing.assert_close(_passes(model, ctx, torch.tensor([7])), one, rtol=0, atol=1e-5)
    assert calls.count(torch.Size([1, 2, 2, 8])) == 2  # every layer, no mask


def test_the_embedded_target_loads_batch_invariant(embedded_f32):
    """Its passes run spec_core/model/invariance.py's attention (the folded groups, a row at a time; a prefill folded)."""
    from spec_core.model import invariance

    assert embedded_f32.target.config._attn_implementation == invariance.NAME
