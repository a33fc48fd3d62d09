"""Token trees: draft several candidates per position and verify them all in one target forward.

EAGLE-2 (Li et al., "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees", arXiv 2406.16858;
docs/ALGORITHMS.md §4): a node's value is the product of the draft's probabilities along its path. Depth by depth,
the ``topk`` most valuable nodes of the last depth are expanded in ONE batched draft forward (each attends to the
verified text and to its own ancestors only: a 4D tree mask), each giving its ``topk`` most likely children; after
the last depth the ``nodes`` most valuable nodes overall are kept. A node's ancestors are at least as valuable as
the node itself, so the kept set is a tree (ties are broken towards shallower nodes).

A tree drafter is a drafter like any other (:mod:`.base`): ``propose(n, ...)`` returns, once a round, the whole
tree (at most ``n`` levels deep) as one :class:`~.base.DraftChunk` whose ``parents`` give its shape, and
``commit(..., path)`` keeps the accepted path. The engine runs ``[pending, node_1..node_N]`` through the target in
one forward with the same kind of mask and per-node positions (prefix length + depth,
:meth:`~.base.RoundDraft.target_inputs`); the lossless verifier walks down from the pending token
(:mod:`spec_core.verifiers.tree`).

Nodes are numbered in breadth-first order, so a parent always comes before its children, and siblings come most
valuable first; ``parents[i] = -1`` marks a child of the root (the pending token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, ancestor_matrix
from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.standalone import StandaloneDrafter
from spec_core.model.cached_lm import LMOutput, attention_mask

if TYPE_CHECKING:
    from spec_core.model.draft_networks import FeatureDraft
    from spec_core.model.models import ModelPair

__all__ = [
    "TreeShape",
    "TreeBuilder",
    "FeatureTreeDrafter",
    "StandaloneTreeDrafter",
    "make_tree_drafter",
    "ancestor_matrix",
    "attention_mask",
]


@dataclass(frozen=True)
class TreeShape:
    """How large a tree a round drafts (method ``tree:nodes=N,depth=D,topk=K``)."""

    # defaults tuned on the training prompts (`python -m spec_core analyze trees`, docs/LOG.md "Token trees"): the best
    # speedup where a pass costs one step (a GPU at these sizes) among trees of at most 32 nodes
    nodes: int = 32  # N: nodes kept for verification (the target verifies N + 1 tokens)
    depth: int = 4  # D: deepest level drafted
    topk: int = 8  # K: children per expanded node, and nodes expanded per level

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 128:
            raise SpecScopeError(f"tree: nodes must be in [1, 128], got {self.nodes}")
        if not 1 <= self.depth <= 16:
            raise SpecScopeError(f"tree: depth must be in [1, 16], got {self.depth}")
        if not 1 <= self.topk <= 16:
            raise SpecScopeError(f"tree: topk must be in [1, 16], got {self.topk}")

    @classmethod
    def parse(cls, arg: str | None) -> TreeShape:
        """``"nodes=32,depth=4,topk=8"`` (any subset, any order) → a shape; ``None`` → the defaults."""
        values: dict[str, int] = {}
        for item in (arg or "").split(","):
            if not item.strip():
                continue
            key, _, text = item.partition("=")
            key = key.strip()
            if key not in ("nodes", "depth", "topk"):
                raise SpecScopeError(f"tree: unknown setting {key!r}; use tree:nodes=N,depth=D,topk=K")
            try:
                values[key] = int(text)
            except ValueError as err:
                raise SpecScopeError(f"tree: {key} needs an integer, got {text!r}") from err
        return cls(**values)


class TreeBuilder:
    """EAGLE-2's level-by-level growth, shared by the drafters: the nodes so far (old numbering), their log
    values, the draft output each node's token was read off, and the breadth-first renumbering of the ``nodes``
    most valuable ones at the end."""

    def __init__(self, root_logits: torch.Tensor, root_hidden: torch.Tensor, topk: int):
        top = torch.log_softmax(root_logits.float(), -1).topk(topk)
        self.tokens, self.parents, self.depths = top.indices.tolist(), [-1] * topk, [1] * topk
        self.logv = top.values.tolist()  # Σ log q along the path
        self.logp = top.values.tolist()  # log q of the node's token given its parent
        self.read_off = [(root_logits, root_hidden)] * topk  # the draft's raw logits [V] and hidden state [H] there
        self.frontier = list(range(topk))  # the last level's nodes
        self.expanded: list[int] = []  # nodes whose draft states are cached, in cache order
        self.kept: list[int] = []  # after :meth:`chunk`: old index of each kept node, in its new order
        self.levels = 1  # draft forwards so far: the root's

    def select(self, topk: int) -> list[int]:
        """The last level's ``topk`` most valuable nodes: the next batch to expand."""
        return sorted(self.frontier, key=lambda i: -self.logv[i])[:topk]

    def visibility(self, selected: list[int]) -> torch.Tensor:
        """``[m, E + m]``: which already expanded nodes (cache order) and which selected ones each selected node
        sees — its own ancestors and itself (≤ K rows × ≤ D ancestors: structure, not math)."""
        m, e = len(selected), len(self.expanded)
        visible = torch.zeros(m, e + m, dtype=torch.bool)
        for row, node in enumerate(selected):
            ancestors = set(self.ancestors(node))
            visible[row, :e] = torch.tensor([x in ancestors for x in self.expanded], dtype=torch.bool)
            visible[row, e + row] = True
        return visible

    def grow(
        self, selected: list[int], child_logits: torch.Tensor, child_hidden: torch.Tensor, depth: int, topk: int
    ) -> None:
        """Add the ``topk`` most likely children of each selected node (the draft's raw ``child_logits`` ``[m, V]``
        and hidden states ``[m, H]`` after each)."""
        self.expanded += selected
        self.levels += 1
        kids = torch.log_softmax(child_logits.float(), -1).topk(topk, dim=-1)  # [m, K]
        self.frontier = []
        for row, node in enumerate(selected):
            for lq, tok in zip(kids.values[row].tolist(), kids.indices[row].tolist()):
                self.frontier.append(len(self.tokens))
                self.tokens.append(tok)
                self.parents.append(node)
                self.depths.append(depth)
                self.logv.append(self.logv[node] + lq)
                self.logp.append(lq)
                self.read_off.append((child_logits[row], child_hidden[row]))

    def ancestors(self, node: int) -> list[int]:
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out

    def chunk(self, nodes: int) -> DraftChunk:
        """The ``nodes`` most valuable nodes (ancestors first on ties, plus any missing ancestor: only possible on
        exact ties), renumbered breadth-first with siblings most valuable first, as one chunk."""
        order = sorted(range(len(self.tokens)), key=lambda i: (-self.logv[i], self.depths[i]))[:nodes]
        closed = set(order)
        for n in order:
            closed.update(self.ancestors(n))
        self.kept = sorted(closed, key=lambda i: (self.depths[i], -self.logv[i]))
        index = {old: new for new, old in enumerate(self.kept)}
        return DraftChunk(
            tokens=[self.tokens[i] for i in self.kept],
            probs=None,  # the candidates are the draft's top-k, deterministic: nothing was sampled
            token_probs=torch.tensor([self.logp[i] for i in self.kept]).exp().tolist(),
            hidden=[self.read_off[i][1] for i in self.kept],
            logits=[self.read_off[i][0] for i in self.kept],
            forwards=self.levels,
            parents=[index[self.parents[i]] if self.parents[i] >= 0 else -1 for i in self.kept],
        )


class FeatureTreeDrafter(FeatureDrafter):
    """EAGLE-2's dynamic tree on the EAGLE-style feature draft (:class:`~spec_core.drafters.feature.FeatureDrafter`).

    Inside a round the draft's cache grows by the pairs of the expanded nodes (each masked to its ancestors); the
    commit crops it back to the pairs built from verified features, exactly as for chains.
    """

    def __init__(self, draft: FeatureDraft, shape: TreeShape):
        super().__init__(draft, widen=False, copy=False)  # the tree drafts over the trimmed head, no copy
        self.shape, self.block_len = shape, shape.depth  # sets its own length: D levels a round
        self.round_tokens: list[int] | None = None  # this round's nodes, once proposed

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        super().reset(prompt_ids, prefill)
        self.round_tokens = None

    @torch.inference_mode()
    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        """This round's tree, at most ``n`` levels deep (the candidates are the draft's top-k at any temperature);
        nothing when it was drafted already or when there is nothing to condition on (a one-token prompt)."""
        length = len(self.ids)
        first = self.cached + 1
        if self.round_tokens is not None or first > length - 1 or self.n_feats < length - 1:
            return DraftChunk([], None, [], [], [], 0)
        # 1. the root: the chain pairs not cached yet, ending with the pending token's pair
        ids = torch.tensor(self.ids[first:length], device=self.device)[None]  # [1, m]
        out = self.draft(self.feats[first - 1 : length - 1][None], ids, past_key_values=self.cache)[0]  # [m, H]
        self.cached = length - 1
        chain = self.cache.get_seq_length()  # cached pairs: every later pair is a tree node
        grower = TreeBuilder(self.draft.logits(out[-1:]).float()[0], out[-1], self.shape.topk)
        for depth in range(2, min(n, self.shape.depth) + 1):
            # 2. expand the most valuable nodes of the last level in one batched forward; a node's pair takes the
            #    feature its parent's pass predicted (the hidden state its token was read off)
            selected = grower.select(self.shape.topk)
            mask = attention_mask(grower.visibility(selected), chain, self.draft.body, self.device)
            positions = torch.full((1, len(selected)), chain + depth - 2, device=self.device)  # level d − 1 pairs
            feats = torch.stack([grower.read_off[i][1] for i in selected])[None]  # [1, m, H]
            node_ids = torch.tensor([[grower.tokens[i] for i in selected]], device=self.device)  # [1, m]
            new = self.draft(feats, node_ids, past_key_values=self.cache, attention_mask=mask, position_ids=positions)[
                0
            ]  # [m, H]
            grower.grow(selected, self.draft.logits(new).float(), new, depth, self.shape.topk)
        # 3. keep the most valuable nodes, renumbered breadth-first
        chunk = grower.chunk(self.shape.nodes)
        self.round_tokens = chunk.tokens
        return chunk

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        """After verification: the accepted path (node indices), the target's next token, and the target's output
        rows at ``[pending, path...]``. The draft cache keeps only pairs built from verified features."""
        if self.round_tokens is not None:
            self.ids = self.ids[: self.round_start] + [self.round_tokens[i] for i in path or ()]
            self.cached = self.cache.get_seq_length()  # FeatureDrafter.commit crops past the verified pairs
            self.round_tokens = None
        super().commit(accepted, next_token, verified)


class StandaloneTreeDrafter(StandaloneDrafter):
    """EAGLE-2's dynamic tree on a standalone draft LM (:class:`~spec_core.drafters.standalone.StandaloneDrafter`).

    Each level's selected nodes run in one batched forward of the draft over its own KV cache, masked to their
    ancestors, at the positions their depth gives. After verification the cache is compacted with a gather to the
    verified text plus the accepted path's nodes that were expanded (their keys and values were computed with
    exactly the accepted prefix in view), so the next round feeds only what is left.
    """

    def __init__(self, model: torch.nn.Module, shape: TreeShape):
        super().__init__(model)
        self.shape, self.block_len = shape, shape.depth  # sets its own length: D levels a round
        self.grower: TreeBuilder | None = None  # this round's tree, once proposed

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        super().reset(prompt_ids, prefill)
        self.grower = None

    @torch.inference_mode()
    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        """This round's tree, at most ``n`` levels deep; nothing when it was drafted already."""
        if self.grower is not None:
            return DraftChunk([], None, [], [], [], 0)
        out = self.lm.forward(torch.tensor(self.ids[self.lm.length :]))  # the 1–2 verified tokens not yet cached
        self.chain = self.lm.length  # every later cached position is a tree node
        assert out.hidden is not None  # the draft's CachedLM keeps hidden states
        self.grower = grower = TreeBuilder(out.logits[-1], out.hidden[-1], self.shape.topk)
        for depth in range(2, min(n, self.shape.depth) + 1):
            selected = grower.select(self.shape.topk)
            mask = attention_mask(grower.visibility(selected), self.chain, self.lm.model, self.lm.device)
            positions = torch.full((len(selected),), self.chain + depth - 2)  # nodes of level d − 1
            new = self.lm.forward(torch.tensor([grower.tokens[i] for i in selected]), positions=positions, mask=mask)
            assert new.hidden is not None
            grower.grow(selected, new.logits, new.hidden, depth, self.shape.topk)
        return grower.chunk(self.shape.nodes)

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        """Keep the verified text and the accepted path's expanded nodes (a gather); the rest is fed next round."""
        if self.grower is None:  # no tree this round (the budget was spent)
            super().commit(accepted, next_token, verified)
            return
        cached = {node: self.chain + k for k, node in enumerate(self.grower.expanded)}
        kept_path = []
        for node in (self.grower.kept[n] for n in path or ()):  # old numbering; the expanded ones form a prefix
            if node not in cached:
                break
            kept_path.append(cached[node])
        self.lm.gather(torch.cat([torch.arange(self.chain), torch.tensor(kept_path, dtype=torch.long)]))
        path_tokens = [self.grower.tokens[self.grower.kept[n]] for n in path or ()]
        self.ids = self.ids[: self.round_start] + path_tokens + [next_token]
        self.round_start = len(self.ids)
        self.grower = None


def make_tree_drafter(pair: ModelPair, shape: TreeShape) -> FeatureTreeDrafter | StandaloneTreeDrafter:
    """The tree drafter of a pair: EAGLE-2's dynamic tree on the feature draft, or on a standalone draft LM."""
    if pair.draft is not None and pair.draft_design == "feature":
        return FeatureTreeDrafter(cast("FeatureDraft", pair.draft), shape)  # the feature design
    if pair.draft is not None and pair.draft_design == "standalone":
        return StandaloneTreeDrafter(pair.draft, shape)
    raise SpecScopeError(
        f"tree drafting needs a feature or a standalone draft; the pair {pair.name!r} has a {pair.draft_design!r} draft"
    )
