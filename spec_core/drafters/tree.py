"""Token trees: draft several candidates per position and verify them all in one target forward.

EAGLE-2 (Li et al., "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees", arXiv 2406.16858):
a node's value is the product of the draft's probabilities along its path. Depth by depth, the ``topk`` most
valuable nodes of the last depth are expanded in ONE batched draft forward (each attends to the verified text
and to its own ancestors only: a 4D tree mask), each giving its ``topk`` most likely children; after the last
depth the ``nodes`` most valuable nodes overall are kept. A node's ancestors are at least as valuable as the node
itself, so the kept set is a tree (ties are broken towards shallower nodes).

The target then runs ``[pending, node_1..node_N]`` in one forward with the same kind of mask and per-node
positions (prefix length + depth); verification walks down from the pending token (:mod:`spec_core.verifiers.tree`).

Nodes are numbered in breadth-first order, so a parent always comes before its children; ``parents[i] = -1``
marks a child of the root (the pending token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.standalone import StandaloneDrafter
from spec_core.errors import SpecScopeError


@dataclass(frozen=True)
class TreeShape:
    """How large a tree a round drafts (method ``tree:nodes=N,depth=D,topk=K``)."""

    # defaults tuned on the training prompts (`python -m spec_core analyze trees`, docs/RESULTS.md "Token trees"): the best
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


@dataclass(frozen=True)
class DraftTree:
    """One round's tree, ``N`` nodes in breadth-first order."""

    tokens: torch.Tensor  # [N] long
    parents: torch.Tensor  # [N] long: parent node index, −1 for a child of the root (the pending token)
    depths: torch.Tensor  # [N] long: 1 for a child of the root
    draft_probs: torch.Tensor  # [N] the draft's probability of the node's token given its parent (temperature 1)
    values: torch.Tensor  # [N] product of draft_probs along the path (EAGLE-2's ranking)

    @property
    def size(self) -> int:
        return int(self.tokens.shape[0])

    def children(self, node: int) -> list[int]:
        """Children of ``node`` (−1 = the root), most valuable first."""
        kids = (self.parents == node).nonzero().flatten()
        return kids[self.values[kids].argsort(descending=True)].tolist()

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node``."""
        path = []
        while node >= 0:
            path.append(node)
            node = int(self.parents[node])
        return path[::-1]


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


def attention_mask(visible: torch.Tensor, prefix_len: int, model, device: torch.device) -> torch.Tensor:
    """A 4D mask ``[1, 1, Q, prefix_len + Q]`` for ``Q`` new positions that all see the cached prefix and, among
    themselves, what ``visible`` ``[Q, Q]`` allows; in the format the model's attention implementation takes
    (bool for SDPA, additive float for eager)."""
    q = visible.shape[0]
    full = torch.cat([torch.ones(q, prefix_len, dtype=torch.bool), visible], dim=1)[None, None]  # [1, 1, Q, P + Q]
    if getattr(model.config, "_attn_implementation", "sdpa") == "eager":
        dtype = next(model.parameters()).dtype
        return torch.zeros(full.shape, dtype=dtype, device=device).masked_fill(~full.to(device), torch.finfo(dtype).min)
    return full.to(device)


def verification_inputs(tree: DraftTree, pending: int, prefix_len: int):
    """Tokens ``[N + 1]``, positions ``[N + 1]`` and the visibility ``[N + 1, N + 1]`` of the target's tree pass:
    the pending token first (it sees itself), then every node (it sees the pending token and its ancestors)."""
    n = tree.size
    tokens = torch.cat([torch.tensor([pending]), tree.tokens])
    positions = prefix_len + torch.cat([torch.zeros(1, dtype=torch.long), tree.depths])
    visible = torch.zeros(n + 1, n + 1, dtype=torch.bool)
    visible[:, 0] = True
    visible[1:, 1:] = ancestor_matrix(tree.parents)
    return tokens, positions, visible


class TreeBuilder:
    """EAGLE-2's level-by-level growth, shared by the drafters: the nodes so far (old numbering), their log
    values, and the breadth-first renumbering of the ``nodes`` most valuable ones at the end."""

    def __init__(self, root_logq: torch.Tensor, topk: int):
        top = root_logq.topk(topk)
        self.tokens, self.parents, self.depths = top.indices.tolist(), [-1] * topk, [1] * topk
        self.logv = top.values.tolist()  # Σ log q along the path
        self.logp = top.values.tolist()  # log q of the node's token given its parent
        self.frontier = list(range(topk))  # the last level's nodes
        self.expanded: list[int] = []  # nodes whose draft states are cached, in cache order
        self.kept: list[int] = []  # after :meth:`tree`: old index of each kept node, in its new order

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

    def grow(self, selected: list[int], child_logq: torch.Tensor, depth: int, topk: int) -> list[int]:
        """Add the ``topk`` most likely children of each selected node (``child_logq`` ``[m, V]``); returns, per
        new node, the row of ``selected`` it came from."""
        self.expanded += selected
        kids = child_logq.topk(topk, dim=-1)  # [m, K]
        rows, self.frontier = [], []
        for row, node in enumerate(selected):
            for lq, tok in zip(kids.values[row].tolist(), kids.indices[row].tolist()):
                self.frontier.append(len(self.tokens))
                self.tokens.append(tok), self.parents.append(node), self.depths.append(depth)
                self.logv.append(self.logv[node] + lq), self.logp.append(lq), rows.append(row)
        return rows

    def ancestors(self, node: int) -> list[int]:
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out

    def tree(self, nodes: int) -> DraftTree:
        """The ``nodes`` most valuable nodes (ancestors first on ties, plus any missing ancestor: only possible on
        exact ties), renumbered breadth-first."""
        order = sorted(range(len(self.tokens)), key=lambda i: (-self.logv[i], self.depths[i]))[:nodes]
        closed = set(order)
        for n in order:
            closed.update(self.ancestors(n))
        self.kept = sorted(closed, key=lambda i: (self.depths[i], -self.logv[i]))
        index = {old: new for new, old in enumerate(self.kept)}
        return DraftTree(
            tokens=torch.tensor([self.tokens[i] for i in self.kept]),
            parents=torch.tensor([index[self.parents[i]] if self.parents[i] >= 0 else -1 for i in self.kept]),
            depths=torch.tensor([self.depths[i] for i in self.kept]),
            draft_probs=torch.tensor([self.logp[i] for i in self.kept]).exp(),
            values=torch.tensor([self.logv[i] for i in self.kept]).exp(),
        )


class FeatureTreeDrafter(FeatureDrafter):
    """EAGLE-2's dynamic tree on the EAGLE-style feature draft (:class:`~spec_core.drafters.feature.FeatureDrafter`).

    Inside a round the draft's cache grows by the pairs of the expanded nodes (each masked to its ancestors); the
    commit crops it back to the pairs built from verified features, exactly as for chains.
    """

    @torch.inference_mode()
    def propose_tree(self, shape: TreeShape) -> DraftTree | None:
        """Draft a tree for the current round; ``None`` when there is nothing to condition on (one-token prompt)."""
        length = len(self.ids)
        first = self.cached + 1
        if first > length - 1 or self.n_feats < length - 1:
            return None
        # 1. the root: the chain pairs not cached yet, ending with the pending token's pair
        ids = torch.tensor(self.ids[first:length], device=self.device)[None]  # [1, m]
        out = self.draft(self.feats[first - 1 : length - 1][None], ids, past_key_values=self.cache)[0]  # [m, H]
        self.cached = length - 1
        chain = self.cache.get_seq_length()  # cached pairs: every later pair is a tree node
        grower = TreeBuilder(torch.log_softmax(self.draft.logits(out[-1:]).float(), -1)[0], shape.topk)
        node_feature = [out[-1]] * shape.topk  # the input feature of each node's pair: its parent's feature
        for depth in range(2, shape.depth + 1):
            # 2. expand the most valuable nodes of the last level in one batched forward
            selected = grower.select(shape.topk)
            mask = attention_mask(grower.visibility(selected), chain, self.draft.body, self.device)
            positions = torch.full((1, len(selected)), chain + depth - 2, device=self.device)  # level d − 1 pairs
            feats = torch.stack([node_feature[i] for i in selected])[None]  # [1, m, H]
            node_ids = torch.tensor([[grower.tokens[i] for i in selected]], device=self.device)  # [1, m]
            new = self.draft(feats, node_ids, past_key_values=self.cache, attention_mask=mask,
                             position_ids=positions)[0]  # fmt: skip  # [m, H]
            rows = grower.grow(selected, torch.log_softmax(self.draft.logits(new).float(), -1), depth, shape.topk)
            node_feature += [new[row] for row in rows]
        # 3. keep the most valuable nodes, renumbered breadth-first
        return grower.tree(shape.nodes)

    def commit_path(self, path: list[int], path_tokens: list[int], next_token: int, verified) -> None:
        """After verification: the accepted path (node indices) and its tokens, the target's next token, and the
        target's output rows at ``[pending, path...]``. The draft cache keeps only pairs built from verified
        features."""
        self.ids = self.ids[: self.round_start] + list(path_tokens)
        actual = self.cache.get_seq_length()
        self.cached = actual  # FeatureDrafter.commit crops everything past the verified pairs
        self.commit(len(path_tokens), next_token, verified)


class StandaloneTreeDrafter(StandaloneDrafter):
    """EAGLE-2's dynamic tree on a standalone draft LM (:class:`~spec_core.drafters.standalone.StandaloneDrafter`).

    Each level's selected nodes run in one batched forward of the draft over its own KV cache, masked to their
    ancestors, at the positions their depth gives. After verification the cache is compacted with a gather to the
    verified text plus the accepted path's nodes that were expanded (their keys and values were computed with
    exactly the accepted prefix in view), so the next round feeds only what is left.
    """

    @torch.inference_mode()
    def propose_tree(self, shape: TreeShape) -> DraftTree | None:
        """Draft a tree for the current round (the standalone draft can always condition on the text)."""
        out = self.lm.forward(torch.tensor(self.ids[self.lm.length :]))  # the 1–2 verified tokens not yet cached
        self.chain = self.lm.length  # every later cached position is a tree node
        self.grower = grower = TreeBuilder(torch.log_softmax(out.logits[-1].float(), -1), shape.topk)
        for depth in range(2, shape.depth + 1):
            selected = grower.select(shape.topk)
            mask = attention_mask(grower.visibility(selected), self.chain, self.lm.model, self.lm.device)
            positions = torch.full((len(selected),), self.chain + depth - 2)  # nodes of level d − 1
            new = self.lm.forward(torch.tensor([grower.tokens[i] for i in selected]), positions=positions, mask=mask)
            grower.grow(selected, torch.log_softmax(new.logits.float(), -1), depth, shape.topk)
        return grower.tree(shape.nodes)

    def commit_path(self, path: list[int], path_tokens: list[int], next_token: int, verified) -> None:
        """Keep the verified text and the accepted path's expanded nodes (a gather); the rest is fed next round."""
        cached = {node: self.chain + k for k, node in enumerate(self.grower.expanded)}
        kept_path = []
        for node in (self.grower.kept[n] for n in path):  # old numbering; the expanded ones form a prefix
            if node not in cached:
                break
            kept_path.append(cached[node])
        self.lm.gather(torch.cat([torch.arange(self.chain), torch.tensor(kept_path, dtype=torch.long)]))
        self.ids = self.ids[: self.round_start] + list(path_tokens) + [next_token]
        self.round_start = len(self.ids)


def make_tree_drafter(pair) -> FeatureTreeDrafter | StandaloneTreeDrafter:
    """The tree drafter of a pair: EAGLE-2's dynamic tree on the feature draft, or on a standalone draft LM."""
    if pair.draft is not None and pair.draft_design == "feature":
        return FeatureTreeDrafter(pair.draft)
    if pair.draft is not None and pair.draft_design == "standalone":
        return StandaloneTreeDrafter(pair.draft)
    raise SpecScopeError(
        f"tree drafting needs a feature or a standalone draft; the pair {pair.name!r} has a {pair.draft_design!r} draft"
    )
