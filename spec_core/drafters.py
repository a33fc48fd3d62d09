"""Drafters behind one protocol: they propose tokens and roll back to what the target verified.

The engine drives a drafter in three calls:

1. ``reset(prompt_ids, prefill)`` — once, after the target's prefill of ``prompt_ids[:-1]``;
2. ``propose(n, sampling, generator)`` — draft ``n`` more tokens (a policy may call it several times a round);
3. ``commit(accepted, next_token, verified)`` — after verification: keep the accepted drafts, append the
   target's token, drop the rest. ``verified`` is the target's output at the positions on the accepted path
   ([last token, x_1..x_accepted]); drafters that read target features (EAGLE-style, block) take them here.

Designs: :class:`StandaloneDrafter` (any causal LM with its own KV cache) and :class:`FeatureDrafter`
(EAGLE-style, arXiv 2401.15077; see :mod:`spec_core.draft_models`). The block drafter (DFlash-style) plugs in
through :func:`make_drafter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import DynamicCache

from spec_core import rules
from spec_core.cached_lm import CachedLM, LMOutput
from spec_core.types import SamplingConfig


@dataclass(frozen=True)
class DraftChunk:
    tokens: list[int]  # [n]
    probs: torch.Tensor | None  # [n, V] q, the distribution each token was drawn from (None when greedy)
    token_probs: list[float]  # [n] the draft's probability of each drawn token (temperature-1 softmax if greedy)
    hidden: list[torch.Tensor]  # n tensors [H]: the draft's last hidden state at each drafted position
    logits: list[torch.Tensor]  # n tensors [V]: the draft's raw logits at each drafted position


class Drafter(Protocol):
    target_layers: tuple[int, ...]  # target layers whose hidden states `verified.layer_hidden` must carry
    needs_target_hidden: bool  # whether `verified.hidden` (the target's last hidden state) is read

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None: ...

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk: ...

    def commit(self, accepted: int, next_token: int, verified: LMOutput) -> None: ...


def draw(logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None):
    """Choose a draft token from ``logits`` ``[V]``: (token, q or None, the draft's probability of it)."""
    if sampling.greedy:
        token = int(logits.argmax())
        return token, None, float(torch.softmax(logits.float(), -1)[token])
    q = rules.warp_probs(logits[None], sampling.temperature, sampling.top_k, sampling.top_p)[0]  # [V]
    token = int(rules.sample(q[None], generator)[0])
    return token, q, float(q[token])


def _chunk(tokens, qs, token_probs, hidden, logits) -> DraftChunk:
    probs = torch.stack(qs) if qs and qs[0] is not None else None
    return DraftChunk(tokens, probs, token_probs, hidden, logits)


class StandaloneDrafter:
    """A causal LM drafting token by token with its own KV cache (rolled back with ``crop``)."""

    target_layers: tuple[int, ...] = ()
    needs_target_hidden = False

    def __init__(self, model: torch.nn.Module):
        self.lm = CachedLM(model)
        self.ids: list[int] = []
        self.round_start = 0

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        self.ids, self.round_start = list(prompt_ids), len(prompt_ids)
        self.lm.reset()
        if len(prompt_ids) > 1:
            self.lm.forward(torch.tensor(prompt_ids[:-1]), all_logits=False)

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        tokens, qs, token_probs, hidden, logits = [], [], [], [], []
        for _ in range(n):
            out = self.lm.forward(torch.tensor(self.ids[self.lm.length :]))  # the 1–2 tokens not yet cached
            token, q, prob = draw(out.logits[-1], sampling, generator)
            self.ids.append(token)
            tokens.append(token), qs.append(q), token_probs.append(prob), hidden.append(out.hidden[-1])
            logits.append(out.logits[-1])
        return _chunk(tokens, qs, token_probs, hidden, logits)

    def commit(self, accepted: int, next_token: int, verified: LMOutput) -> None:
        self.ids = self.ids[: self.round_start + accepted] + [next_token]
        self.lm.crop(min(self.lm.length, len(self.ids) - 1))
        self.round_start = len(self.ids)


class FeatureDrafter:
    """EAGLE-style drafting: pair j = (feature of position j − 1, token j) → predicted feature of position j.

    ``feats[i]`` is the feature of position i: the target's (verified) or the draft's own (while drafting).
    The draft cache holds pairs for positions 1..``cached``; a pair is valid only while its input feature is
    the target's, so ``commit`` crops the cache back to the pairs built from verified features.
    """

    needs_target_hidden = True

    def __init__(self, draft: torch.nn.Module):
        self.draft = draft
        self.device = next(draft.parameters()).device
        self.target_layers = tuple(getattr(draft, "feature_layers", ()))  # fused-feature drafts read these

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        hidden = self.draft.config.hidden_size
        self.ids, self.round_start = list(prompt_ids), len(prompt_ids)
        self.feats = torch.empty(len(prompt_ids) + 4096, hidden, dtype=next(self.draft.parameters()).dtype,
                                 device=self.device)  # fmt: skip
        self.n_feats = 0
        if prefill is not None and prefill.hidden.shape[0]:
            self._set_feats(0, self._target_features(prefill))
        self.cache = DynamicCache(config=self.draft.config)
        self.cached = 0  # pairs in the cache (positions 1..cached)

    def _target_features(self, out: LMOutput, n: int | None = None) -> torch.Tensor:
        """The draft's input features for the first ``n`` positions of a target output."""
        layer_hidden = out.layer_hidden[:n] if out.layer_hidden is not None else None
        with torch.inference_mode():
            return self.draft.target_features(out.hidden[:n], layer_hidden).to(self.feats.dtype)

    def _set_feats(self, start: int, values: torch.Tensor) -> None:
        end = start + values.shape[0]
        if end > self.feats.shape[0]:
            grown = torch.empty(2 * end, self.feats.shape[1], dtype=self.feats.dtype, device=self.device)
            grown[: self.n_feats] = self.feats[: self.n_feats]
            self.feats = grown
        self.feats[start:end] = values
        self.n_feats = end

    @torch.inference_mode()
    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        tokens, qs, token_probs, hidden, logits = [], [], [], [], []
        for _ in range(n):
            length = len(self.ids)
            first = self.cached + 1  # first position whose pair is not cached yet
            if first > length - 1 or self.n_feats < length - 1:
                break  # nothing to condition on (a one-token prompt): draft nothing this round
            ids = torch.tensor(self.ids[first:length], device=self.device)[None]  # [1, m]
            feats = self.feats[first - 1 : length - 1][None]  # [1, m, H]
            out = self.draft(feats, ids, past_key_values=self.cache)[0]  # [m, H]
            self.cached = length - 1
            feature = out[-1]  # predicted feature of position length − 1
            row = self.draft.logits(feature).float()  # [V]
            token, q, prob = draw(row, sampling, generator)
            self._set_feats(length - 1, feature[None])
            self.ids.append(token)
            tokens.append(token), qs.append(q), token_probs.append(prob), hidden.append(feature)
            logits.append(row)
        return _chunk(tokens, qs, token_probs, hidden, logits)

    def commit(self, accepted: int, next_token: int, verified: LMOutput) -> None:
        start = self.round_start - 1  # position of the round's last verified token
        valid_pairs = start  # pairs 1..start were built from verified features only
        self._set_feats(start, self._target_features(verified, accepted + 1))
        self.ids = self.ids[: self.round_start + accepted] + [next_token]
        if self.cached > valid_pairs:
            self.cache.crop(valid_pairs - self.cached)  # negative: number of pairs to drop
            self.cached = valid_pairs
        self.round_start = len(self.ids)


def make_drafter(pair, spec: str = "default") -> Drafter:
    """The drafter for a method: the pair's default draft network, or a block drafter (``block:LOSS``)."""
    if spec.startswith("block"):
        from spec_core.block_drafter import make_block_drafter  # added with the block-drafter issue

        return make_block_drafter(pair, spec)
    if pair.draft is None:
        from spec_core.errors import SpecScopeError

        raise SpecScopeError(f"the pair {pair.name!r} has no draft model; only 'ar' runs on it")
    if pair.draft_design == "feature":
        return FeatureDrafter(pair.draft)
    return StandaloneDrafter(pair.draft)
