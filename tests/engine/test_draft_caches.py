"""After a round that keeps only some drafts, every drafter's state equals a fresh prefill of the verified text.

The engine rolls each drafter back in ``commit``; a stale row would not show in greedy identity tests when the
draft is random (its proposals are rejected either way), so the state itself is compared: the standalone draft's
KV cache, the feature draft's feature rows and KV cache, and the block drafter's context keys/values.
"""

from __future__ import annotations

import pytest
import torch
from conftest import make_tiny_pair
from test_block_drafter import tiny_pair as tiny_block_pair
from transformers import DynamicCache

from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.model.cached_lm import CachedLM

PROMPT = "speculative decoding"


def _partial_rounds(run: Generation, wanted: int = 3):
    """Yield the run's text (prompt + generated, pending token last) right after rounds that kept 1..γ−1 drafts."""
    seen = 0
    for event in run.rounds():
        if 0 < event.accepted < event.draft_len and not event.finished:
            seen += 1
            yield list(run.prompt_ids) + list(run.new_tokens)
            if seen >= wanted:
                return
    assert seen, "no round kept only part of its drafts: the test saw nothing"


def _fresh(pair, ids: list[int], layers=()) -> object:
    lm = CachedLM(pair.target, layers=layers, hidden=True)
    lm.reset()
    return lm, lm.forward(torch.tensor(ids))


def _kv(cache, n: int):
    return [(layer.keys[..., :n, :], layer.values[..., :n, :]) for layer in cache.layers]


def _same(a, b) -> bool:
    return all(torch.allclose(x, y, atol=1e-5) for (kx, vx), (ky, vy) in zip(a, b) for x, y in ((kx, ky), (vx, vy)))


def test_standalone_cache_after_partial_accept():
    pair = make_tiny_pair(draft="standalone")  # a hot temperature flattens both models: partial accepts
    run = Generation(pair, PROMPT, "fixed:4", 80, SamplingConfig(temperature=2.0, seed=5))
    for ids in _partial_rounds(run):
        lm = run.drafter.lm
        assert lm.length <= len(ids) - 1  # never holds a rejected draft
        fresh = CachedLM(pair.draft)
        fresh.reset()
        fresh.forward(torch.tensor(ids[: lm.length]))
        assert _same(_kv(lm.cache, lm.length), _kv(fresh.cache, lm.length))


def test_feature_rows_and_cache_after_partial_accept():
    pair = make_tiny_pair(draft="feature")
    run = Generation(pair, PROMPT, "fixed:4", 80, SamplingConfig(temperature=1.0, seed=2))
    for ids in _partial_rounds(run):
        d = run.drafter
        _, out = _fresh(pair, ids[:-1], d.target_layers)
        feats = d.draft.target_features(out.hidden, out.layer_hidden)  # [len − 1, H] verified features
        assert d.n_feats >= len(ids) - 1
        assert torch.allclose(d.feats[: len(ids) - 1], feats, atol=1e-5)  # no row from a rejected draft
        cache = DynamicCache(config=d.draft.config)  # the draft's pairs 1..cached, from verified features only
        with torch.inference_mode():
            d.draft(feats[None, : d.cached], torch.tensor(ids[1 : d.cached + 1])[None], past_key_values=cache)
        assert _same(_kv(d.cache, d.cached), _kv(cache, d.cached))


def test_block_context_after_partial_accept():
    pair = tiny_block_pair(init="random")
    run = Generation(
        pair,
        "a longer prompt about speculative decoding",
        "block:dpace",
        200,
        SamplingConfig(temperature=1.0, seed=1),
        chat=False,
    )
    torch.set_num_threads(1)
    for ids in _partial_rounds(run, wanted=1):
        d = run.drafter
        _, out = _fresh(pair, ids[:-1], d.target_layers)
        with torch.inference_mode():
            ref = d.model.context_kv(d.model.project_context(out.layer_hidden), 0)
        assert d.n_ctx == len(ids) - 1
        for (k, v), (rk, rv) in zip(d.ctx_kv, ref):
            assert torch.allclose(k, rk, atol=1e-4) and torch.allclose(v, rv, atol=1e-4)


@pytest.mark.parametrize("draft", ["standalone", "feature"])
def test_target_cache_holds_the_verified_text_after_every_round(draft):
    pair = make_tiny_pair(draft=draft)
    run = Generation(pair, PROMPT, "fixed:3", 40)
    for _ in run.rounds():
        assert run.target_lm.length == len(run.prompt_ids) + len(run.new_tokens) - 1  # all but the pending token


RARE = (
    "Repeat exactly: The Ouagadougou accord was signed by Kwame Nkrumah-Mensah in Tegucigalpa on 17 Brumaire, "
    "with Xylophonia Quartzbridge presiding."
)


@pytest.mark.embedded
def test_the_trimmed_head_widens_with_the_texts_words_never_with_template_markers(embedded_f32):
    """The feature draft's head gains the prompt's and the verified text's tokens it lacked (their rows of the
    target's head), never a special token; the widened q is finite there, and the output is still ar's."""
    pair = embedded_f32
    head = set(pair.draft.vocab_subset.tolist())
    special = set(pair.tokenizer.all_special_ids)
    run = Generation(pair, RARE, "fixed:3", 24, SamplingConfig())
    result = run.run()
    assert result.token_ids == Generation(pair, RARE, "ar", 24, SamplingConfig()).run().token_ids
    drafter = run.drafter
    assert drafter is not None and drafter.extra is not None
    extra = set(drafter.extra[0].tolist())
    outside = {t for t in [*run.prompt_ids, *result.token_ids] if t not in head and t not in special}
    assert outside and outside <= extra  # every word of the text the head lacked
    assert not extra & special and not extra & head
    feature = drafter.feats[drafter.n_feats - 1]
    row = pair.draft.logits(feature, drafter.extra)
    assert torch.isfinite(row[drafter.extra[0]]).all()
    assert torch.isinf(pair.draft.logits(feature)[drafter.extra[0]]).all()  # the trimmed head alone cannot
