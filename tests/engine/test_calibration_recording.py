"""``analyze calibration``'s recording on a tiny pair: the q it reads are the engine's own, and at T = 0 they are the
draft's temperature-1 softmax probability of its argmax (spec_core/analysis/calibration.py)."""

from __future__ import annotations

import torch

from spec_core.analysis.calibration import record_rounds, summarize_cell
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.heads.metrics import prefix_confidence

PROMPT = "The quick brown fox"


def test_recorded_rounds_are_the_engines_events_and_greedy_q_is_the_drafts_softmax(tiny_pair, one_thread):
    rounds = record_rounds(tiny_pair, "fixed:3", [PROMPT], 12, 0.0, 1.0, 0)
    events = [e for e in Generation(tiny_pair, PROMPT, "fixed:3", 12, SamplingConfig(), display=False).rounds()]
    assert [(q, a) for q, a, _ in rounds] == [(list(e.draft_probs), e.accepted) for e in events if e.draft_len]
    assert all(0 < x < 1 for q, _, _ in rounds for x in q)  # a softmax's share, not the rule's point mass
    scores, labels, _ = prefix_confidence([(q, a) for q, a, _ in rounds])
    first_q, first_accepted = rounds[0][0], rounds[0][1]
    assert scores[: len(first_q)].tolist() == torch.tensor(first_q, dtype=torch.float64).cumprod(0).tolist()
    assert labels[: len(first_q)].tolist() == [i < first_accepted for i in range(len(first_q))]
    s = summarize_cell(rounds)
    assert s["rounds"] == len(rounds) and s["tokens"] == sum(len(q) for q, _, _ in rounds)


def test_sampled_rounds_seed_each_prompt_and_reproduce(tiny_pair, one_thread):
    a = record_rounds(tiny_pair, "fixed:3", [PROMPT, PROMPT], 10, 0.7, 1.0, 5)
    b = record_rounds(tiny_pair, "fixed:3", [PROMPT, PROMPT], 10, 0.7, 1.0, 5)
    assert a == b and {j for _, _, j in a} == {0, 1}
