"""EAGLE-style drafting (Li et al., arXiv 2401.15077) on the target's features; network in :mod:`.networks`.

A trimmed head (the draft's 8,192 most frequent tokens) cannot propose a passage's rare words, its names and
numbers, which are exactly what a summary, an answer from a document or a code edit copies. So for each generation
the head is widened by the text's own tokens (the prompt's, then each verified token's) that it lacks, with their
rows of the target's head, as EAGLE-3's draft-to-target map widens a small head; the chat template's special
tokens are never added. The draft's q is over the widened head, so verification stays exact.

A draft trained to copy (its card's ``copy``) also moves part of q onto the token a prompt lookup would copy, by
its gate's say (:mod:`.copying`, a pointer-generator); q stays the distribution each token is drawn from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import torch

from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, chunk_of, draw
from spec_core.drafters.copying import Pointer, draw_copying
from spec_core.model.cached_lm import LMOutput, roomy_cache

if TYPE_CHECKING:
    from spec_core.model.draft_networks import FeatureDraft


class FeatureDrafter:
    """EAGLE-style drafting: pair j = (feature of position j − 1, token j) → predicted feature of position j.

    ``feats[i]`` is the feature of position i: the target's (verified) or the draft's own (while drafting).
    The draft cache holds pairs for positions 1..``cached``; a pair is valid only while its input feature is
    the target's, so ``commit`` crops the cache back to the pairs built from verified features.
    """

    needs_target_hidden = True

    def __init__(self, draft: FeatureDraft, special_ids: Iterable[int] = (), widen: bool = True, copy: bool = True):
        self.draft = draft
        self.device = next(draft.parameters()).device
        self.target_layers = tuple(getattr(draft, "feature_layers", ()))  # fused-feature drafts read these
        self.special_ids = tuple(int(i) for i in special_ids)  # never added to the head (template markers)
        self.widen = widen and bool(draft.vocab_subset.numel())  # a full head needs no widening
        self.extra: tuple[torch.Tensor, torch.Tensor] | None = None  # (ids, rows) the text adds to the head
        gate = getattr(draft, "copy_gate", None)
        self.pointer = Pointer(frozenset(self.special_ids)) if copy and gate is not None else None
        if self.pointer is not None:
            self.in_head = torch.zeros(draft.vocab_size, dtype=torch.bool, device=self.device)
            self.in_head[draft.vocab_subset.to(self.device) if draft.vocab_subset.numel() else slice(None)] = True

    def _widen(self, tokens: Sequence[int]) -> None:
        """Add the tokens of ``tokens`` that the head cannot propose yet (and are not special) to this
        generation's head, with their rows of the target's head."""
        if not self.widen or not tokens:
            return
        ids = torch.tensor(sorted(set(tokens)), dtype=torch.long, device=self.device)
        ids = ids[(ids >= 0) & (ids < self.covered.numel())]
        new = ids[~self.covered[ids]]
        if not new.numel():
            return
        self.covered[new] = True
        rows = self.draft.rows_of(new)
        if self.extra is None:
            self.extra = (new, rows)
        else:
            self.extra = (torch.cat([self.extra[0], new]), torch.cat([self.extra[1], rows]))

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        hidden = self.draft.config.hidden_size
        self.ids, self.round_start = list(prompt_ids), len(prompt_ids)
        self.feats = torch.empty(
            len(prompt_ids) + 4096, hidden, dtype=next(self.draft.parameters()).dtype, device=self.device
        )
        self.n_feats = 0
        if prefill is not None:
            assert prefill.hidden is not None  # needs_target_hidden
            if prefill.hidden.shape[0]:
                self._set_feats(0, self._target_features(prefill))
        self.cache = roomy_cache(self.draft.config)
        self.cached = 0  # pairs in the cache (positions 1..cached)
        self.extra = None
        if self.widen:
            self.covered = torch.zeros(self.draft.vocab_size, dtype=torch.bool, device=self.device)
            self.covered[self.draft.vocab_subset.to(self.device)] = True
            special = torch.tensor(self.special_ids, dtype=torch.long, device=self.device)
            self.covered[special[(special >= 0) & (special < self.covered.numel())]] = True
            self._widen(prompt_ids)
        if self.pointer is not None:
            self.pointer.reset(prompt_ids)

    def _target_features(self, out: LMOutput, n: int | None = None) -> torch.Tensor:
        """The draft's input features for the first ``n`` positions of a target output."""
        layer_hidden = out.layer_hidden[:n] if out.layer_hidden is not None else None
        assert out.hidden is not None  # needs_target_hidden
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
        tokens, qs, token_probs, hidden, logits, offers = [], [], [], [], [], []
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
            row = self.draft.logits(feature, self.extra).float()  # [V]
            if self.pointer is not None:
                token, q, prob, row, offer = self._draw_copying(row, feature, sampling, generator)
                self.pointer.extend([token])
                offers.append(offer)
            else:
                token, q, prob = draw(row, sampling, generator)
            self._set_feats(length - 1, feature[None])
            self.ids.append(token)
            tokens.append(token)
            qs.append(q)
            token_probs.append(prob)
            hidden.append(feature)
            logits.append(row)
        return chunk_of(tokens, qs, token_probs, hidden, logits, offers if self.pointer is not None else None)

    def _draw_copying(self, row: torch.Tensor, feature: torch.Tensor, sampling: SamplingConfig, generator):
        """:func:`~.copying.draw_copying` with this draft's gate and pointer."""
        assert self.pointer is not None and self.draft.copy_gate is not None  # a pointer only for a gated draft
        return draw_copying(self.draft.copy_gate, self.pointer, row, feature, self.in_head, sampling, generator)

    def follow(self, tokens: Sequence[int]) -> None:
        """This round's drafts came from elsewhere (a lookup, :mod:`.lookup`): take them as drafted here, so that
        :meth:`commit` keeps what the target accepts (their states come from the target's pass then)."""
        self.ids += tokens
        if self.pointer is not None:
            self.pointer.extend(tokens)

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        start = self.round_start - 1  # position of the round's last verified token
        valid_pairs = start  # pairs 1..start were built from verified features only
        self._set_feats(start, self._target_features(verified, accepted + 1))
        self.ids = self.ids[: self.round_start + accepted] + [next_token]
        if self.pointer is not None:  # the round's drafts leave the pointer's text; the verified ones join it
            self.pointer.truncate(self.round_start)
            self.pointer.extend(self.ids[self.round_start :])
        self._widen(self.ids[self.round_start :])  # the verified tokens: the text's own words join the head
        if self.cached > valid_pairs:
            self.cache.crop(valid_pairs - self.cached)  # negative: number of pairs to drop
            self.cached = valid_pairs
        self.round_start = len(self.ids)
