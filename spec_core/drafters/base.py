"""The drafter protocol: propose tokens, then roll back to what the target verified.

The engine drives a drafter in three calls:

1. ``reset(prompt_ids, prefill)`` — once, after the target's prefill of ``prompt_ids[:-1]``;
2. ``propose(n, sampling, generator)`` — draft up to ``n`` more tokens along any line (a policy may call it several
   times a round). A chain drafter proposes ``n`` tokens, each following the one before; a tree drafter
   (:mod:`.tree`) proposes, once a round, a tree at most ``n`` levels deep whose ``parents`` say what each
   node follows;
3. ``commit(accepted, next_token, verified, path)`` — after verification: keep the accepted drafts (``path``, their
   indices among the round's drafts: ``0..accepted−1`` for a chain), append the target's token, drop the rest.
   ``verified`` is the target's output at the positions on the accepted path ([pending, the accepted drafts]);
   drafters that read target features (EAGLE-style, block) take them here.

A drafter may also define ``before_round(remaining)``: the engine then tells it, before each round, how many new
tokens the generation may still add (``max_new_tokens`` less what it has written), so that a cost paid once (the
hybrid's network start) is weighed against the rounds left to repay it.

A drafter that sets its own length (a block drafter, a tree drafter, :class:`NoDrafter`) says how many tokens deep
a round goes in ``block_len``; the others are driven by a draft-length policy.

:class:`RoundDraft` collects a round's chunks and lays them out for the target's one forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch

from spec_core.core import rules
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.model.cached_lm import LMOutput

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


@dataclass(frozen=True)
class DraftChunk:
    tokens: list[int]  # [n]
    probs: torch.Tensor | None  # [n, V] q, the distribution each token was drawn from (None when greedy, or when the
    #   tokens are deterministic candidates: a tree's top-k)
    token_probs: list[float]  # [n] the draft's probability of each token (temperature-1 softmax if greedy)
    hidden: list[torch.Tensor]  # n tensors [H]: the draft's last hidden state where each token was read off
    logits: list[torch.Tensor]  # n tensors [V]: the draft's raw logits where each token was read off
    forwards: int  # draft forward passes this chunk took (one per token for a chain, one for a block, D for a tree)
    parents: list[int] | None = None  # [n] a tree: the node each token follows within this chunk (−1: what the
    #   round drafted before it, or the pending token), parents first, siblings most valuable first; None: a chain
    source: str = "model"  # where the tokens came from: "model" (a draft network) or "lookup" (copied from the text)
    estimates: list[float] | None = None  # [n] the drafter's own estimate that each token is kept given the ones
    #   before it were (a lookup draft's match evidence); None: its probability ``token_probs`` stands in
    copy_offers: list[tuple[int, float]] | None = None  # [n] a copying draft's pointer (drafters/copying.py):
    #   (the token it offered, the gate's g), (−1, 0.0) where it offered none; None: a draft without a pointer
    sources: list[str] | None = None  # [n] each token's source where they differ (the hybrid's branched round:
    #   copied tokens beside a network's); None: every token is ``source``


class Drafter(Protocol):
    target_layers: tuple[int, ...]  # target layers whose hidden states `verified.layer_hidden` must carry
    needs_target_hidden: bool  # whether `verified.hidden` (the target's last hidden state) is read

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None: ...

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk: ...

    def commit(
        self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None
    ) -> None: ...  # path: the accepted drafts' indices (None: 0..accepted−1, a chain)


class NoDrafter:
    """Proposes nothing: every round is one token of the target's own (plain decoding, method ``ar``)."""

    prefix: ClassVar[str] = "none"
    named: ClassVar[bool] = False  # implied by the method ``ar``
    drafts_trees: ClassVar[bool] = False
    own_length: ClassVar[bool] = True
    reads_draft_states: ClassVar[bool] = True
    about: ClassVar[str] = "plain decoding, the target alone (the baseline)"
    examples: ClassVar[tuple[str, ...]] = ("ar",)
    drafts: ClassVar[bool] = False  # the target decodes alone: no draft for a verifier or a policy to speak of
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        ("ar", "plain autoregressive decoding: the target alone, one forward pass per token. The baseline."),
    )
    target_layers: tuple[int, ...] = ()
    needs_target_hidden = False
    block_len = 0  # sets its own length: no draft at all

    @classmethod
    def rule(cls, temperature: float) -> str:
        return "Plain decoding: one target forward pass per token, no draft."

    @classmethod
    def parse(cls, arg: str | None) -> None:
        if arg is not None:
            raise SpecScopeError("the empty drafter takes no parameter")

    @classmethod
    def build(cls, params: None = None, pair: ModelPair | None = None) -> NoDrafter:
        return cls()

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        pass

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        return DraftChunk([], None, [], [], [], 0)

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        pass


def ancestor_matrix(parents: torch.Tensor) -> torch.Tensor:
    """``[N, N]`` bool: ``A[i, j]`` when node j is node i or one of its ancestors (parents before children)."""
    n = parents.shape[0]
    a = torch.eye(n, dtype=torch.bool)
    has_parent = parents >= 0
    up = torch.zeros(n, n, dtype=torch.bool)
    up[has_parent.nonzero().flatten(), parents[has_parent]] = True  # one step up
    reach = up.clone()
    while reach.any():  # at most depth − 1 steps: each adds the next ancestor up
        a |= reach
        reach = (reach.float() @ up.float()).bool()
    return a


class RoundDraft:
    """What one round drafted, chunk by chunk: tokens x_1..x_γ with the draft's numbers, and ``parents`` when the
    draft branches (a token tree; None for a chain). Filled by the engine's step 1, read by the policy (through
    :class:`~spec_core.policies.DraftSoFar`), the target's pass, the verifier and the event."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.token_probs: list[float] = []
        self.hidden: list[torch.Tensor] = []  # γ × [H_d]
        self.logits: list[torch.Tensor] = []  # γ × [V]
        self.sampled: list[torch.Tensor] = []  # the chunks' q rows ([n, V] each), when tokens were sampled
        self.parents: list[int] | None = None  # [γ] −1 = the pending token; None: a chain
        self.forwards = 0  # the draft's forward passes
        self.sources: list[str] = []  # [γ] "model" or "lookup"
        self.estimates: list[float] = []  # [γ] the drafter's estimate that each token is kept (given its prefix)
        self.copy_offers: list[tuple[int, float]] = []  # [γ] a copying draft's pointer: (offered token, g)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, chunk: DraftChunk) -> None:
        n = len(self.tokens)
        if chunk.parents is not None or self.parents is not None:  # a tree hangs off the last draft so far
            if self.parents is None:
                self.parents = list(range(-1, n - 1))
            own = chunk.parents if chunk.parents is not None else list(range(-1, len(chunk.tokens) - 1))
            self.parents += [n - 1 if p < 0 else n + p for p in own]
        self.tokens += chunk.tokens
        self.token_probs += chunk.token_probs
        self.sources += chunk.sources if chunk.sources is not None else [chunk.source] * len(chunk.tokens)
        self.estimates += chunk.estimates if chunk.estimates is not None else chunk.token_probs
        self.copy_offers += chunk.copy_offers if chunk.copy_offers is not None else [(-1, 0.0)] * len(chunk.tokens)
        self.hidden += chunk.hidden
        self.logits += chunk.logits
        if chunk.probs is not None:
            self.sampled.append(chunk.probs)
        self.forwards += chunk.forwards

    def depths(self) -> list[int]:
        """[γ] each draft's level: 1 after the pending token."""
        if self.parents is None:
            return list(range(1, len(self.tokens) + 1))
        out: list[int] = []
        for p in self.parents:
            out.append(1 if p < 0 else out[p] + 1)
        return out

    def target_inputs(self, pending: int, prefix_len: int):
        """The target's pass over ``[pending, x_1..x_γ]``: tokens ``[γ + 1]``, then for a tree the positions
        ``[γ + 1]`` (prefix length + depth) and which of these positions each sees ``[γ + 1, γ + 1]`` (the pending
        token and its own ancestors); ``None, None`` for a chain (consecutive positions, causal attention)."""
        tokens = torch.tensor([pending, *self.tokens])
        if self.parents is None:
            return tokens, None, None
        n = len(self.tokens)
        positions = prefix_len + torch.tensor([0, *self.depths()])
        visible = torch.zeros(n + 1, n + 1, dtype=torch.bool)
        visible[:, 0] = True
        visible[1:, 1:] = ancestor_matrix(torch.tensor(self.parents))
        return tokens, positions, visible

    def children(self, node: int) -> list[int]:
        """The drafts that follow ``node`` (−1: the pending token), most valuable first."""
        if self.parents is None:
            return [node + 1] if node + 1 < len(self.tokens) else []
        return [i for i, p in enumerate(self.parents) if p == node]

    def line(self, path: Sequence[int]) -> Sequence[int]:
        """The drafts an event shows as the round's line: a chain's every draft; for a tree the accepted path,
        then the first child rejected at its end (if any)."""
        if self.parents is None:
            return range(len(self.tokens))
        rejected = self.children(path[-1] if path else -1)[:1]
        return [*path, *rejected]


def draw(logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None):
    """Choose a draft token from ``logits`` ``[V]``: (token, q or None, the draft's probability of it)."""
    if sampling.greedy:
        token = int(logits.argmax())
        return token, None, float(torch.softmax(logits.float(), -1)[token])
    q = rules.warp_probs(logits[None], sampling.temperature, sampling.top_k, sampling.top_p)[0]  # [V]
    token = int(rules.sample(q[None], generator)[0])
    return token, q, float(q[token])


def chunk_of(tokens, qs, token_probs, hidden, logits, copy_offers=None) -> DraftChunk:
    """A chain drafted token by token: one draft forward per token."""
    probs = torch.stack(qs) if qs and qs[0] is not None else None
    return DraftChunk(tokens, probs, token_probs, hidden, logits, len(tokens), copy_offers=copy_offers)
