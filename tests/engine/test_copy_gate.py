"""A feature draft that copies: the n-gram index's rollback, the pointer, the gate's mixture, its trainer, and that a
gated draft stays lossless (greedy: ar's text; sampling: the target's distribution)."""

from __future__ import annotations

import json
import random

import pytest
import torch
from conftest import make_tiny_pair
from test_lossless_sampling import TV_LIMIT, empirical_first_two, exact_first_two
from test_train_draft import tiny_shards

from spec_core.core import rules
from spec_core.core.types import SamplingConfig
from spec_core.drafters.copying import EVIDENCE, RUN_CAP, Pointer
from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.ngram import NgramIndex
from spec_core.engine.loop import Generation, generate
from spec_core.model.cached_lm import LMOutput
from spec_core.model.draft_assets import load_draft, save_draft
from spec_core.model.draft_networks import CopyGate
from spec_core.model.int8 import Int8Linear, int8_draft
from spec_core.model.models import ModelPair
from spec_core.train.copy import (
    CopyTrainConfig,
    Examples,
    agreement,
    evaluate_copy,
    gated_right,
    train_copy,
    train_gate,
)
from spec_core.train.draft import DraftTrainConfig, train


def test_truncating_the_index_forgets_exactly_the_dropped_tokens():
    rng = random.Random(0)
    for _ in range(50):
        text = [rng.randrange(5) for _ in range(rng.randint(1, 40))]
        keep = rng.randint(0, len(text))
        index = NgramIndex(1, 3)
        index.extend(text)
        index.truncate(keep)
        fresh = NgramIndex(1, 3)
        fresh.extend(text[:keep])
        assert index.ids == fresh.ids and index.after == fresh.after
        assert index.match() == fresh.match()


def test_the_pointer_copies_what_followed_and_counts_how_far_the_match_runs_back():
    pointer = Pointer(frozenset({9}))
    pointer.reset([1, 2, 3, 4, 5, 7, 2, 3, 4])
    token, n, run, recurred = pointer.candidate()
    assert (token, n, run, recurred) == (5, 3, 3, False)  # [2, 3, 4] was followed by 5; 7 ≠ 1 stops the run
    pointer.reset([1, 2, 3, 4, 5, 1, 2, 3, 4])
    assert pointer.candidate()[:3] == (5, 3, 4)  # the run goes back past the n-gram: 1 2 3 4
    pointer.reset(list(range(40)) + list(range(39)))
    assert pointer.candidate()[2] == RUN_CAP
    pointer.reset([1, 9, 1])  # what follows is banned: nothing to copy
    assert pointer.candidate() is None
    pointer.reset([1, 2, 3])
    assert pointer.candidate() is None


def test_the_mixture_is_a_distribution_that_moves_g_onto_the_copy():
    probs = torch.softmax(torch.randn(11), -1)
    out = rules.copy_mix(probs, 4, 0.3)
    assert torch.isclose(out.sum(), torch.tensor(1.0))
    assert torch.isclose(out[4], 0.7 * probs[4] + 0.3)
    assert torch.allclose(out[:4], 0.7 * probs[:4])


def gated_pair(bias: float, vocab: int = 16, target_seed: int = 0, draft_seed: int = 1) -> ModelPair:
    """A tiny feature pair whose draft has a copy gate shut (bias −30) or wide open (bias 30)."""
    pair = make_tiny_pair(vocab=vocab, draft="feature", target_seed=target_seed, draft_seed=draft_seed)
    gate = CopyGate(pair.draft.config.hidden_size, len(EVIDENCE))
    with torch.no_grad():
        gate.linear.bias.fill_(bias)
    pair.draft.copy_gate = gate
    return pair


PROMPT = "abcdabcdabca"


def test_an_open_gate_drafts_the_copy_and_a_shut_one_the_draft():
    for bias, copies in ((30.0, True), (-30.0, False)):
        pair = gated_pair(bias)
        prompt_ids = Generation(pair, PROMPT, "ar", 2).prompt_ids
        drafter = FeatureDrafter(pair.draft)
        with torch.no_grad():
            out = pair.target(torch.tensor([prompt_ids[:-1]]), output_hidden_states=True)
        drafter.reset(prompt_ids, LMOutput(out.logits[0], out.hidden_states[-1][0], None))
        chunk = drafter.propose(3, SamplingConfig(temperature=0.0), None)
        pointer = Pointer()
        pointer.reset(prompt_ids)
        expected = pointer.candidate()[0]
        if copies:
            assert chunk.tokens[0] == expected and chunk.token_probs[0] > 0.99
        plain = FeatureDrafter(pair.draft, copy=False)
        plain.reset(prompt_ids, LMOutput(out.logits[0], out.hidden_states[-1][0], None))
        own = plain.propose(3, SamplingConfig(temperature=0.0), None)
        if not copies:
            assert chunk.tokens == own.tokens
        elif expected != own.tokens[0]:
            assert chunk.tokens[0] != own.tokens[0]  # the gate changed the draft


@pytest.mark.parametrize("bias", [30.0, 0.0])
def test_a_gated_draft_writes_ars_text(bias):
    pair = gated_pair(bias)
    ar = generate(pair, PROMPT, "ar", max_new_tokens=40)
    for method in ("fixed:3", "fixed:1", "heuristic"):
        res = generate(pair, PROMPT, method, max_new_tokens=40)
        assert res.token_ids == ar.token_ids, method
        assert res.stats.drafted_tokens > 0


def test_a_gated_draft_samples_the_targets_distribution():
    vocab = 6
    pair = gated_pair(0.0, vocab=vocab, target_seed=3, draft_seed=11)
    prompt_ids = Generation(pair, "lossless", "ar", 2).prompt_ids
    exact = exact_first_two(pair, prompt_ids)
    emp = empirical_first_two(pair, "fixed:2", 4000)
    assert float(rules.total_variation(emp.flatten(), exact.flatten())) < TV_LIMIT


def test_a_gated_draft_saves_loads_and_keeps_its_gate_in_float_at_int8(tmp_path):
    pair = gated_pair(1.5)
    with torch.no_grad():
        pair.draft.copy_gate.linear.weight.normal_()
    card = {"design": "feature", "num_layers": 1, "head_size": 0, "copy": {"evidence": list(EVIDENCE)}}
    save_draft(pair.draft, "gated", card, tmp_path)
    loaded, _ = load_draft(pair.target, "gated", tmp_path)
    assert loaded.copy_gate is not None
    assert torch.allclose(loaded.copy_gate.linear.bias.float(), torch.tensor([1.5]))
    quant = int8_draft(loaded.to(torch.bfloat16))
    assert not isinstance(quant.copy_gate.linear, Int8Linear)
    plain = dict(card, copy=None)
    save_draft(make_tiny_pair(draft="feature").draft, "plain", plain, tmp_path)
    assert load_draft(pair.target, "plain", tmp_path)[0].copy_gate is None


def synthetic_examples(n: int, seed: int) -> Examples:
    """Positions where the evidence's first column says whether the copy is right; the draft is right half the time."""
    g = torch.Generator().manual_seed(seed)
    right = torch.rand(n, generator=g) < 0.5
    evidence = torch.zeros(n, len(EVIDENCE))
    evidence[:, 0] = right.float()
    return Examples(
        features=torch.zeros(n, 4, dtype=torch.float16),
        evidence=evidence,
        has_copy=torch.ones(n, dtype=torch.bool),
        copy_right=right,
        draft_right=torch.rand(n, generator=g) < 0.5,
        copy_is_top=torch.zeros(n, dtype=torch.bool),
        logp_teacher=torch.full((n,), -3.0),
        logp_copy=torch.full((n,), -3.0),
        logp_top=torch.full((n,), -1.0),
    )


def test_the_gate_learns_to_open_where_the_evidence_says_the_copy_is_right():
    ex = synthetic_examples(2000, 0)
    gate = train_gate(ex, 4, epochs=100, lr=0.05, seed=0)
    with torch.no_grad():
        g = gate(ex.features.float(), ex.evidence)
    assert float(g[ex.copy_right].min()) > 0.8 and float(g[~ex.copy_right].max()) < 0.2
    scores = agreement(ex, g)
    assert scores["gated"] > scores["draft"] + 0.2 and scores["gated"] == scores["oracle"]
    shut = agreement(ex, torch.zeros(len(ex)))
    assert shut["gated"] == shut["draft"]
    assert bool(gated_right(ex, torch.ones(len(ex))).eq(ex.copy_right).all())


def test_train_copy_writes_a_gated_draft_whose_card_it_wrote_and_stays_lossless(tmp_path):
    pair = make_tiny_pair()
    tiny_shards(pair.target, tmp_path / "data", n_shards=3)
    cfg = DraftTrainConfig(
        data_dir=tmp_path / "data",
        design="feature",
        steps=2,
        batch_size=4,
        eval_every=2,
        heldout_shards=1,
        head_size=12,
        threads=1,
        warmup=1,
        work_dir=tmp_path / "work",
        out_dir=tmp_path / "base",
    )
    base = train(cfg, target=pair.target)
    copy_cfg = CopyTrainConfig(
        data_dir=tmp_path / "data",
        out_dir=tmp_path / "gated",
        draft=tmp_path / "base" / "feature.json",
        train_shards="0:2",
        heldout_shards="2:",
        epochs=2,
    )
    weights = train_copy(copy_cfg, target=pair.target, special_ids=set())
    card = json.loads(weights.with_suffix(".json").read_text())
    base_card = json.loads(base.with_suffix(".json").read_text())
    assert card["base_sha256"] == base_card["sha256"] != card["sha256"]
    assert card["copy"]["evidence"] == list(EVIDENCE)
    assert set(card["copy"]["results"]["heldout"]) == {"depth1", "depth2", "depth3"}
    held = card["copy"]["results"]["heldout"]["depth1"]
    assert held["positions"] == 6 * 12 and 0.0 <= held["gated"] <= held["oracle"] <= 1.0
    assert card["copy"]["training"]["train_shards"] == ["shard_00000", "shard_00001"]
    again = evaluate_copy(
        CopyTrainConfig(**{**copy_cfg.__dict__, "draft": weights.with_suffix(".json")}), pair.target, set()
    )
    assert again["draft_sha256"] == card["sha256"]
    assert abs(again["depth1"]["gated"] - held["gated"]) < 0.03  # the gate as stored (bfloat16) scores the same
    with pytest.raises(Exception, match="no copy gate"):
        evaluate_copy(copy_cfg, pair.target, set())  # the base draft has none
    draft, _ = load_draft(pair.target, "feature", tmp_path / "gated")
    gated = ModelPair("tiny", pair.target, draft, "feature", pair.tokenizer, pair.device, pair.dtype)
    ar = generate(gated, "abcab", "ar", max_new_tokens=20)
    assert generate(gated, "abcab", "fixed:3", max_new_tokens=20).token_ids == ar.token_ids
    with pytest.raises(Exception, match="overlap"):
        train_copy(CopyTrainConfig(**{**copy_cfg.__dict__, "heldout_shards": "1:"}), pair.target, set())


def test_train_copy_refuses_a_missing_draft_and_empty_shard_slices_with_a_message(tmp_path, capsys):
    from spec_core.train.copy import main

    assert main(["--data-dir", str(tmp_path), "--out-dir", str(tmp_path), "--draft", str(tmp_path / "nope")]) == 2
    assert "give a draft's card" in capsys.readouterr().out
    assert main(["--data-dir", str(tmp_path), "--out-dir", str(tmp_path), "--draft", "assets/drafts/feature.json"]) == 2
    assert "no shards" in capsys.readouterr().out
    args = ["--data-dir", str(tmp_path), "--out-dir", str(tmp_path), "--train-shards", "x:y"]
    assert main(args) == 2
    assert "give a slice" in capsys.readouterr().out


def test_a_gated_drafts_rounds_carry_the_pointers_offers_for_the_views():
    res = generate(gated_pair(30.0), PROMPT, "fixed:3", max_new_tokens=30)
    offered = [(e, o) for e in res.events for o in [e.draft_copy_offers] if o]
    assert offered  # the prompt repeats itself: the pointer offers
    for e, offers in offered:
        assert len(offers) == e.draft_len
        for (token, g), drafted in zip(offers, e.draft_tokens):
            assert token < 0 or (token == drafted and g > 0.99)  # the gate is wide open: every offer is drafted
    plain = generate(make_tiny_pair(draft="feature"), PROMPT, "fixed:3", max_new_tokens=30)
    assert not any(e.draft_copy_offers for e in plain.events)


def test_a_warm_start_from_a_gated_draft_leaves_the_gate_out_and_ships_a_loadable_draft(tmp_path):
    pair = make_tiny_pair()
    tiny_shards(pair.target, tmp_path / "data", n_shards=3)
    common = dict(data_dir=tmp_path / "data", design="feature", steps=2, batch_size=4, eval_every=2)
    common |= dict(heldout_shards=1, head_size=12, threads=1, warmup=1, work_dir=tmp_path / "work")
    base = train(DraftTrainConfig(**common, out_dir=tmp_path / "base"), target=pair.target)
    gated = train_copy(
        CopyTrainConfig(tmp_path / "data", tmp_path / "gated", base.with_suffix(".json"), "feature", "0:2", "2:", 1),
        pair.target,
        set(),
    )
    common["work_dir"] = tmp_path / "work2"
    again = train(DraftTrainConfig(**common, out_dir=tmp_path / "again", init=gated), target=pair.target)
    card = json.loads(again.with_suffix(".json").read_text())
    assert "copy" not in card and card["init"]["copy_gate"].startswith("left out")
    draft, _ = load_draft(pair.target, "feature", tmp_path / "again")
    assert draft.copy_gate is None
