"""A block drafter that copies (DFlash with a pointer-generator gate): the pointer reads the block's drafted tokens so
far, the drafter stays lossless (greedy: ar's text; sampling: the target's distribution), and ``train copy`` gates
a block drafter from its card."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_tiny_pair
from test_block_drafter import LAYERS, tiny_target, write_tiny_shards
from test_lossless_sampling import TV_LIMIT, empirical_first_two, exact_first_two

from spec_core.core import rules
from spec_core.core.types import SamplingConfig
from spec_core.drafters.block.assets import load_block_model, save_block_model
from spec_core.drafters.block.network import BlockDraftModel
from spec_core.drafters.block.runtime import BlockDrafter
from spec_core.drafters.copying import EVIDENCE, Pointer
from spec_core.engine.loop import Generation, generate
from spec_core.model.cached_lm import LMOutput
from spec_core.model.draft_networks import CopyGate
from spec_core.model.models import ModelPair
from spec_core.train.copy import CopyTrainConfig, main
from spec_core.train.copy_block import evaluate_block_copy, pointer_candidates, train_block_copy

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = "abcdabcdabca"


def gated_block_pair(bias: float | None, vocab: int = 16, target_seed: int = 0) -> ModelPair:
    """A tiny pair whose block drafters (every loss: one model) have a copy gate shut (bias −30), half open (0) or
    wide open (30); None: no gate."""
    pair = make_tiny_pair(vocab=vocab, target_seed=target_seed)
    torch.manual_seed(5)
    model = BlockDraftModel.for_target(pair.target, (1, 2), num_layers=1, block_size=4, init="random").eval()
    if bias is not None:
        model.copy_gate = CopyGate(model.config.hidden_size, len(EVIDENCE))
        with torch.no_grad():
            model.copy_gate.linear.bias.fill_(bias)
    for loss in ("uniform", "decay", "dpace"):
        pair.extras[f"block:{loss}"] = model
    return pair


def test_the_pointer_reads_the_blocks_own_drafts_and_an_open_gate_copies_a_run():
    pair = gated_block_pair(30.0)
    model = pair.extras["block:dpace"]
    ids = Generation(pair, PROMPT, "ar", 2).prompt_ids
    with torch.no_grad():
        out = pair.target(torch.tensor([ids[:-1]]), output_hidden_states=True)
    layer_hidden = torch.stack([out.hidden_states[i][0] for i in (1, 2)], dim=1)
    drafter = BlockDrafter(model)
    drafter.reset(ids, LMOutput(out.logits[0], out.hidden_states[-1][0], layer_hidden))
    chunk = drafter.propose(3, SamplingConfig(temperature=0.0), None)
    pointer = Pointer()  # what a prompt lookup copies, one token after another
    pointer.reset(ids)
    expected = []
    for _ in range(3):
        expected.append(pointer.candidate()[0])
        pointer.extend(expected[-1:])
    assert chunk.tokens == expected  # "abca" → "bcd": the run goes on past the first copied token
    assert [token for token, _ in chunk.copy_offers] == expected and min(g for _, g in chunk.copy_offers) > 0.99
    plain = BlockDrafter(model, copy=False)
    plain.reset(ids, LMOutput(out.logits[0], out.hidden_states[-1][0], layer_hidden))
    assert plain.propose(3, SamplingConfig(temperature=0.0), None).copy_offers is None


@pytest.mark.parametrize("bias", [30.0, 0.0])
def test_a_gated_block_drafter_writes_ars_text(bias):
    pair = gated_block_pair(bias)
    for prompt in (PROMPT, "xyz"):
        ar = generate(pair, prompt, "ar", max_new_tokens=40)
        for method in ("block:dpace", "block:decay"):
            res = generate(pair, prompt, method, max_new_tokens=40)
            assert res.token_ids == ar.token_ids, (prompt, method)
    offered = [e for e in generate(pair, PROMPT, "block:dpace", max_new_tokens=40).events if e.draft_copy_offers]
    assert offered and all(len(e.draft_copy_offers) == e.draft_len for e in offered)


def test_an_open_gate_keeps_more_of_a_repeating_text_than_no_gate():
    text = "abcdefgh" * 4
    plain = generate(gated_block_pair(None), text, "block:dpace", max_new_tokens=32)
    copying = generate(gated_block_pair(30.0), text, "block:dpace", max_new_tokens=32)
    assert copying.token_ids == plain.token_ids
    assert copying.stats.tau >= plain.stats.tau  # what the copy adds can only be kept, never the text changed


def test_a_gated_block_drafter_samples_the_targets_distribution():
    vocab = 6
    pair = gated_block_pair(0.0, vocab=vocab, target_seed=3)
    prompt_ids = Generation(pair, "lossless", "ar", 2).prompt_ids
    exact = exact_first_two(pair, prompt_ids)
    outcomes: dict = {}
    emp = empirical_first_two(pair, "block:dpace", 4000, outcomes)
    assert float(rules.total_variation(emp.flatten(), exact.flatten())) < TV_LIMIT
    assert sum(n for (_, accepted), n in outcomes.items() if accepted == 0) > 100  # rejections really happened


def test_pointer_candidates_follow_the_text_teacher_forced():
    tokens = [5, 1, 2, 3, 9, 1, 2, 3, 9, 7, 1, 2]
    found = pointer_candidates(tokens, [6, 2], 3, frozenset())
    # each anchor's positions read the text up to the anchor and the text's own tokens after it (teacher-forced)
    for row, a in enumerate([6, 2]):
        for k in range(3):
            pointer = Pointer()
            pointer.reset(tokens[: a + k + 1])
            got = pointer.candidate()
            assert int(found[row, k, 0]) == (got[0] if got else -1)
    assert int(found[0, 0, 0]) == 3 and int(found[1, 0, 0]) == -1  # "… 1 2" copies 3; the first "2" has no match


def test_train_copy_gates_a_block_drafter_from_its_card(tmp_path, capsys):
    target = tiny_target()
    write_tiny_shards(target, tmp_path / "data", n_shards=3, per_shard=4)
    torch.manual_seed(1)
    model = BlockDraftModel.for_target(target, LAYERS, num_layers=1, block_size=5, init="random")
    base = save_block_model(model, "dpace", {"method": "block:dpace", "loss": "dpace"}, tmp_path / "base")
    cfg = CopyTrainConfig(
        data_dir=tmp_path / "data",
        out_dir=tmp_path / "gated",
        draft=base.with_suffix(".json"),
        train_shards="0:2",
        heldout_shards="2:",
        epochs=2,
        anchors=3,
    )
    weights = train_block_copy(cfg, target, set())
    card = json.loads(weights.with_suffix(".json").read_text())
    assert weights.stem == "dpace" and card["design"] == "block" and card["loss"] == "dpace"
    assert card["base_sha256"] == json.loads(base.with_suffix(".json").read_text())["sha256"] != card["sha256"]
    held = card["copy"]["results"]["heldout"]
    assert held["blocks"] == 4 * 3 and len(held["by_position"]) == 4
    assert 1.0 <= held["alone"]["tau_estimate"] <= 5.0 and 1.0 <= held["gated"]["tau_estimate"] <= 5.0
    loaded, _ = load_block_model(target, "dpace", tmp_path / "gated")
    assert loaded.copy_gate is not None
    again = evaluate_block_copy(CopyTrainConfig(**{**cfg.__dict__, "draft": weights.with_suffix(".json")}), target)
    assert again["draft_sha256"] == card["sha256"] and again["alone"] == held["alone"]
    retrained = CopyTrainConfig(**{**cfg.__dict__, "draft": weights.with_suffix(".json"), "out_dir": tmp_path / "re"})
    again_card = json.loads(train_block_copy(retrained, target, set()).with_suffix(".json").read_text())
    assert again_card["base_sha256"] == card["base_sha256"]  # a gated card: the gate is trained again on its base
    assert again_card["copy"]["results"]["heldout"]["alone"] == held["alone"]
    (tmp_path / "bad.json").write_text("not json")
    args = ["--data-dir", str(tmp_path / "data"), "--draft", str(tmp_path / "bad.json"), "--evaluate"]
    assert main(args) == 2 and "is not a card" in capsys.readouterr().out


def test_analyze_block_reports_a_gated_drafters_card_beside_the_engine():
    from spec_core.analysis.block import copy_summary, markdown_table

    assert copy_summary({"loss": "dpace"}) == {}
    held = {"alone": {"tau_estimate": 1.25}, "gated": {"tau_estimate": 3.4}, "blocks": 64}
    card = {"copy": {"results": {"heldout": held}, "training": {"heldout_shards": ["shard_00144"]}}}
    summary = copy_summary(card)
    assert summary == {"alone_tau": 1.25, "gated_tau": 3.4, "blocks": 64, "heldout_shards": ["shard_00144"]}
    curve = {"accept_by_position": [0.5, 0.2, 0.1], "tau_estimate": 1.8}
    row = {"loss": "dpace", "alpha": 0.5, "tau_mean": 1.7, "accept_curve": [0.4, 0.2, 0.1], "heldout": curve}
    row |= {"identical_to_ar": 2, "train": {"median_step_s": 0.8, "heldout": curve}}
    table = markdown_table({"prompts": ["a", "b"], "drafters": {"dpace": {**row, "copy": summary}, "decay": row}})
    assert "| 1.250 → 3.400 |" in table.splitlines()[2] and table.splitlines()[3].endswith("| – |")
