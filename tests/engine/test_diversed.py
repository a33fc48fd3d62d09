"""DIVERSED's ensemble head, its REINFORCE training end to end on a tiny pair, the shipped head, the rewards
of the evaluation suite and the Pareto helpers (arXiv 2604.07622)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import make_tiny_pair

from spec_core.analysis import pareto
from spec_core.core.assets import HEADS_DIR, file_sha256, load_asset, save_asset
from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import generate
from spec_core.engine.rewards import (
    TASKS,
    arithmetic_reward,
    extraction_reward,
    last_integer,
    load_items,
    reward,
    rouge2,
    round_numbers,
)
from spec_core.heads import ensemble
from spec_core.heads.ensemble import EnsembleHead, head_from_tensors, load_head, pair_hidden_sizes
from spec_core.serve import sweeps
from spec_core.train.diversed import TrainConfig, loss_terms, rollout, train

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread beats contending for the cores


# -- the head ------------------------------------------------------------------------------------------------


def test_head_starts_at_one_half_and_stays_in_unit_interval():
    head = EnsembleHead(8, 12)
    d, t = torch.randn(50, 8) * 100, torch.randn(50, 12) * 0.01  # wildly different scales
    assert torch.allclose(head(d, t), torch.full((50,), 0.5))
    with torch.no_grad():
        head.linear.weight.normal_(0, 50.0)
        head.linear.bias.fill_(30.0)
    w = head(d, t)
    assert ((w >= 0) & (w <= 1)).all() and w.std() > 0
    with pytest.raises(SpecScopeError, match="hidden sizes"):
        head(torch.randn(2, 9), torch.randn(2, 12))
    assert torch.allclose(EnsembleHead(8, 12, init_w=0.8)(d, t), torch.full((50,), 0.8))  # training may start there
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(SpecScopeError, match="initial w"):
            EnsembleHead(8, 12, init_w=bad)


def test_head_asset_roundtrip_and_draft_check(tmp_path, monkeypatch):
    monkeypatch.setattr(ensemble, "HEADS_DIR", tmp_path)
    pair = make_tiny_pair()
    pair.draft_card = {"sha256": "abc"}
    head = EnsembleHead(32, 32)
    with torch.no_grad():
        head.linear.weight.normal_(0, 0.1)
    save_asset(head.tensors(), "h", {"draft_sha256": "abc", "draft_hidden": 32, "target_hidden": 32}, tmp_path)
    loaded, card = load_head(pair, "h")
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    assert torch.allclose(loaded(x, y), head(x, y), atol=2e-2)  # bfloat16 storage
    assert load_head(pair, "h")[0] is loaded  # cached in pair.extras
    other = make_tiny_pair()
    other.draft_card = {"sha256": "different"}
    with pytest.raises(SpecScopeError, match="trained with draft sha256"):
        load_head(other, "h")


# -- training end to end on a tiny configuration ------------------------------------------------------------


def tiny_items(n: int = 6):
    from spec_core.engine.rewards import EvalItem

    return [EvalItem(f"t{i}", "extraction", "train", f"tiny prompt {i}", "ab", 10) for i in range(n)]


def test_rollout_records_one_row_per_emitted_drafted_token():
    """The recorder keeps, per emitted drafted position, what the score needs, and agrees with the engine's own
    trace: the accepted prefix of each round, then the rejected draft (whose emitted token is the recovered one)."""
    pair = make_tiny_pair()
    head = EnsembleHead(32, 32)
    item = tiny_items(1)[0]
    r, rec, text = rollout(pair, head, item, TrainConfig(temperature=1.0), seed=0, temperature=1.0)
    assert rec is not None and 0 < rec["p_y"].shape[0] <= 10 and isinstance(r, float)
    n = rec["p_y"].shape[0]
    assert rec["draft_hidden"].shape == (n, 32) and rec["target_hidden"].shape == (n, 32)
    assert ((rec["tv"] >= 0) & (rec["tv"] <= 1)).all()
    acc = rec["accepted"]
    assert acc.dtype == torch.bool and bool(acc.any()) and bool((~acc).any())  # both kinds in this rollout
    assert torch.equal(rec["p_y"][acc], rec["p_x"][acc]) and torch.equal(rec["q_y"][acc], rec["q_x"][acc])
    assert (rec["p_x"][~acc] < rec["q_x"][~acc]).all()  # only a draft with p(x) < q(x) can be rejected
    assert (rec["p_y"][~acc] > rec["q_y"][~acc]).all()  # the recovered token lies in norm(max(0, p − q))
    # against the engine's trace (the same seed replays the same rollout)
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (head, {})
    out = generate(pair, item.prompt, "fixed:4+diversed", item.max_new_tokens, temperature=1.0, seed=0)
    flags, p_x = [], []
    for e in out.events:
        if e.draft_len:
            k = min(e.accepted + 1, e.draft_len, len(e.emitted))
            flags += [i < e.accepted for i in range(k)]
            p_x += e.verifier_trace["p_x"][:k]
    assert acc.tolist() == flags and rec["p_x"].tolist() == pytest.approx(p_x, abs=1e-6)
    for estimator in ("decision", "token"):
        logp, keep, w = loss_terms(head, rec, estimator)
        assert logp.shape == (n,) and torch.isfinite(logp).all()
        head.zero_grad()
        logp.sum().backward()  # the recorded tensors are usable by autograd (cloned out of inference mode)
        assert head.linear.weight.grad is not None
    assert float(keep.detach()) == pytest.approx(float((1 - 0.5 * rec["tv"]).sum()), abs=1e-5)
    with pytest.raises(SpecScopeError, match="unknown estimator"):
        loss_terms(head, rec, "marginal")


def test_training_end_to_end_tiny(tmp_path):
    """λ > 0 with no reward signal: the acceptance term alone must push w below its start of 0.5; the card
    carries what the issue asks; a rerun resumes from the checkpoint."""
    pair = make_tiny_pair()
    cfg = TrainConfig(epochs=2, batch_size=3, lam=1.0, lr=0.05, work_dir=str(tmp_path / "work"), progress=False)
    head, card = train(pair, cfg, tiny_items(6), tiny_items(2))
    assert card["steps"] == 4 and card["lambda"] == 1.0 and len(card["history"]) == 2
    assert card["history"][-1]["train_mean_w"] < 0.45
    assert 0.0 <= card["results"]["acceptance_rate"] <= 1.0 and "quality" in card["results"]
    assert {"data", "draft_hidden", "target_hidden", "draft_sha256", "training"} <= set(card)
    assert (tmp_path / "work" / "checkpoint.pt").exists()
    assert card["lossless_heldout"]["acceptance_rate"] >= 0 and card["selected_epoch"] in (1, 2) and card["selection"]
    head2, card2 = train(pair, cfg, tiny_items(6), tiny_items(2))  # resumes: nothing left to do
    assert card2["steps"] == 4
    assert torch.equal(head2.linear.weight, head.linear.weight)
    save_asset(head.tensors(), "tiny", card, tmp_path)
    assert json.loads((tmp_path / "tiny.json").read_text())["sha256"] == file_sha256(tmp_path / "tiny.safetensors")


def test_freeze_bias_centres_the_inputs_and_keeps_the_mean_w(tmp_path):
    """--freeze-bias: the inputs are centred on the first batch and only the weights train, so the bias (the mean
    logit) stays at logit(init_w) while λ moves w_t token by token; the centre travels with the asset."""
    pair = make_tiny_pair()
    cfg = TrainConfig(
        epochs=1,
        batch_size=3,
        lam=1.0,
        lr=0.05,
        init_w=0.7,
        freeze_bias=True,
        work_dir=str(tmp_path / "work"),
        progress=False,
    )
    head, card = train(pair, cfg, tiny_items(6), [])
    assert float(head.linear.bias.detach()) == pytest.approx(float(torch.logit(torch.tensor(0.7))), abs=1e-6)
    assert head.center.abs().sum() > 0 and head.linear.weight.abs().sum() > 0
    save_asset(head.tensors(), "tiny", card, tmp_path)
    tensors, _ = load_asset("tiny", tmp_path, "ensemble head", "")
    again = head_from_tensors(tensors, head.draft_hidden, head.target_hidden)
    d, t = torch.randn(5, head.draft_hidden), torch.randn(5, head.target_hidden)
    assert torch.allclose(again(d, t), head(d, t), atol=0.02)  # the asset stores bf16
    old = {k: v for k, v in tensors.items() if k != "center"}  # a head saved before the centre existed
    assert torch.equal(
        head_from_tensors(old, head.draft_hidden, head.target_hidden).center, torch.zeros_like(head.center)
    )


def test_model_selection_keeps_the_best_epoch_that_accepts_enough():
    from spec_core.train.diversed import select_epoch

    h = lambda q, a: {"heldout": {"quality": q, "acceptance_rate": a}}  # noqa: E731
    history = [h(0.30, 0.26), h(0.46, 0.19), h(0.50, 0.16), h(0.38, 0.18)]
    assert select_epoch(history, 0.15, 1.2)[0] == 1  # epoch 3 has the best quality but accepts only 1.07×
    assert select_epoch(history, 0.15, 0.0) == (3, "the last epoch")
    idx, why = select_epoch(history, 0.25, 1.2)
    assert idx == 3 and "none accepted" in why
    assert select_epoch(history, None, 1.2)[0] == 3


def test_validation_items_come_from_the_train_split_and_are_never_rolled_out():
    from spec_core.train.diversed import split_train_val

    rolled, val = split_train_val(TASKS, train_per_task=0, val_per_task=4)
    assert len(val) == 4 * len(TASKS) and {i.split for i in rolled + val} == {"train"}
    assert not {i.id for i in rolled} & {i.id for i in val}
    assert len(rolled) + len(val) == len(load_items("train"))
    for task in TASKS:  # the validation items are the last of each task
        assert [i.id for i in val if i.task == task] == [i.id for i in load_items("train", (task,))[-4:]]
    assert len(split_train_val(TASKS, train_per_task=2, val_per_task=4)[0]) == 2 * len(TASKS)
    with pytest.raises(SpecScopeError, match="leaves no"):
        split_train_val(("summary",), val_per_task=1000)


@pytest.mark.parametrize("norm", ["none", "batch"])
def test_group_rollouts_use_the_leave_one_out_baseline(tmp_path, monkeypatch, norm):
    """With --group 3 every item is rolled out 3 times with distinct seeds, and each rollout's advantage is its
    reward minus the mean of the item's other two; --advantage-norm batch then normalises them over the batch."""
    import spec_core.train.diversed as td

    rewards = iter([1.0, 0.0, 0.5, 0.2, 0.2, 0.2])
    seeds, advantages = [], []
    real_rollout, real_surrogate = td.rollout, td.clipped_surrogate

    def fake_rollout(pair, head, item, cfg, seed, temperature):
        seeds.append(seed)
        _, rec, text = real_rollout(pair, head, item, cfg, seed, temperature)
        assert rec is not None
        return next(rewards), rec, text

    def spy_surrogate(logp, logp_old, advantage, eps):
        advantages.append(advantage)
        assert torch.equal(logp.detach(), logp_old)  # one update per batch: the ratio is exactly 1
        return real_surrogate(logp, logp_old, advantage, eps)

    monkeypatch.setattr(td, "rollout", fake_rollout)
    monkeypatch.setattr(td, "clipped_surrogate", spy_surrogate)
    cfg = TrainConfig(
        epochs=1, batch_size=2, group=3, lam=0.0, advantage_norm=norm, work_dir=str(tmp_path / "w"), progress=False
    )
    head, card = td.train(make_tiny_pair(), cfg, tiny_items(2), [])
    assert len(seeds) == 6 and len(set(seeds)) == 6 and card["steps"] == 1
    # rollouts come item by item: (1, 0, .5) → A = 1 − .25, 0 − .75, .5 − .5; (.2, .2, .2) → A = 0
    raw = [0.75, -0.75, 0.0, 0.0, 0.0, 0.0]
    std = (2 * 0.75**2 / 6) ** 0.5  # the batch's mean is 0 (leave-one-out advantages sum to 0 per item)
    assert advantages == pytest.approx(raw if norm == "none" else [a / std for a in raw])


def test_normalised_advantages():
    from spec_core.train.diversed import normalise_advantages

    a = normalise_advantages(torch.tensor([3.0, 1.0, 2.0, 2.0]))
    assert float(a.mean()) == pytest.approx(0.0, abs=1e-7) and float(a.std(unbiased=False)) == pytest.approx(1.0)
    assert a.tolist() == pytest.approx([2**0.5, -(2**0.5), 0.0, 0.0])
    assert normalise_advantages(torch.tensor([0.4, 0.4])).tolist() == [0.0, 0.0]  # nothing tells them apart
    assert normalise_advantages(torch.tensor([5.0])).tolist() == [0.0]


def test_clipped_surrogate():
    """At ratio 1 the gradient is REINFORCE's, A·∇Σ logp; past 1 ± ε in the advantage's direction the decision
    gets no gradient, against it the gradient stays; ε = 0 is the plain ratio."""
    from spec_core.train.diversed import clipped_surrogate

    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    logp = torch.log(torch.sigmoid(theta))  # three decisions' log-probabilities

    def grad(old, a, eps):
        (g,) = torch.autograd.grad(clipped_surrogate(logp, old, a, eps), theta, retain_graph=True)
        return g

    (reinforce,) = torch.autograd.grad(1.5 * logp.sum(), theta, retain_graph=True)
    assert torch.allclose(grad(logp.detach(), 1.5, 0.2), reinforce)
    shift = torch.tensor([0.5, 0.0, -0.5])  # ratios e^0.5 > 1.2, 1, e^−0.5 < 0.8
    g_pos, g_neg = grad(logp.detach() - shift, 1.0, 0.2), grad(logp.detach() - shift, -1.0, 0.2)
    assert g_pos[0] == 0 and g_pos[1] != 0 and g_pos[2] != 0  # A > 0: a ratio above 1 + ε stops
    assert g_neg[2] == 0 and g_neg[1] != 0 and g_neg[0] != 0  # A < 0: a ratio below 1 − ε stops
    assert (grad(logp.detach() - shift, 1.0, 0.0) != 0).all()  # ε = 0: no clip
    value = clipped_surrogate(logp, logp.detach() - shift, 1.0, 0.2)
    assert float(value.detach()) == pytest.approx(1.2 + 1.0 + float(torch.exp(torch.tensor(-0.5))))


def test_update_head_steps_clips_and_reuses_the_rollout_ratio(monkeypatch):
    """update_head: the first of --updates steps has ratio 1 and the REINFORCE gradient; later steps see the
    moved head's ratio; --max-grad-norm bounds each step (plain SGD, lr 1, makes the step the gradient)."""
    import spec_core.train.diversed as td

    g = torch.Generator().manual_seed(0)
    n = 6
    rec = {
        "draft_hidden": torch.randn(n, 8, generator=g),
        "target_hidden": torch.randn(n, 8, generator=g),
        "accepted": torch.tensor([True, True, False, True, False, True]),
        "p_x": torch.tensor([0.5, 0.3, 0.1, 0.6, 0.2, 0.4]),
        "q_x": torch.tensor([0.2, 0.3, 0.6, 0.1, 0.5, 0.3]),
        "p_y": torch.tensor([0.5, 0.3, 0.7, 0.6, 0.6, 0.4]),
        "q_y": torch.tensor([0.2, 0.3, 0.1, 0.1, 0.2, 0.3]),
        "tv": torch.tensor([0.4, 0.2, 0.6, 0.5, 0.4, 0.3]),
    }

    def run(updates, max_norm, advantage=2.0):
        head = EnsembleHead(8, 8)
        with torch.no_grad():
            head.linear.weight.normal_(0, 0.3, generator=g)
        start = {k: v.clone() for k, v in head.state_dict().items()}
        opt = torch.optim.SGD(head.parameters(), lr=1.0)
        cfg = TrainConfig(lam=0.0, updates=updates, max_grad_norm=max_norm, clip_eps=0.2)
        ratios = []
        real = td.clipped_surrogate
        monkeypatch.setattr(
            td,
            "clipped_surrogate",
            lambda lp, old, a, eps: ratios.append((lp.detach() - old).exp()) or real(lp, old, a, eps),
        )
        loss = td.update_head(head, opt, [(rec, advantage), (None, 0.0)], cfg)
        return head, start, ratios, loss

    head, start, ratios, loss = run(1, 0.0)
    probe = EnsembleHead(8, 8)
    probe.load_state_dict(start)
    (reinforce,) = torch.autograd.grad(-2.0 * loss_terms(probe, rec)[0].sum() / 2, probe.linear.weight)  # / batch of 2
    assert torch.allclose(start["linear.weight"] - head.linear.weight.detach(), reinforce, atol=1e-6)
    assert len(ratios) == 1 and torch.equal(ratios[0], torch.ones(n))
    head, start, ratios, _ = run(3, 0.0)
    assert len(ratios) == 3 and not torch.allclose(ratios[1], torch.ones(n))  # the head moved between steps
    head, start, _, _ = run(1, 1e-3)
    step = torch.cat([(head.state_dict()[k] - start[k]).flatten() for k in ("linear.weight", "linear.bias")])
    assert float(step.norm()) == pytest.approx(1e-3, rel=1e-4)  # the gradient is larger: clipped to the norm
    assert td.update_head(head, torch.optim.SGD(head.parameters(), lr=1.0), [(None, 1.0)], TrainConfig()) is None


def test_training_at_temperature_zero_needs_the_gaussian_estimator(tmp_path):
    """The argmax rule is deterministic: a decision score would be zero, so temperature 0 is refused unless the
    rollouts explore w_t (``--estimator gaussian --explore σ``)."""
    with pytest.raises(SpecScopeError, match="argmax rule is deterministic"):
        train(make_tiny_pair(), TrainConfig(temperature=0.0, work_dir=str(tmp_path)), tiny_items(2), [])
    with pytest.raises(SpecScopeError, match="give --explore"):
        cfg = TrainConfig(temperature=0.0, estimator="gaussian", work_dir=str(tmp_path))
        train(make_tiny_pair(), cfg, tiny_items(2), [])


def test_training_at_temperature_zero_explores_and_moves_the_head(tmp_path):
    """Gaussian exploration at temperature 0: the rollouts record the perturbed logits z_t, the rollouts of one
    item differ (the noise changes the argmax rule's decisions), and training moves the head's weights."""
    pair = make_tiny_pair()
    cfg = TrainConfig(
        temperature=0.0,
        estimator="gaussian",
        explore=2.0,
        epochs=1,
        batch_size=3,
        group=2,
        lam=1.0,
        lr=0.05,
        work_dir=str(tmp_path / "work"),
        progress=False,
    )
    head = EnsembleHead(*pair_hidden_sizes(pair))
    _, rec, _ = rollout(pair, head, tiny_items(1)[0], cfg, seed=3, temperature=0.0)
    assert rec is not None and rec["z"].shape == rec["tv"].shape
    assert not torch.allclose(rec["z"], head.logit(rec["draft_hidden"], rec["target_hidden"]))  # noise was added
    trained, card = train(pair, cfg, tiny_items(6), tiny_items(2))
    assert card["steps"] == 2 and card["training"]["estimator"] == "gaussian"
    assert trained.linear.weight.abs().sum() > 0  # zero-initialised weights moved


# -- the shipped head ------------------------------------------------------------------------------------------


def test_shipped_head_matches_its_card_and_the_embedded_draft():
    card = json.loads((HEADS_DIR / "diversed.json").read_text())
    assert file_sha256(HEADS_DIR / card["weights"]) == card["sha256"]
    draft_card = json.loads((ROOT / "assets" / "drafts" / "feature.json").read_text())
    assert card["draft_sha256"] == draft_card["sha256"]
    assert card["steps"] > 0 and "lambda" in card and card["results"]


@pytest.mark.slow
def test_shipped_head_loads_and_runs_on_the_embedded_pair(embedded_f32):
    out = generate(embedded_f32, "What is 3 + 4?", "fixed:4+diversed", 12)
    ws = [w for e in out.events for w in e.verifier_trace.get("w", [])]
    assert ws and all(0.0 <= w <= 1.0 for w in ws)


# -- rewards and the evaluation suite ------------------------------------------------------------------------


def test_rewards():
    assert last_integer("7 * 4 = 28.") == 28 and last_integer("no number") is None
    assert arithmetic_reward("To solve this: 12 + 30 = 42", "42") == 1.0
    assert arithmetic_reward("The answer is 41", "42") == 0.0
    assert arithmetic_reward("1,200", "1200") == 1.0
    assert rouge2("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert rouge2("dogs run fast", "the cat sat on the mat") == 0.0
    assert 0.0 < rouge2("the cat sat on a chair", "the cat sat on the mat") < 1.0
    assert extraction_reward("The email is  Anna.Berg@mail.org.", "anna.berg@mail.org") == 1.0
    assert extraction_reward("Anna", "Anna Berg") == 0.0
    with pytest.raises(SpecScopeError, match="unknown task"):
        reward("poetry", "x", "y")


def test_eval_suite_splits_and_references():
    train_items, eval_items = load_items("train"), load_items("eval")
    assert not {i.id for i in train_items} & {i.id for i in eval_items}
    for task in TASKS:
        n_train = sum(i.task == task for i in train_items)
        n_eval = sum(i.task == task for i in eval_items)
        assert n_train >= 20 and n_eval >= 10, task
    for item in train_items + eval_items:  # every reference earns the full reward
        assert reward(item.task, item.reference, item.reference) == pytest.approx(1.0), item.id
    assert len(load_items("eval", ("summary",), per_task=3)) == 3
    with pytest.raises(SpecScopeError, match="split"):
        load_items("test")


# -- Pareto helpers --------------------------------------------------------------------------------------------


def test_interpolate_frontier():
    static = pd.DataFrame({"acceptance_rate": [0.2, 0.6, 1.0], "quality": [0.4, 0.3, 0.0]})
    assert sweeps.interpolate_frontier(static, 0.4) == pytest.approx(0.35)
    assert sweeps.interpolate_frontier(static, 0.8) == pytest.approx(0.15)
    assert math.isnan(sweeps.interpolate_frontier(static, 0.1))


def test_task_mix_envelope_picks_a_weight_per_task(tmp_path):
    """Two tasks, two weights: 'a' loses nothing at W = 0, 'b' everything. The per-task mix (a=0, b=1) reaches
    acceptance (8 + 1) / (10 + 10) at quality 1, which no single W does."""

    def rec(task, w, accepted, reward, n):
        return {
            "id": f"{task}{n}",
            "task": task,
            "method": f"fixed:4+static:{w}",
            "reward": reward,
            "drafted": 5,
            "accepted": accepted,
        }

    rows = [rec("arithmetic", 0, 4, 1.0, n) for n in range(2)] + [rec("arithmetic", 1, 1, 1.0, n) for n in range(2)]
    rows += [rec("summary", 0, 4, 0.0, n) for n in range(2)] + [
        rec("summary", 1, 0, 1.0, 0),
        rec("summary", 1, 1, 1.0, 1),
    ]
    path = tmp_path / "sweep.items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = pareto.task_mix_envelope([path])
    # (a=1, b=1) at 3/20 and (a=1, b=0) at 10/20 are beaten on both axes, so only two points remain
    assert list(env["weights"]) == ["arithmetic=0 summary=1", "arithmetic=0 summary=0"]
    assert env["acceptance_rate"].tolist() == pytest.approx([9 / 20, 16 / 20])
    assert env["quality"].tolist() == pytest.approx([1.0, 0.5])
    assert pareto.envelope_quality(env, 0.3) == 1.0 and pareto.envelope_quality(env, 0.6) == 0.5
    assert math.isnan(pareto.envelope_quality(env, 0.9))
    with pytest.raises(SpecScopeError, match="no lenient"):
        pareto.task_mix_envelope([path], family="lenient")


def test_round_numbers_and_summary_on_a_tiny_run():
    pair = make_tiny_pair()
    out = generate(pair, "pareto", "fixed:4+static:0.6", 30, temperature=1.0, seed=4, chat=False)
    nums = round_numbers(out.events)
    drafted = [e for e in out.events if e.draft_len]
    assert nums["measured"] == [e.accepted for e in drafted]
    for e, exp, rb in zip(drafted, nums["expected"], nums["rb"]):
        a = e.verifier_trace["expected_accept"]
        want = sum(math.prod(a[: k + 1]) for k in range(len(a)))
        assert exp == pytest.approx(want) and 0 <= rb <= e.draft_len
    assert nums["w"] and all(w == pytest.approx(0.6) for w in nums["w"])
    config = pareto.Config("static", "0.6", "static:0.6")
    rec = {
        "task": "summary",
        "reward": 0.5,
        "new_tokens": 30,
        "forwards": out.stats.target_forwards,
        "wall_s": 1.0,
        "verify_s": 0.5,
        "rounds": nums,
    }
    row = pareto.summarise(config, "fixed:4", 1.0, [rec])
    assert row["acceptance_rate"] == pytest.approx(out.stats.acceptance_rate)
    assert row["tau"] == pytest.approx(out.stats.tau) and row["quality"] == 0.5
    assert set(pareto.COLUMNS) == set(row)


def test_pareto_workers_give_the_table_of_one_process(tmp_path):
    """Items shared among worker processes (each loads its own pair) give the same table as one process: item n
    always runs with seed + n, whichever worker takes it."""
    import functools

    from spec_core.engine.rewards import EvalItem

    items = [
        EvalItem(f"x{n}", task, "eval", f"tiny prompt {n}", "1" if task == "arithmetic" else "b", 12)
        for n, task in enumerate(["arithmetic", "summary", "extraction", "arithmetic"])
    ]
    configs = [pareto.Config("lossless", "", "lossless"), pareto.Config("static", "0.5", "static:0.5")]
    load = functools.partial(make_tiny_pair, draft="feature")
    tables = {
        w: pareto.run_pareto(
            load, configs, items, "fixed:3", 1.0, 7, tmp_path / f"w{w}.jsonl", progress=False, workers=w
        )
        for w in (1, 2)
    }
    cols = ["method", "param", "acceptance_rate", "quality", "tau", "measured_accepted", "expected_accepted"]
    assert tables[1][cols].equals(tables[2][cols])
    assert (tables[1]["items"] == 4).all() and len((tmp_path / "w2.jsonl").read_text().splitlines()) == 8
    with pytest.raises(SpecScopeError, match="loader"):
        pareto.run_pareto(load(), configs, items, "fixed:3", 1.0, 7, progress=False, workers=2)


def test_default_configs_cover_the_sweep():
    configs = pareto.default_configs("argmax", "diversed")
    kinds = [c.method for c in configs]
    assert kinds.count("static") == 11 and kinds.count("lenient") == 3 and kinds[0] == "lossless"
    assert configs[-1].verifier == "diversed:head=diversed"
    assert pareto.default_configs("onehot", None)[1].verifier == "lenient:0.3,t0=onehot"
    from spec_core.engine.methods import parse_method

    for c in pareto.default_configs("onehot", "diversed"):
        parse_method(c.full("fixed:4"))


# -- visuals ---------------------------------------------------------------------------------------------------


def test_weights_view_and_rules_are_registered_and_drawn_from_events():
    from visuals import views
    from visuals.diversed import pareto_figure

    pair = make_tiny_pair()
    head = EnsembleHead(32, 32)
    with torch.no_grad():
        head.linear.weight.normal_(0, 0.5)
    pair.extras["diversed-head:diversed"] = pair.extras["diversed-head:diversed-sampled"] = (head, {})
    lanes = {
        m: list(generate(pair, "lanes", m, 16, temperature=1.0, seed=1, chat=False).events)
        for m in ("fixed:4+diversed", "fixed:4+static:0.7", "fixed:4")
    }
    view = next(v for v in views.views_for(["fixed:4+diversed"]) if v.key == "ensemble_weights")
    fig = views.build(view, lanes)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == set(lanes)  # the fixed:4 (lossless) lane rides along as the baseline
    assert list(by_name["fixed:4+static:0.7"].y) == pytest.approx([0.7] * len(by_name["fixed:4+static:0.7"].y))
    assert set(by_name["fixed:4"].y) == {1.0}
    ws = [w for e in lanes["fixed:4+diversed"] for w in e.verifier_trace.get("w", [])]
    assert list(by_name["fixed:4+diversed"].y) == pytest.approx(ws) and len(set(ws)) > 1
    assert "ν(x)" in by_name["fixed:4+diversed"].hovertemplate
    assert "Static ensemble" in views.explain("fixed:4+static:0.7", 1.0)
    assert "DIVERSED" in views.explain("heuristic+diversed", 0.0) and "Lenient" in views.explain("lenient:0.5", 0.0)
    df = pd.DataFrame(
        {
            "method": ["lossless", "static", "static", "lenient", "diversed"],
            "param": ["", "1", "0", "0.5", "diversed"],
            "acceptance_rate": [0.2, 0.2, 1.0, 0.5, 0.6],
            "quality": [0.4, 0.4, 0.0, 0.2, 0.35],
        }
    )
    fig = pareto_figure(df)
    static = next(t for t in fig.data if t.name.startswith("static"))
    assert list(static.x) == [0.2, 1.0] and {t.name for t in fig.data} >= {"lossless", "lenient", "diversed"}


def test_with_frontier_and_interleave():
    df = pd.DataFrame(
        {
            "method": ["lossless", "static", "static", "diversed"],
            "param": ["", "1", "0", "d"],
            "acceptance_rate": [0.2, 0.2, 1.0, 0.3],
            "quality": [0.4, 0.4, 0.0, 0.42],
        }
    )
    out = sweeps.with_frontier(df)
    row = out[out["method"] == "diversed"].iloc[0]
    assert row["frontier_quality"] == pytest.approx(0.35) and row["above_frontier"] == pytest.approx(0.07)
    assert row["acceptance_vs_lossless"] == pytest.approx(1.5)
    items = load_items("eval", per_task=2)
    assert [i.task for i in pareto.interleave(items)] == list(TASKS) * 2


def test_shipped_sweeps_load_into_the_analyzer_panel(tmp_path):
    """The analyzer's Pareto panel: every shipped sweep reads, with the frontier and a sentence; bad CSVs are
    clear errors."""
    from spec_core.serve.sweeps import read_sweep, shipped_sweeps
    from visuals.diversed import sweep_view

    sweeps = shipped_sweeps()
    assert {"temperature 0", "temperature 1"} <= set(sweeps)
    for path in sweeps.values():
        df = read_sweep(path)
        assert {"frontier_quality", "above_frontier"} <= set(df.columns)
        text, fig = sweep_view(df)
        assert "static frontier" in text and "Target alone" in text and "DIVERSED" in text
        assert any(t.name == "static W (frontier)" for t in fig.data)
    rows = "method,param,acceptance_rate,quality\nstatic,0,1.0,0.0\nstatic,1,0.2,0.5\ndiversed,,0.6,0.4\n"
    (tmp_path / "mine.csv").write_text(rows)
    mine = read_sweep(tmp_path / "mine.csv")
    assert mine.loc[mine["method"] == "diversed", "frontier_quality"].iloc[0] == pytest.approx(0.25)
    assert "above the static frontier" in sweep_view(mine)[0]
    assert "dashed line" not in sweep_view(mine)[0]
    (tmp_path / "mix.csv").write_text(rows + "task-static,arithmetic=0 summary=1,0.7,0.45\n")
    text, fig = sweep_view(read_sweep(tmp_path / "mix.csv"))  # the per-task envelope: drawn and told
    assert "dashed line" in text and "quality 0.450" in text
    assert [t.name for t in fig.data if t.name == "static, W chosen per task"] and "static W (frontier)" in [
        t.name for t in fig.data
    ]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SpecScopeError, match="missing column"):
        read_sweep(tmp_path / "bad.csv")
    (tmp_path / "one.csv").write_text("method,param,acceptance_rate,quality\nstatic,0,1.0,0.0\n")
    with pytest.raises(SpecScopeError, match="two static"):
        read_sweep(tmp_path / "one.csv")
    with pytest.raises(SpecScopeError, match="could not read"):
        read_sweep(tmp_path / "absent.csv")


def test_the_pareto_panel_names_each_head():
    """With two DIVERSED rows (the greedy head and the sampled one) each point is labelled by its head and the
    sentence describes the shipped greedy head first, then the other."""
    from spec_core.serve.sweeps import read_sweep
    from visuals.diversed import pareto_figure, point_label, sweep_summary

    df = read_sweep(ROOT / "assets" / "results" / "pareto_t0.csv")
    assert set(df.loc[df["method"] == "diversed", "param"]) == {"diversed", "diversed-sampled"}
    text = sweep_summary(df)
    assert text.index("head diversed.") < text.index("With the head diversed-sampled:")
    labels = next(t for t in pareto_figure(df).data if t.name == "diversed").text
    assert sorted(labels) == ["diversed", "diversed-sampled"]
    assert point_label("diversed", "mine") == "diversed:head=mine" and point_label("lenient", "0.5") == "lenient:0.5"


def test_a_short_training_run_writes_a_card_that_names_what_it_ran(tmp_path):
    """Every card field comes from the run: the estimator, the rule, the temperatures it was rolled out and chosen
    at, the split sizes, the selection metric, the commit, and how often REINFORCE++'s clip bound."""
    pair = make_tiny_pair()
    cfg = TrainConfig(
        temperatures="0.5,1",
        epochs=1,
        batch_size=2,
        group=2,
        updates=3,
        lr=0.05,
        work_dir=str(tmp_path / "work"),
        progress=False,
    )
    _, card = train(pair, cfg, tiny_items(4), tiny_items(2))
    assert card["training"]["estimator"] == "decision" and card["training"]["rule"] == "sampled"
    assert card["training"]["temperature_grid"] == [0.5, 1.0] and card["serves"] == "temperatures 0.5–1"
    assert card["data"]["train_items"] == 4 and card["data"]["val_items"] == 2
    assert "validation quality" in card["selection_metric"] and card["commit"]
    assert 0.0 <= card["history"][0]["train_clipped"] <= 1.0
    with pytest.raises(SpecScopeError, match="must be > 0"):
        train(pair, TrainConfig(temperatures="0,1", work_dir=str(tmp_path / "w2")), tiny_items(2), [])


def test_every_shipped_diversed_card_names_its_estimator_and_the_sampled_head_its_temperatures():
    """The cards say how their heads were trained: the estimator always; the sampled head was trained with the
    unbiased decision score at the temperatures it serves (T > 0), its fields written by the trainer."""
    from spec_core.train.diversed import ESTIMATORS

    cards = [json.loads(p.read_text()) for p in HEADS_DIR.glob("*.json")]
    cards = [c for c in cards if c.get("kind") == "diversed-ensemble-head"]
    assert {c["name"] for c in cards} >= {"diversed", "diversed-sampled"}
    assert all(c["training"]["estimator"] in ESTIMATORS for c in cards)
    sampled = next(c for c in cards if c["name"] == "diversed-sampled")
    assert sampled["training"]["estimator"] == "decision" and sampled["rule"] == "sampled"
    assert min(sampled["training"]["temperature_grid"]) > 0 and sampled["serves"].startswith("temperature")
    assert sampled["commit"] and sampled["selection_metric"] and sampled["ships_for"]
