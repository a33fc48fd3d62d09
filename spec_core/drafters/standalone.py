"""A causal LM drafting token by token with its own KV cache (the classic draft model, Leviathan et al. 2023)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, chunk_of, draw
from spec_core.model.cached_lm import CachedLM, LMOutput


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
            assert out.hidden is not None  # the draft's CachedLM keeps hidden states
            self.ids.append(token)
            tokens.append(token)
            qs.append(q)
            token_probs.append(prob)
            hidden.append(out.hidden[-1])
            logits.append(out.logits[-1])
        return chunk_of(tokens, qs, token_probs, hidden, logits)

    def follow(self, tokens: Sequence[int]) -> None:
        """This round's drafts came from elsewhere (a lookup, :mod:`.lookup`): take them as drafted here, so that
        :meth:`commit` keeps what the target accepts (their states come from the target's pass then)."""
        self.ids += tokens

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        self.ids = self.ids[: self.round_start + accepted] + [next_token]
        self.lm.crop(min(self.lm.length, len(self.ids) - 1))
        self.round_start = len(self.ids)
