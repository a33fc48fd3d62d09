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
from spec_core.errors import SpecScopeError


@dataclass(frozen=True)
class TreeShape:
    """How large a tree a round drafts (method ``tree:nodes=N,depth=D,topk=K``)."""

    nodes: int = 24  # N: nodes kept for verification (the target verifies N + 1 tokens)
    depth: int = 6  # D: deepest level drafted
    topk: int = 4  # K: children per expanded node, and nodes expanded per level

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 128:
            raise SpecScopeError(f"tree: nodes must be in [1, 128], got {self.nodes}")
        if not 1 <= self.depth <= 16:
            raise SpecScopeError(f"tree: depth must be in [1, 16], got {self.depth}")
        if not 1 <= self.topk <= 16:
            raise SpecScopeError(f"tree: topk must be in [1, 16], got {self.topk}")

    @classmethod
    def parse(cls, arg: str | None) -> TreeShape:
        """``"nodes=24,depth=6,topk=4"`` (any subset, any order) → a shape; ``None`` → the defaults."""
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
        logq = torch.log_softmax(self.draft.logits(out[-1:]).float(), -1)[0]  # [V]
        top = logq.topk(shape.topk)
        tokens, parents, depths = top.indices.tolist(), [-1] * shape.topk, [1] * shape.topk
        logv = top.values.tolist()  # log value = Σ log q along the path
        logp = top.values.tolist()
        node_feature = [out[-1]] * shape.topk  # the input feature of each node's pair: its parent's feature
        expanded: list[int] = []  # nodes whose pairs are in the draft cache, in cache order
        frontier = list(range(shape.topk))  # the last level's nodes
        for depth in range(2, shape.depth + 1):
            # 2. expand the most valuable nodes of the last level in one batched forward
            selected = sorted(frontier, key=lambda i: -logv[i])[: shape.topk]
            m = len(selected)
            visible = torch.zeros(m, len(expanded) + m, dtype=torch.bool)  # which cached tree pairs each sees
            for row, node in enumerate(selected):  # ≤ K rows × ≤ D ancestors: structure, not math
                ancestors = set(self._ancestors(node, parents))
                visible[row, : len(expanded)] = torch.tensor([e in ancestors for e in expanded], dtype=torch.bool)
                visible[row, len(expanded) + row] = True
            mask = attention_mask(visible, chain, self.draft.body, self.device)
            positions = torch.full((1, m), chain + depth - 2, device=self.device)  # level d − 1 pairs
            feats = torch.stack([node_feature[i] for i in selected])[None]  # [1, m, H]
            node_ids = torch.tensor([[tokens[i] for i in selected]], device=self.device)  # [1, m]
            new = self.draft(feats, node_ids, past_key_values=self.cache, attention_mask=mask,
                             position_ids=positions)[0]  # fmt: skip  # [m, H]
            expanded += selected
            kids = torch.log_softmax(self.draft.logits(new).float(), -1).topk(shape.topk, dim=-1)  # [m, K]
            frontier = []
            for row, node in enumerate(selected):
                for lq, tok in zip(kids.values[row].tolist(), kids.indices[row].tolist()):
                    frontier.append(len(tokens))
                    tokens.append(tok), parents.append(node), depths.append(depth)
                    logv.append(logv[node] + lq), logp.append(lq), node_feature.append(new[row])
        # 3. keep the most valuable nodes (ancestors first on ties), renumbered breadth-first
        order = sorted(range(len(tokens)), key=lambda i: (-logv[i], depths[i]))[: shape.nodes]
        kept = self._closed(set(order), parents)
        kept = sorted(kept, key=lambda i: (depths[i], -logv[i]))
        index = {old: new for new, old in enumerate(kept)}
        return DraftTree(
            tokens=torch.tensor([tokens[i] for i in kept]),
            parents=torch.tensor([index[parents[i]] if parents[i] >= 0 else -1 for i in kept]),
            depths=torch.tensor([depths[i] for i in kept]),
            draft_probs=torch.tensor([logp[i] for i in kept]).exp(),
            values=torch.tensor([logv[i] for i in kept]).exp(),
        )

    @staticmethod
    def _ancestors(node: int, parents: list[int]) -> list[int]:
        out = []
        while node >= 0:
            out.append(node)
            node = parents[node]
        return out

    @classmethod
    def _closed(cls, nodes: set[int], parents: list[int]) -> set[int]:
        """``nodes`` plus any missing ancestors (only possible on exact ties of value)."""
        closed = set(nodes)
        for n in nodes:
            closed.update(cls._ancestors(n, parents))
        return closed

    def commit_path(self, path_tokens: list[int], next_token: int, verified) -> None:
        """After verification: the accepted path's tokens, the target's next token, and the target's output rows
        at ``[pending, path...]``. The draft cache keeps only pairs built from verified features."""
        self.ids = self.ids[: self.round_start] + list(path_tokens)
        actual = self.cache.get_seq_length()
        self.cached = actual  # FeatureDrafter.commit crops everything past the verified pairs
        self.commit(len(path_tokens), next_token, verified)


def make_tree_drafter(pair) -> FeatureTreeDrafter:
    """The tree drafter of a pair: EAGLE-2's dynamic tree needs the feature draft."""
    if pair.draft is None or pair.draft_design != "feature":
        raise SpecScopeError(
            f"tree drafting runs on an EAGLE-style feature draft; the pair {pair.name!r} has a "
            f"{pair.draft_design!r} draft (use the embedded pair's default draft)"
        )
    return FeatureTreeDrafter(pair.draft)
