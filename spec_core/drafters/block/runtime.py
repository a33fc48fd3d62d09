"""The runtime block drafter: one forward of a :class:`~.network.BlockDraftModel` drafts a whole block.

A drafter whose card has ``copy`` also copies, as the feature draft does (:mod:`spec_core.drafters.copying`, a
pointer-generator, See, Liu & Manning, arXiv 1704.04368): at each block position the pointer offers what followed
the longest earlier match of the text with the block's drafted tokens so far, and the drafter's trained gate moves
g of that position's q onto it. The block still takes one forward; the pointer is a dictionary lookup a position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, draw
from spec_core.drafters.block.assets import load_block_model
from spec_core.drafters.block.network import BlockDraftModel
from spec_core.drafters.copying import Pointer, draw_copying
from spec_core.model.cached_lm import LMOutput

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair


class BlockDrafter:
    """Drafts one block per round: ``block_len = B − 1`` tokens from one forward of :class:`BlockDraftModel`.

    Per request it keeps, for every context position (all tokens before the pending one), each layer's
    context keys/values; :meth:`commit` appends those of the positions the target just verified, from
    ``verified.layer_hidden``. Nothing of old positions is recomputed.
    """

    needs_target_hidden = False  # reads the target's layer states (``target_layers``) only

    def __init__(self, model: BlockDraftModel, special_ids: Sequence[int] = (), copy: bool = True):
        self.model = model.eval()
        self.target_layers = model.config.target_layers
        self.block_len = model.config.block_size - 1
        self.device = model.fc.weight.device
        self.ids: list[int] = []
        self.ctx_kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.n_ctx = 0
        self.drafted: list[int] = []
        banned = frozenset(int(i) for i in special_ids)  # the chat template's markers are never copied
        self.pointer = Pointer(banned) if copy and model.copy_gate is not None else None
        vocab = model.embed[0].num_embeddings  # it proposes from the target's whole (tied) head
        self.in_head = torch.ones(vocab, dtype=torch.bool)

    @torch.inference_mode()
    def _extend(self, layer_hidden: torch.Tensor) -> None:
        """Append the context K/V of ``layer_hidden`` ``[T, L, H]`` (positions n_ctx..n_ctx+T−1)."""
        new = self.model.context_kv(self.model.project_context(layer_hidden.to(self.device)), self.n_ctx)
        if self.ctx_kv:
            self.ctx_kv = [(torch.cat([k, nk]), torch.cat([v, nv])) for (k, v), (nk, nv) in zip(self.ctx_kv, new)]
        else:
            self.ctx_kv = new
        self.n_ctx += layer_hidden.shape[0]

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        self.ids, self.ctx_kv, self.n_ctx, self.drafted = list(prompt_ids), [], 0, []
        if self.pointer is not None:
            self.pointer.reset(prompt_ids)
        if prefill is not None:
            if prefill.layer_hidden is None:
                raise SpecScopeError("the block drafter needs the target's layer hidden states (CachedLM layers=)")
            self._extend(prefill.layer_hidden)  # positions 0..len−2

    @torch.inference_mode()
    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        n = min(n, self.block_len - len(self.drafted))
        if n <= 0:
            return DraftChunk([], None, [], [], [], 0)
        if not self.ctx_kv:  # a one-token prompt: empty context
            h, d = self.model.config.num_kv_heads, self.model.config.head_dim
            empty = torch.empty(0, h, d, dtype=self.model.fc.weight.dtype, device=self.device)
            self.ctx_kv = [(empty, empty) for _ in self.model.layers]
        anchor_pos = len(self.ids) - 1  # the pending token; the context holds positions 0..anchor_pos−1
        assert self.n_ctx == anchor_pos, (self.n_ctx, anchor_pos)
        kv = [(k[None], v[None]) for k, v in self.ctx_kv]  # add S = 1
        tokens = torch.tensor([[self.ids[-1]]], device=self.device)
        hidden = self.model.block_states(tokens, torch.tensor([[anchor_pos]], device=self.device), kv, None)[0, 0]
        hidden = hidden[1 : n + 1]  # [n, H] block positions 1..n
        logits = self.model.logits(hidden).float()  # [n, V]
        out_tokens, token_probs, rows, offers = [], [], [], []
        qs: list[torch.Tensor | None] = []
        for state, row in zip(hidden, logits):  # each position from its own warped distribution (q: what was sampled)
            if self.pointer is not None:
                assert self.model.copy_gate is not None
                token, q, prob, row, offer = draw_copying(
                    self.model.copy_gate, self.pointer, row, state, self.in_head, sampling, generator
                )
                self.pointer.extend([token])  # the next position's pointer reads the block so far
                offers.append(offer)
            else:
                token, q, prob = draw(row, sampling, generator)
            out_tokens.append(token)
            qs.append(q)
            token_probs.append(prob)
            rows.append(row)
        self.drafted += out_tokens
        probs = torch.stack([q for q in qs if q is not None]) if qs[0] is not None else None
        return DraftChunk(  # one forward: the block
            out_tokens, probs, token_probs, list(hidden), rows, 1, copy_offers=offers if self.pointer else None
        )

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        if self.pointer is not None:  # the round's drafts leave the pointer's text; the verified ones join it
            self.pointer.truncate(len(self.ids))
            self.pointer.extend([*self.drafted[:accepted], next_token])
        self.ids += [*self.drafted[:accepted], next_token]
        self.drafted = []
        if verified.layer_hidden is None:
            raise SpecScopeError("the block drafter needs the target's layer hidden states (CachedLM layers=)")
        self._extend(verified.layer_hidden[: accepted + 1])  # [pending, x_1..x_accepted]


def make_block_drafter(pair: ModelPair, loss: str) -> BlockDrafter:
    """The block drafter trained with ``loss`` (``block:LOSS``) for ``pair`` (loaded once, then cached in
    ``pair.extras``).

    A model already in ``pair.extras["block:LOSS"]`` is used as is (tests and ablations inject one there);
    otherwise the asset ``assets/block/LOSS`` is loaded, which exists for the embedded target only.
    """

    if loss not in BLOCK_LOSSES:
        raise SpecScopeError(f"block drafters: block:{{{','.join(BLOCK_LOSSES)}}}, got 'block:{loss}'")
    spec = f"block:{loss}"

    def load():
        if pair.name != "embedded":
            raise SpecScopeError(
                f"{spec!r} needs a block drafter trained for the target; the shipped ones are for the embedded "
                f"pair only, not {pair.name!r}"
            )
        return load_block_model(pair.parts_target, loss)[0].to(pair.device)

    special = getattr(pair.tokenizer, "all_special_ids", None) or ()  # the template's markers, never copied
    return BlockDrafter(pair.learned("block", loss, load), special)
