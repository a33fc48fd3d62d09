"""Why a draft was rejected (spec_core/serve/rejections.py): the cause rule on hand-built pieces and
probabilities, and the engine's record at a rejection (both models' top-5, q of the target's token) on tiny
random-weight models, written and read back as an events file line."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core.errors import SpecScopeError
from spec_core.core.types import TOP_K_AT_REJECTION, SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.session import event_from_record, event_record
from spec_core.serve.rejections import NEAR_TIE_MARGIN, cause, is_split

TOP_IDS = (10, 11, 12, 13, 14)
TOP_PIECES = (" and", " to", " a", " the", " of")


def why(draft_token, draft_piece, probs, draft_after="", target_after="", pieces=TOP_PIECES):
    return cause(draft_token, draft_piece, TOP_IDS, pieces, probs, draft_after, target_after)


# -- the rule ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("draft", "target", "draft_after", "target_after", "split"),
    [
        (" bees", "bees", "", "", True),  # the same text, a leading space apart
        ("bees", "  bees", "", "", True),
        ("Ray", "Rayleigh", "leigh", "", True),  # the draft spells the target's token in two pieces
        (" Ray", "Rayleigh", "leigh scattering", " scattering", True),
        ("Rayleigh", "Ray", "", "leigh", True),  # the target's side spells the draft's token
        ("Ray", "Rayleigh", "", "", False),  # a prefix without evidence: the draft ran out
        (" a", " and", " cat", " so", False),  # a prefix that the next text contradicts: another word
        (" a", " and", "", " dedicated", False),  # seen in a real run: the draft's last draft, another word
        ("Ray", "Rayleigh", "mond", "", False),
        (" ", " the", "the", "", False),  # a lone space is no token's text
        ("\n", "The", "", "", False),
        (" The", " the", "", "", False),  # case differs: another token, not a split
    ],
)
def test_a_tokenization_split_is_the_same_text_split_differently(draft, target, draft_after, target_after, split):
    assert is_split(draft, target, draft_after, target_after) is split


def test_near_tie_needs_the_draft_close_to_the_target_s_token():
    just_under = (0.40, 0.40 - NEAR_TIE_MARGIN + 0.01, 0.1, 0.05, 0.01)
    assert why(11, " to", just_under) == "near-tie"  # the target's runner-up, within the margin
    just_over = (0.40, 0.40 - NEAR_TIE_MARGIN - 0.01, 0.1, 0.05, 0.01)
    assert why(11, " to", just_over) == "real disagreement"
    three_way = (0.30, 0.28, 0.25, 0.1, 0.05)
    assert why(12, " a", three_way) == "near-tie"  # third, but within the margin of the first
    # the target hesitated between its two best, but the draft wrote neither
    assert why(99, " cat", (0.30, 0.29, 0.2, 0.1, 0.05)) == "real disagreement"
    assert why(14, " of", (0.9, 0.05, 0.02, 0.02, 0.01)) == "real disagreement"


def test_a_rejection_of_the_target_s_own_token_is_a_disagreement_of_distributions():
    """When sampling, the draft's token can be the target's top-1 and still be rejected (q > p)."""
    assert why(10, " and", (0.38, 0.35, 0.1, 0.05, 0.01)) == "real disagreement"


def test_a_split_wins_over_a_near_tie():
    pieces = ("bees", " bees", " a", " the", " of")
    assert why(11, " bees", (0.5, 0.45, 0.01, 0.01, 0.01), pieces=pieces) == "tokenization split"


# -- the engine's record ---------------------------------------------------------------------------------------


def rounds(method="fixed:4", temperature=0.0, display=True, seed=1):
    pair = make_tiny_pair()
    sampling = SamplingConfig(temperature=temperature, seed=seed)
    return pair, list(Generation(pair, "hello world", method, 40, sampling, chat=False, display=display).rounds())


@pytest.mark.parametrize("method", ["fixed:4", "tree"])
def test_a_rejection_carries_both_models_top_k_and_q_of_the_target_s_token(method):
    pair, events = rounds(method)
    rejected = [e for e in events if e.next_kind == "recovered"]
    assert rejected
    for e in events:
        assert (e.rejection is not None) == (e.next_kind == "recovered"), e
    for e in rejected:
        r = e.rejection
        assert r.position == e.accepted < e.draft_len
        assert len(r.target_ids) == len(r.target_pieces) == len(r.target_probs) == TOP_K_AT_REJECTION
        assert 1 <= len(r.draft_ids) == len(r.draft_pieces) == len(r.draft_probs) <= TOP_K_AT_REJECTION
        assert r.target_pieces == pair.pieces(r.target_ids) and r.draft_pieces == pair.pieces(r.draft_ids)
        for probs in (r.target_probs, r.draft_probs):
            assert all(0 <= b <= a <= 1 for a, b in zip(probs, probs[1:]))  # most likely first
        # temperature 0: the target's token is its top-1, the recovered token; the rejected draft is the draft's
        # own top-1 and not the target's
        assert r.target_ids[0] == e.next_token and r.target_probs[0] == pytest.approx(e.next_prob, rel=1e-4)
        assert r.draft_ids[0] == e.draft_tokens[r.position] != r.target_ids[0]
        assert r.draft_probs[0] == pytest.approx(e.draft_probs[r.position], rel=1e-4)
        if e.draft_tokens[r.position] in r.target_ids:  # p of the rejected draft, where the top-5 holds it
            p_draft = r.target_probs[r.target_ids.index(e.draft_tokens[r.position])]
            assert p_draft == pytest.approx(e.target_probs[r.position], rel=1e-4)
        # q(the target's token), read from the draft's row, is the event's gold_draft_probs there
        assert r.draft_prob_of_target == pytest.approx(e.gold_draft_probs[r.position], rel=1e-4, abs=1e-9)
        if r.target_ids[0] in r.draft_ids:
            q = r.draft_probs[r.draft_ids.index(r.target_ids[0])]
            assert r.draft_prob_of_target == pytest.approx(q, rel=1e-6)


def test_the_record_matches_both_models_softmax():
    """The top-5 is the temperature-1 softmax of each model's own row (checked once against a direct softmax)."""
    pair, events = rounds("fixed:1")
    e = next(e for e in events if e.rejection is not None)
    ids = torch.tensor([[*_prompt(pair), *[t for x in events[: e.index] for t in x.emitted]]])
    with torch.inference_mode():
        p = torch.softmax(pair.target(ids).logits[0, -1].float(), -1)
        q = torch.softmax(pair.draft(ids).logits[0, -1].float(), -1)
    top_p, top_q = p.topk(TOP_K_AT_REJECTION), q.topk(TOP_K_AT_REJECTION)
    assert e.rejection.target_ids == tuple(top_p.indices.tolist())
    assert e.rejection.target_probs == pytest.approx(top_p.values.tolist(), rel=1e-3)
    assert e.rejection.draft_ids == tuple(top_q.indices.tolist())
    assert e.rejection.draft_prob_of_target == pytest.approx(float(q[top_p.indices[0]]), rel=1e-3)


def _prompt(pair):
    from spec_core.model.prompting import prompt_ids

    return prompt_ids(pair, "hello world", False, None)


def test_only_shown_rounds_carry_it_and_sampling_keeps_it():
    _, quiet = rounds(display=False)
    assert not any(e.rejection for e in quiet)  # a benchmark's events stay as small as before
    _, sampled = rounds(temperature=1.0)
    rejected = [e for e in sampled if e.next_kind == "recovered"]
    assert rejected and all(e.rejection is not None for e in rejected)
    for e in rejected:  # temperature-1 numbers, like gold_draft_probs, whatever the sampling temperature
        assert e.rejection.draft_prob_of_target == pytest.approx(e.gold_draft_probs[e.accepted], rel=1e-4)


def test_the_record_survives_an_events_file_and_old_files_still_load():
    _, events = rounds()
    e = next(e for e in events if e.rejection is not None)
    line = json.loads(json.dumps(event_record(e, prompt_id="p")))
    assert event_from_record(line) == e
    old = {k: v for k, v in line.items() if k != "rejection"}  # a file written before the field
    assert event_from_record(old).rejection is None
    for bad in ({"position": 0}, "oops", {**line["rejection"], "target_probs": ["x"] * TOP_K_AT_REJECTION}):
        with pytest.raises(SpecScopeError, match="not a SpecScope event: rejection"):
            event_from_record({**line, "rejection": bad})
