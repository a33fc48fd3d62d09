"""The hybrid's ceiling on a recorded text: the best any choice between copying and the draft network could do.

``hybrid`` chooses, round by round, between prompt lookup's copy, the draft network and a plain step
(:class:`~spec_core.drafters.lookup.HybridDrafter`; SAM-Decoding, Hu et al., arXiv 2411.10666, chooses the same
way). How much better than ``lookup`` could any such choice be? On a recorded greedy answer both sources are
known at every position without running the engine: the copy the index offers and how far the answer bears it out
(:func:`~spec_core.engine.lookup_replay.copies`), and the network's greedy chain drafted from the verified text and
how far the answer bears that out (:func:`network_runs`). An oracle that knows both picks, at each position, the
round (a plain step, a copy of L tokens, or L network drafts) that reaches the end in the least predicted time,
priced by the one cost model (a copied token costs no draft forward, a network's costs one).

The oracle is a ceiling: it never drafts a token the target rejects and never pays the network's start (its pass
over the text before its first round). ``python -m spec_core analyze lookup --network`` prints it beside the
copy's own oracle and ``lookup``'s cost policy (the oracle itself is
:func:`~spec_core.engine.lookup_replay.replay_oracle_sources`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from spec_core.core.types import SamplingConfig
from spec_core.drafters.pair_draft import PairDraft
from spec_core.engine.lookup_replay import run_length
from spec_core.engine.loop import _split_prefill
from spec_core.model.cached_lm import CachedLM, LMOutput

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

NETWORK_DEPTH = 4  # the longest network chain scored at each position (a CPU's passes rarely repay more)


def network_runs(pair: ModelPair, prompt_ids: Sequence[int], answer: Sequence[int], depth: int = NETWORK_DEPTH):
    """At each position of ``answer``: how many tokens of the pair's draft network's greedy chain (up to
    ``depth``), drafted from the verified text before it, the answer bears out (:func:`network_chains`)."""
    return [
        run_length(tokens, answer[pos:])
        for pos, (tokens, _) in enumerate(network_chains(pair, prompt_ids, answer, depth))
    ]


@torch.inference_mode()
def network_chains(
    pair: ModelPair, prompt_ids: Sequence[int], answer: Sequence[int], depth: int = NETWORK_DEPTH
) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """At each position of ``answer``: the pair's draft network's greedy chain (up to ``depth`` tokens), drafted
    from the verified text before it, and the network's probability of each of its tokens (its q, the per-round
    forecast a choice rule could read).

    The drafter sees what it sees in the engine: the prompt's prefill, then at each position the target's states of
    the verified text (one target pass over the answer gives them all; the passes are batch-invariant on a CPU,
    :mod:`spec_core.model.invariance`), and each chain is undone before the next (a round that kept nothing)."""
    drafter = PairDraft.build(None, pair)
    target = CachedLM(
        pair.target,
        layers=drafter.target_layers,
        hidden=True,
        prefill_model=getattr(pair, "prefill_target", None),
    )
    target.reset()
    context, first = _split_prefill(target.forward(torch.tensor(list(prompt_ids)), all_logits=False))
    drafter.reset(list(prompt_ids), context if len(prompt_ids) > 1 else None)
    rows = first
    if len(answer) > 1:  # the states of the answer's positions but the last (each row predicts the next token)
        rest = target.forward(torch.tensor(list(answer[:-1])), all_logits=False)
        cat = lambda a, b: torch.cat([a, b]) if a is not None and b is not None else None  # noqa: E731
        rows = LMOutput(first.logits, cat(first.hidden, rest.hidden), cat(first.layer_hidden, rest.layer_hidden))
    greedy = SamplingConfig()
    chains = []
    for pos, token in enumerate(answer):
        chunk = drafter.propose(depth, greedy, None)
        chains.append((tuple(int(t) for t in chunk.tokens), tuple(float(q) for q in chunk.token_probs)))
        drafter.commit(0, int(token), _row(rows, pos))  # nothing kept: the target's token, at its state
    return chains


def _row(out: LMOutput, i: int) -> LMOutput:
    """Row ``i`` of ``out``'s states (the drafter's commit reads no logits)."""
    pick = lambda x: x[i : i + 1] if x is not None else None  # noqa: E731
    return LMOutput(out.logits[:0], pick(out.hidden), pick(out.layer_hidden))
