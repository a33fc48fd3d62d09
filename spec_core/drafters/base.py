"""The drafter protocol: propose tokens, then roll back to what the target verified.

The engine drives a drafter in three calls:

1. ``reset(prompt_ids, prefill)`` — once, after the target's prefill of ``prompt_ids[:-1]``;
2. ``propose(n, sampling, generator)`` — draft ``n`` more tokens (a policy may call it several times a round);
3. ``commit(accepted, next_token, verified)`` — after verification: keep the accepted drafts, append the
   target's token, drop the rest. ``verified`` is the target's output at the positions on the accepted path
   ([last token, x_1..x_accepted]); drafters that read target features (EAGLE-style, block) take them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from spec_core import rules
from spec_core.cached_lm import LMOutput
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


def chunk_of(tokens, qs, token_probs, hidden, logits) -> DraftChunk:
    probs = torch.stack(qs) if qs and qs[0] is not None else None
    return DraftChunk(tokens, probs, token_probs, hidden, logits)
