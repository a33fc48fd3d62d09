"""PACER's paper head (arXiv 2602.01274; docs/PACER.md): it reads no draft probability, its packed block-diagonal
training equals training the blocks one by one, it trains and drives the engine on a tiny pair, `analyze
preverifier` writes its table, and `pacer:head=hybrid` still parses and runs."""

from __future__ import annotations

import inspect
import json
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import make_tiny_pair

from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import generate
from spec_core.engine.methods import parse_method
from spec_core.heads.preverifier import (
    BlockPreVerifier,
    BlockPreVerifierConfig,
    PreVerifier,
    PreVerifierConfig,
    block_mask,
    head_name,
    load_head,
    save_head,
)
from spec_core.policies.base import DraftSoFar
from spec_core.policies.pacer import HEAD_KEY, PacerLength, PacerParams

FORBIDDEN = ("prob", "log_q", "logq", "logit", "entropy", "confidence", "q_")  # the draft's own confidence


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _names(head: BlockPreVerifier) -> list[str]:
    """Everything that names an input: forward's and predict's parameters, ``inputs``, and the config's switches
    that are on."""
    params = [*inspect.signature(head.forward).parameters, *inspect.signature(head.predict).parameters]
    switches = [f.name for f in fields(head.cfg) if getattr(head.cfg, f.name) is True]
    return [*params, *head.inputs, *switches]


# -- the paper head's inputs -----------------------------------------------------------------------------------


def test_paper_head_reads_no_draft_probability():
    head = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=8))
    names = _names(head)
    assert set(head.inputs) == {"hidden", "token_embedding", "position"}
    assert not [n for n in names if any(f in n.lower() for f in FORBIDDEN)], names
    # the hybrid head does read them, and the same check sees it (the check can fail)
    hybrid = PreVerifier(PreVerifierConfig(hidden_size=8))
    assert {"log_q", "sum_log_q"} <= set(hybrid.inputs)
    assert [n for n in [*inspect.signature(hybrid.forward).parameters, *hybrid.inputs] if "prob" in n or "log_q" in n]
    # and so does the diagnostic variant that is handed the draft's logit
    diagnostic = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=8, use_draft_logit=True))
    assert [n for n in _names(diagnostic) if any(f in n.lower() for f in FORBIDDEN)]


class _Untouchable(list):
    """A DraftSoFar.token_probs that fails the test when anyone reads it."""

    def _fail(self, *a, **k):
        raise AssertionError("the paper head's policy read the draft's token probabilities")

    __getitem__ = __iter__ = __len__ = __bool__ = _fail


def test_pacer_with_the_paper_head_never_reads_token_probs():
    torch.manual_seed(0)
    head = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=8, max_len=8)).eval()
    embed = torch.nn.Embedding(16, 8)
    policy = PacerLength(PacerParams(block=2, threshold=0.0, rho=1.0, max_len=6), head, "paper", embed=embed)
    tokens, hidden = [], []
    while (n := policy.next_chunk(DraftSoFar(tokens, _Untouchable(), hidden, 64))) > 0:
        tokens += [3] * n
        hidden += [torch.randn(8) for _ in range(n)]
    assert len(tokens) == 6 and len(policy.trace()["predicted"]) == 6
    # the block's score is the head's on that block alone (positions in the draft, tokens embedded)
    block2 = head.predict(torch.stack(hidden[2:4]), embed(torch.tensor(tokens[2:4])), torch.tensor([3, 4]))
    assert policy.trace()["predicted"][2:4] == pytest.approx(block2.tolist(), abs=1e-6)


def _random_head(seed: int, hidden_size: int = 8, max_len: int = 4) -> BlockPreVerifier:
    """A paper head whose every weight and bias is random (a fresh head's zero biases would hide a bias misread)."""
    torch.manual_seed(seed)
    head = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=hidden_size, max_len=max_len))
    with torch.no_grad():
        for p in head.parameters():
            p.normal_(0.0, 0.5)
    return head.eval()


def test_predict_one_is_predict_on_a_block_of_one():
    head, other = _random_head(0), _random_head(1)
    for _ in range(3):  # twice with the same weights (its fused weights are reused), then after a load
        for position in range(1, 8):  # past max_len positions share its last embedding
            h, e = torch.randn(8) * 3, torch.randn(8)
            full = float(head.predict(h[None], e[None], torch.tensor([position]))[0])
            assert head.predict_one(h, e, position) == pytest.approx(full, abs=1e-6)
            assert head.predict_one(h.bfloat16(), e.bfloat16(), position) == pytest.approx(
                float(head.predict(h[None].bfloat16(), e[None].bfloat16(), torch.tensor([position]))[0]), abs=1e-6
            )
        head.load_state_dict(other.state_dict())  # new weights: the fused ones must follow
    h, e = torch.randn(8), torch.randn(8)
    assert head.predict_one(h, e, 2) == pytest.approx(other.predict_one(h, e, 2), abs=1e-6)
    with pytest.raises(SpecScopeError, match="inference"):
        head.train().predict_one(h, e, 1)  # a head being trained has no fixed fused weights


def test_pacer_scores_one_token_blocks_on_the_short_path_with_the_same_numbers():
    head, embed = _random_head(2), torch.nn.Embedding(16, 8)
    policy = PacerLength(PacerParams(block=1, threshold=0.0, rho=1.0, max_len=5), head, "paper", embed=embed)
    assert policy.single
    tokens, hidden = [], []
    while policy.next_chunk(DraftSoFar(tokens, _Untouchable(), hidden, 64)) > 0:
        tokens.append(len(tokens) + 3)
        hidden.append(torch.randn(8))
    ids = torch.tensor(tokens)
    full = [float(head.predict(hidden[i][None], embed(ids[i : i + 1]), torch.tensor([i + 1]))[0]) for i in range(5)]
    assert policy.trace()["predicted"] == pytest.approx(full, abs=1e-6)


# -- packing: the block-diagonal mask ----------------------------------------------------------------------------


def test_block_mask_is_causal_within_blocks_and_blind_across():
    seg = torch.tensor([0, 0, 1, 1, 1, -1])
    m = block_mask(seg)
    expect = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 1],  # padding sees itself only
        ],
        dtype=torch.bool,
    )
    assert torch.equal(m, expect)


def _toy_data(n_rounds: int = 7, window: int = 5, hidden: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    gammas = torch.randint(1, window + 1, (n_rounds,), generator=g)
    position = torch.cat([torch.arange(1, int(k) + 1) for k in gammas])
    n = len(position)
    return {
        "hidden": torch.randn(n, hidden, generator=g),
        "token_embed": torch.randn(n, hidden, generator=g),
        "position": position,
        "label": (torch.rand(n, generator=g) < 0.4).to(torch.uint8),
    }


@pytest.mark.parametrize("block", [1, 2, 4])
def test_packed_training_equals_training_blocks_separately(block):
    from spec_core.train.pacer import block_segments, pack_segments, packed_loss

    torch.manual_seed(1)
    head = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=8, max_len=5))
    data = _toy_data()
    segs = block_segments(data["position"], block)
    index, seg = pack_segments(segs, seq_len=9, order=torch.randperm(int(segs.max()) + 1))
    assert index.shape[0] > 1 and (index >= 0).sum() == len(data["position"])  # several rows, every token once
    head.zero_grad()
    packed = packed_loss(head, data, index, seg)
    packed.backward()
    packed_grads = {k: p.grad.clone() for k, p in head.named_parameters()}
    # the same blocks, each alone (no packing, no mask but its own causal one), token losses summed then averaged
    head.zero_grad()
    total = torch.zeros(())
    for b in range(int(segs.max()) + 1):
        idx = torch.nonzero(segs == b).squeeze(-1)
        logits = head(data["hidden"][idx], data["token_embed"][idx], data["position"][idx])  # one block, [n]
        total = total + torch.nn.functional.binary_cross_entropy_with_logits(
            logits, data["label"][idx].float(), reduction="sum"
        )
    separate = total / len(data["position"])
    separate.backward()
    assert packed.item() == pytest.approx(separate.item(), rel=1e-5, abs=1e-6)
    for k, p in head.named_parameters():
        assert torch.allclose(packed_grads[k], p.grad, rtol=1e-4, atol=1e-6), k


def test_blocks_follow_the_block_size_inside_each_round():
    from spec_core.train.pacer import block_segments

    position = torch.tensor([1, 2, 3, 4, 5, 1, 2, 1])
    assert block_segments(position, 2).tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    assert block_segments(position, 1).tolist() == list(range(8))


# -- training on a tiny pair, the engine, the analysis ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_paper(tmp_path_factory):
    """Simulated rounds on a tiny feature pair, a paper head and a hybrid head trained on them, saved."""
    from spec_core.train.pacer import (
        SimConfig,
        TrainConfig,
        load_data,
        simulate,
        token_embeddings,
        train_head,
        train_paper_head,
    )

    torch.set_num_threads(1)
    pair = make_tiny_pair(vocab=6, draft="feature")
    pair.draft_card = {"design": "feature", "sha256": "ab" * 32}
    work = tmp_path_factory.mktemp("paper")
    prompts = tuple(f"prompt number {i} about tokens" for i in range(6))
    sim = SimConfig(work / "feature", num_prompts=6, shard_size=2, window=5, max_new_tokens=16, prompts=prompts)
    paths = simulate(pair, sim, progress=False)
    data = load_data(paths)
    data["token_embed"] = token_embeddings(pair, data["token"])
    cfg = TrainConfig(steps=30, batch_size=64, seq_len=16, heldout_every=3, eval_block=2)
    paper, metrics = train_paper_head(data, cfg, "paper", progress=False)
    hybrid, _ = train_head(data, cfg, "hybrid", progress=False)
    assets = work / "assets"
    card = {"draft": "feature", "draft_sha256": pair.draft_card["sha256"], "training": {"heldout_every": 3}}
    save_head(paper, head_name("feature"), {**card, "variant": ""}, assets)
    save_head(hybrid, head_name("feature", "hybrid"), {**card, "variant": "hybrid"}, assets)
    save_head(paper, head_name("feature", "paper-nopos"), {**card, "variant": "paper-nopos"}, sim.out_dir / "heads")
    return pair, sim, data, paper, metrics, assets, work


def test_paper_head_trains_and_drives_the_engine_losslessly(tiny_paper):
    pair, sim, data, paper, metrics, assets, _ = tiny_paper
    assert 0.0 <= metrics["auc"] <= 1.0 and set(metrics["by_block"]) == {"1", "2", "4"}
    loaded, card = load_head("pacer-feature", assets)
    assert isinstance(loaded, BlockPreVerifier) and card["config"]["design"] == "paper"
    assert card["inputs"] == ["hidden", "token_embedding", "position"]
    pair.extras.clear()
    pair.extras[HEAD_KEY] = (loaded, "pacer-feature")
    ar = generate(pair, sim.prompts[0], "ar", max_new_tokens=12)
    spec = generate(pair, sim.prompts[0], "pacer:b=2,t=0.3,rho=1.2,max=5", max_new_tokens=12)
    assert spec.token_ids == ar.token_ids  # greedy, float32: lossless
    rounds = [e for e in spec.events if e.draft_len]
    assert rounds and all(len(e.policy_trace["predicted"]) == e.draft_len for e in rounds)
    json.dumps([e.policy_trace for e in rounds])


def test_hybrid_head_still_parses_and_runs(tiny_paper):
    pair, sim, *_, assets, _ = tiny_paper
    spec = parse_method("pacer:head=hybrid,b=1")
    assert spec.policy.params == PacerParams(block=1, head="hybrid", auto_t=True)
    hybrid, _ = load_head("pacer-feature-hybrid", assets)
    assert isinstance(hybrid, PreVerifier)
    pair.extras.clear()
    pair.extras[f"{HEAD_KEY}:hybrid"] = (hybrid, "pacer-feature-hybrid")
    ar = generate(pair, sim.prompts[1], "ar", max_new_tokens=12)
    out = generate(pair, sim.prompts[1], "pacer:head=hybrid,t=0.3+lossless", max_new_tokens=12)
    assert out.token_ids == ar.token_ids
    assert all(e.policy_trace["head"] == "pacer-feature-hybrid" for e in out.events if e.draft_len)


def test_analyze_preverifier_writes_the_table(tiny_paper, tmp_path):
    from spec_core.analysis.preverifier import analyze, build_parser

    pair, sim, *_, assets, work = tiny_paper
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"widths": [1, 4, 8], "target_ms": [10.0, 12.0, 16.0], "draft_ms": 1.0}))
    out = tmp_path / "pre.csv"
    args = build_parser().parse_args(
        [
            "--data",
            str(sim.out_dir),
            "--assets-dir",
            str(assets),
            "--costs",
            str(costs),
            "--out",
            str(out),
            "--block",
            "2",
        ]
    )
    analyze(pair, args)
    table = pd.read_csv(out)
    assert list(table.columns[:8]) == [
        "head",
        "inputs",
        "auc",
        "ece",
        "predicted_speedup",
        "headroom",
        "headroom_low",
        "headroom_high",
    ]
    heads = table["head"].tolist()
    assert any(h.startswith("pacer-feature (paper") for h in heads)
    assert any(h.startswith("pacer-feature-hybrid") for h in heads) and "draft Π q" in heads
    assert any("paper-nopos" in h for h in heads) and any("ρ = 1" in h for h in heads)
    assert {"pacer-feature b = 1", "pacer-feature b = 4"} <= set(heads) and "oracle" in heads
    paper_inputs = table.loc[table["head"].str.startswith("pacer-feature (paper"), "inputs"].iloc[0]
    assert not any(f in paper_inputs.lower() for f in FORBIDDEN)
    assert "log_q" in table.loc[table["head"].str.startswith("pacer-feature-hybrid"), "inputs"].iloc[0]
    perfect = table.loc[table["head"] == "perfect pre-verifier"].iloc[0]
    assert perfect["auc"] == 1.0 and perfect["ece"] == 0.0 and perfect["auc_position1"] == 1.0
    scored = table[table["auc"].notna()]
    assert scored["auc"].between(0, 1).all() and (table["predicted_speedup"] > 0).all()
    # H: 1 for the perfect pre-verifier, ≤ 0 for every fixed window (0 for the best), an interval around the value
    for suffix in ("", "_accelerator_model"):
        h = table.set_index("head")[f"headroom{suffix}"]
        if h.notna().any():
            assert h["perfect pre-verifier"] == pytest.approx(1.0)
            fixed = h[[f"fixed:{k}" for k in (1, 2, 3, 4)]]
            assert fixed.max() == pytest.approx(0.0) and (fixed <= 1e-9).all()
    rows = table[table["headroom"].notna()]
    assert (rows["headroom_low"] <= rows["headroom"] + 1e-9).all() and (
        rows["headroom"] <= rows["headroom_high"] + 1e-9
    ).all()


def test_headroom_is_the_share_of_a_perfect_rules_gain_and_its_interval_resamples_groups():
    """H = (S − S_best_fixed) / (S_perfect − S_best_fixed) from per-round prices; the interval resamples groups."""
    import numpy as np

    from spec_core.policies.pacer_headroom import headroom

    ones = np.ones(6)
    priced = {  # (tokens, ms) per round; speed ∝ tokens / ms
        "fixed:1": (2 * ones, 10 * ones),  # 0.2
        "fixed:2": (2.2 * ones, 10 * ones),  # 0.22: the best fixed window
        "perfect": (3.2 * ones, 10 * ones),  # 0.32
        "head": (2.7 * ones, 10 * ones),  # half-way
        "worse": (2.0 * ones, 10 * ones),
    }
    found = headroom(priced, ["fixed:1", "fixed:2"], "perfect", groups=np.array([0, 0, 1, 1, 2, 2]), samples=50)
    assert found["head"].value == pytest.approx(0.5) and found["perfect"].value == pytest.approx(1.0)
    assert found["fixed:2"].value == pytest.approx(0.0) and found["worse"].value == pytest.approx(-0.2)
    assert found["head"].groups == 3 and found["head"].low == pytest.approx(0.5)  # identical groups: no spread
    noisy = {k: (t * np.array([1, 1.3, 0.7, 1, 1.2, 0.8]), m) for k, (t, m) in priced.items()}
    noisy["head"] = (priced["head"][0] * np.array([1.4, 1.4, 0.6, 0.6, 1, 1]), priced["head"][1])
    spread = headroom(noisy, ["fixed:1", "fixed:2"], "perfect", samples=200)["head"]
    assert spread.low < spread.value < spread.high and spread.groups == 6
    assert "no headroom" in headroom({"a": (ones, ones), "p": (ones, ones)}, ["a"], "p")["a"].text()


def test_playground_replays_the_paper_head_exactly_at_every_block_size():
    """The Playground records the paper head's â per block size; replaying PACER on the record gives the engine's
    rounds (float32, greedy), b = 1, 2 and 3 alike."""
    from spec_core.core.cost_model import CostProfile
    from spec_core.serve.playground import paper_key, record_text, replay_policy

    pair = make_tiny_pair(vocab=8, draft="feature", draft_seed=2)
    torch.manual_seed(0)
    head = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=32, max_len=6)).eval()
    pair.extras[HEAD_KEY] = (head, "paper")
    costs = CostProfile(widths=(1, 8), target_ms=(10.0, 12.0), draft_ms=1.0)
    record = record_text(pair, "abc def ghi", max_new_tokens=24, max_len=6, costs=costs)
    assert {paper_key("", b) for b in (1, 2, 3)} <= set(record.predicted)
    for b in (1, 2, 3):
        t = float(np.median(record.predicted[paper_key("", b)][:, :b].mean(1)))
        policy = f"pacer:b={b},t={t:.4f},rho=1.05,max=6"
        replay = replay_policy(record, policy)
        real = generate(pair, "abc def ghi", policy, max_new_tokens=24)
        assert tuple(real.token_ids) == tuple(record.tokens)
        assert list(zip(replay.lengths, replay.kept)) == [(e.draft_len, e.accepted) for e in real.events], policy
        assert len(set(replay.lengths[:-1])) > 1, policy  # the rule really varied the length


@pytest.mark.embedded
def test_shipped_paper_and_hybrid_heads_on_the_embedded_pair():
    """`pacer` runs the paper head (no probability input), the same as `pacer:head=paper`; `pacer:head=hybrid`
    loads the hybrid; all stay lossless."""
    import dataclasses

    from spec_core.core.errors import SpecScopeError
    from spec_core.heads.preverifier import find_head
    from spec_core.model.models import embedded_target_dir, load_pair

    try:
        embedded_target_dir()
    except SpecScopeError as err:
        pytest.skip(f"the embedded pair is not installed: {err}")
    pair = dataclasses.replace(load_pair("embedded", dtype="float32", draft="feature"), extras={})
    assert find_head(pair.draft_card, "hybrid") == "pacer-feature"
    name = find_head(pair.draft_card, "paper")
    assert find_head(pair.draft_card) == name == "pacer-feature-paper"
    head, card = load_head(name)
    assert isinstance(head, BlockPreVerifier) and card["inputs"] == ["hidden", "token_embedding", "position"]
    assert card["heldout"]["auc"] > 0.5 and (head.num_parameters() * 2) < 60_000  # a few tens of kB in bf16
    prompt = "Write a Python function that returns the square of a number."
    ar = generate(pair, prompt, "ar", max_new_tokens=16)
    for method in ("pacer", "pacer:head=paper", "pacer:head=hybrid"):
        spec = generate(pair, prompt, method, max_new_tokens=16)
        assert spec.token_ids == ar.token_ids, method
        heads = {e.policy_trace["head"] for e in spec.events if e.draft_len}
        assert heads == {"pacer-feature" if method.endswith("hybrid") else name}, method


def test_pacer_finds_the_paper_head_first_and_the_only_head_otherwise(tmp_path):
    from spec_core.core.errors import SpecScopeError
    from spec_core.heads.preverifier import PreVerifier, PreVerifierConfig, find_head, head_name, save_head

    def ship(variant: str, head, sha: str) -> None:
        card = {"draft": "feature", "draft_sha256": sha, "variant": variant}
        save_head(head, head_name("feature", variant), card, tmp_path)

    hybrid = PreVerifier(PreVerifierConfig(hidden_size=8))
    paper = BlockPreVerifier(BlockPreVerifierConfig(hidden_size=8))
    ship("", hybrid, "a" * 64)
    ship("paper", paper, "a" * 64)
    with pytest.raises(SpecScopeError):  # nothing for another draft
        find_head({"sha256": "b" * 64}, "", tmp_path)
    card = {"sha256": "a" * 64, "design": "feature"}
    assert find_head(card, "", tmp_path) == "pacer-feature-paper"  # pacer: the paper's design
    assert find_head(card, "hybrid", tmp_path) == "pacer-feature"  # the unsuffixed hybrid, by its variant's name
    (tmp_path / "pacer-feature-paper.json").unlink()
    (tmp_path / "pacer-feature-paper.safetensors").unlink()
    assert find_head(card, "", tmp_path) == "pacer-feature"  # a draft without a paper head: its only head


def test_a_shard_folder_resumes_only_with_its_own_settings(tiny_paper):
    """Shard i holds prompts i·size … of its own, wholly shuffled list; resuming with another prompt count (which
    reorders the list) would mix two lists, so it is refused with a message; the same settings resume."""
    from spec_core.core.errors import SpecScopeError
    from spec_core.train.pacer import simulate

    pair, sim, *_ = tiny_paper
    before = sorted(sim.out_dir.glob("shard_*.safetensors"))
    assert simulate(pair, sim, progress=False) == before  # nothing to do: the same settings
    other = type(sim)(sim.out_dir, num_prompts=8, shard_size=2, window=5, max_new_tokens=16, prompts=sim.prompts)
    with pytest.raises(SpecScopeError, match="num_prompts = 6"):
        simulate(pair, other, progress=False)
    assert sorted(sim.out_dir.glob("shard_*.safetensors")) == before


def test_the_held_out_split_leaves_out_prompts_a_shipped_head_trained_on(tmp_path):
    """Simulating more prompts reorders the whole list, so a prompt the shipped head trained on can sit at a held-out
    index of the new data: `analyze preverifier` finds such prompts by their text and drops them."""
    from spec_core.analysis.preverifier import prompts_seen_in_training
    from spec_core.train.pacer import SimConfig, sim_config_json, simulation_prompt_texts, trained_prompt_texts

    old = simulation_prompt_texts({"num_prompts": 16})
    card = {"data": {"prompts_simulated": 16}, "training": {"heldout_every": 4}}  # a card from before the seed field
    trained = trained_prompt_texts(card)
    assert trained == {t for i, t in enumerate(old) if i % 4}
    (tmp_path / "config.json").write_text(json.dumps(sim_config_json(SimConfig(tmp_path, num_prompts=64))))
    seen, why = prompts_seen_in_training(tmp_path, [card])
    new = simulation_prompt_texts({"num_prompts": 64})
    assert why == "" and seen.tolist() == [t in trained for t in new] and int(seen.sum()) == len(trained)
    assert any(seen[i] for i in range(0, 64, 4))  # the reorder really puts trained prompts at held-out indices
    none, why = prompts_seen_in_training(tmp_path / "missing", [card])
    assert none is None and "by index only" in why


# -- analyze preverifier on a user's prompts (a clone without training shards) ---------------------------------


def _prompts(path, texts):
    path.write_text("".join(f'{{"id": "u{i}", "prompt": "{t}"}}\n' for i, t in enumerate(texts)), encoding="utf-8")
    return path


@pytest.mark.embedded
def test_analyze_preverifier_scores_a_users_prompts_with_t_tuned_on_the_shipped_rounds(tmp_path, capsys):
    """Six prompts the tool has never seen, no training shards: t is tuned on the shipped rounds (it used to die in
    a division by zero), every row is scored on the user's rounds, and a file too small for a row says so."""
    from spec_core.__main__ import main

    texts = [
        "Hi! How are you today?",
        "What is a good name for a cat?",
        "Tell me a fun fact about the moon.",
        "Can you suggest a quick breakfast?",
        "What does a librarian do?",
        "Say something kind to a friend who is tired.",
    ]
    args = ["analyze", "preverifier", "--data", str(tmp_path / "feature"), "--max-new-tokens", "24", "--threads", "1"]
    out = tmp_path / "rows.csv"
    assert main([*args, "--prompts", str(_prompts(tmp_path / "six.jsonl", texts)), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "shipped rounds (no training rounds here)" in said
    table = pd.read_csv(out).set_index("head")
    assert {"draft Π q", "perfect pre-verifier", "confidence:T", "fixed:1", "oracle"} <= set(table.index)
    assert table["predicted_speedup"].notna().all()
    tiny = _prompts(tmp_path / "one.jsonl", ["Hi!"])
    assert main([*args, "--prompts", str(tiny), "--max-new-tokens", "2", "--out", str(tmp_path / "x.csv")]) == 2
    assert "a row needs at least" in capsys.readouterr().err
