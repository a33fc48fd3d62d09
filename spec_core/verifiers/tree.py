"""Verifying a token tree in one target pass (EAGLE-2, arXiv 2406.16858; SpecInfer, arXiv 2305.09781).

The lossless verifier (:mod:`.lossless`) hands a draft that branches (``inputs.draft_parents`` set) to
:func:`verify_tree`. The target's output rows are ``[pending, node_1..node_N]``: row 0 is its distribution after
the pending token (the root), row ``1 + i`` its distribution after node i. Verification walks down from the root:

- **greedy**: move to the child equal to the target's argmax at the current node; stop when none is. The next
  token is that argmax (a *recovered* token when some child was rejected, a *bonus* token at a leaf).
- **sampling, lossless**: the tree's children are the draft's top-k, deterministic given the text, so each
  candidate is a point mass. At a node with target distribution p′ (warped like the chain rule), try the
  children most valuable first: accept child x with probability p′(x); on rejection set p′ ← norm(p′ with x
  removed) and try the next; if all fail, sample the next token from p′ (docs/ALGORITHMS.md §4). The token that
  leaves a node is then distributed exactly as p′ was: the output has the target's distribution.
"""

from __future__ import annotations

import torch

from spec_core.core import rules
from spec_core.core.types import RoundInputs, SamplingConfig
from spec_core.verifiers.base import Verdict


def verify_tree(inputs: RoundInputs, sampling: SamplingConfig, generator: torch.Generator | None) -> Verdict:
    """Walk the tree of ``inputs`` (``draft_tokens`` ``[N]``, ``draft_parents`` ``[N]``, siblings most valuable
    first) against ``target_logits`` ``[N + 1, V]``; the verdict's ``path`` is the accepted nodes, ``tried`` the
    children tried in order, ``accept_probs`` ``[N]`` each one's acceptance probability (0 if never tried)."""
    assert inputs.draft_parents is not None  # a tree's round
    tokens, parents = inputs.draft_tokens.tolist(), inputs.draft_parents.tolist()
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    accept = [0.0] * len(tokens)
    path: list[int] = []
    tried: list[int] = []
    node = -1

    def verdict(next_token: int, shown: torch.Tensor | None) -> Verdict:
        probs = torch.tensor(accept, device=inputs.target_logits.device)
        return Verdict(probs, len(path), next_token, shown, path=tuple(path), tried=tuple(tried))

    if sampling.greedy:
        argmax = inputs.target_argmax.tolist()  # [N + 1]
        while True:
            want = argmax[node + 1]
            hit = None
            for kid in children.get(node, ()):
                tried.append(kid)
                if tokens[kid] == want:
                    accept[kid], hit = 1.0, kid
                    break
            if hit is None:  # p(x) only for display: the engine derives it if shown
                return verdict(want, None)
            path.append(hit)
            node = hit
    probs = rules.warp_probs(inputs.target_logits, sampling.temperature, sampling.top_k, sampling.top_p)  # [N + 1, V]
    shown = probs[inputs.parent_rows, inputs.draft_tokens]  # [N] p′ of each node's token at its parent
    while True:
        p = probs[node + 1].clone()  # p′ at this node
        moved = False
        for kid in children.get(node, ()):
            x = tokens[kid]
            a = float(p[x])
            tried.append(kid)
            accept[kid] = a
            if float(torch.rand((), generator=generator, device=p.device)) < a:
                path.append(kid)
                node, moved = kid, True
                break
            p[x] = 0.0  # p′ ← norm(p′ with x removed)
            p = p / p.sum().clamp_min(1e-30)
        if not moved:
            return verdict(int(rules.sample(p[None], generator)[0]), shown)
