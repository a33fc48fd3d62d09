"""Verifying a token tree in one target pass (EAGLE-2, arXiv 2406.16858; SpecInfer, arXiv 2305.09781).

The target's output rows are ``[pending, node_1..node_N]``: row 0 is its distribution after the pending token
(the root), row ``1 + i`` its distribution after node i. Verification walks down from the root:

- **greedy**: move to the child equal to the target's argmax at the current node; stop when none is. The next
  token is that argmax (a *recovered* token when some child was rejected, a *bonus* token at a leaf).
- **sampling, lossless**: the tree's children are the draft's top-k, deterministic given the text, so each
  candidate is a point mass. At a node with target distribution p′ (warped like the chain rule), try the
  children most valuable first: accept child x with probability p′(x); on rejection set p′ ← norm(p′ with x
  removed) and try the next; if all fail, sample the next token from p′ (docs/ALGORITHMS.md §4). The token that
  leaves a node is then distributed exactly as p′ was: the output has the target's distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spec_core import rules
from spec_core.drafters.tree import DraftTree
from spec_core.types import SamplingConfig


@dataclass(frozen=True)
class TreeVerdict:
    path: list[int]  # accepted node indices, root's child first
    next_token: int  # recovered (some child was rejected at the last node) or bonus (a leaf, or no child tried)
    kind: str  # "recovered" or "bonus"
    tried: list[tuple[int, float]]  # (node, its acceptance probability) for every child tried, in order
    target_probs: torch.Tensor | None  # [N] the target's p of each node's token at its parent (display); None when
    # greedy: the walk never needs it, the engine derives it (temperature-1 softmax) when the round is shown


def verify_tree(tree: DraftTree, target_logits: torch.Tensor, sampling: SamplingConfig,
                generator: torch.Generator | None) -> TreeVerdict:  # fmt: skip
    """Walk ``tree`` against ``target_logits`` ``[N + 1, V]`` (rows: pending, then the nodes in order)."""
    parent_rows = tree.parents + 1  # [N] the row of each node's parent (0 = the root)
    if sampling.greedy:
        shown = None  # display only: the engine forms it if the round is shown
        argmax = target_logits.argmax(-1).tolist()  # [N + 1]
        tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
        path, tried, node = [], [], -1
        while True:
            want = argmax[node + 1]
            kids = [i for i in range(len(tokens)) if parents[i] == node]
            hit = next((i for i in kids if tokens[i] == want), None)
            tried += [(i, 1.0 if i == hit else 0.0) for i in kids[: kids.index(hit) + 1 if hit is not None else None]]
            if hit is None:
                return TreeVerdict(path, want, "recovered" if kids else "bonus", tried, shown)
            path.append(hit)
            node = hit
    probs = rules.warp_probs(target_logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [N + 1, V]
    shown = probs[parent_rows, tree.tokens]
    path, tried, node = [], [], -1
    while True:
        p = probs[node + 1].clone()  # p′ at this node
        kids = tree.children(node)
        moved = False
        for kid in kids:
            x = int(tree.tokens[kid])
            a = float(p[x])
            tried.append((kid, a))
            if float(torch.rand((), generator=generator, device=p.device)) < a:
                path.append(kid)
                node, moved = kid, True
                break
            p[x] = 0.0  # p′ ← norm(p′ with x removed)
            p = p / p.sum().clamp_min(1e-30)
        if not moved:
            token = int(rules.sample(p[None], generator)[0])
            return TreeVerdict(path, token, "recovered" if kids else "bonus", tried, shown)
