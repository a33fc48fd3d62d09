"""PACER's threshold tuned to the machine's costs (spec_core/policies/pacer_tuning.py)."""

from __future__ import annotations

import pytest
import torch

from spec_core.core.cost_model import CostProfile
from spec_core.policies import pacer_tuning as tuning
from spec_core.policies.pacer import PacerParams


def synthetic_rounds(n: int = 400, seed: int = 0) -> tuning.TuningRounds:
    """Rounds of 8 drafts whose predicted cumulative acceptance â is calibrated: the round keeps token i with
    probability â_i / â_{i−1}, so the recorded counts agree with the predictions."""
    g = torch.Generator().manual_seed(seed)
    preds, accepted = [], []
    for _ in range(n):
        first = float(torch.rand((), generator=g)) * 0.9 + 0.05
        decay = float(torch.rand((), generator=g)) * 0.5 + 0.4
        a = torch.tensor([first * decay**i for i in range(8)])
        keep, prev = 0, 1.0
        for i in range(8):
            if float(torch.rand((), generator=g)) < float(a[i]) / prev:
                keep, prev = i + 1, float(a[i])
            else:
                break
        preds.append(a)
        accepted.append(keep)
    return tuning.TuningRounds(torch.full((n,), 8), torch.tensor(accepted), {"h@b1": torch.cat(preds)}, {"rounds": n})


def test_flat_verification_costs_tune_a_lower_threshold_than_steep_ones():
    """Where a wider pass costs about one step (bf16 units, a GPU), drafting on is cheap and a low t wins; where
    a pass over k tokens costs k steps, a high t does."""
    rounds = synthetic_rounds()
    widths = (1, 2, 4, 8, 16)
    flat = CostProfile(widths=widths, target_ms=(50.0, 51.0, 52.0, 54.0, 58.0), draft_ms=2.0, engine_ms=0.2)
    steep = CostProfile(widths=widths, target_ms=(50.0, 100.0, 200.0, 400.0, 800.0), draft_ms=2.0, engine_ms=0.2)
    t_flat, s_flat = tuning.tune(rounds, "h@b1", PacerParams(), flat)
    t_steep, s_steep = tuning.tune(rounds, "h@b1", PacerParams(), steep)
    assert t_flat < t_steep
    assert s_flat > s_steep
    # the tuned t is the grid's best: no other t replays faster
    for t in tuning.THRESHOLDS:
        other = PacerParams(threshold=t)
        assert tuning.replayed_speedup(rounds, "h@b1", other, flat) <= s_flat + 1e-12


def test_replayed_speedup_prices_each_round_by_the_cost_model():
    """Two rounds by hand: t = 1 stops after one draft in both; ms = 2 rounds of (1 draft + a 2-token pass)."""
    rounds = tuning.TuningRounds(
        torch.tensor([2, 2]), torch.tensor([1, 0]), {"k": torch.tensor([0.9, 0.8, 0.1, 0.05])}, {}
    )
    costs = CostProfile(widths=(1, 2, 4), target_ms=(10.0, 12.0, 15.0), draft_ms=1.0, engine_ms=0.0)
    got = tuning.replayed_speedup(rounds, "k", PacerParams(threshold=1.0), costs)
    tokens = (1 + 1) + (0 + 1)  # kept drafts + the target's token, per round
    assert abs(got - 10.0 * tokens / (2 * (1.0 + 12.0))) < 1e-9


def test_machine_threshold_says_why_it_keeps_the_shipped_t(tiny_pair):
    """A pair with no recorded rounds for its head (the tiny test pair) keeps the shipped t and says so."""
    t, why = tuning.machine_threshold(tiny_pair, PacerParams(auto_t=True), "no-such-head", None)
    assert t == tuning.SHIPPED_THRESHOLD and "shipped" in why and "no recorded rounds" in why


def test_the_shipped_rounds_match_the_shipped_heads_and_draft():
    """The recorded rounds were scored by the heads that ship now (a retrained head must be scored again:
    ``python -m spec_core.analysis.pacer_rounds SHARDS``), with the draft that ships."""
    import json

    from spec_core.core.assets import DRAFTS_DIR, HEADS_DIR, file_sha256

    rounds = tuning.load_rounds("feature")
    assert rounds is not None and len(rounds.gamma) > 1000
    assert rounds.card["draft_sha256"] == json.loads((DRAFTS_DIR / "feature.json").read_text())["sha256"]
    for head, sha in rounds.card["heads"].items():
        assert file_sha256(HEADS_DIR / f"{head}.safetensors") == sha
        for b in rounds.card["blocks"]:
            assert rounds.predicted[tuning.prediction_key(head, b)].shape[0] == int(rounds.gamma.sum())
    assert int(rounds.accepted.max()) <= 8 and bool((rounds.accepted <= rounds.gamma).all())


def test_pacer_on_the_embedded_pair_tunes_t_to_the_machines_costs(embedded_f32, monkeypatch):
    """``pacer`` (t=auto) on the embedded pair: flat verification costs tune a lower t than steep ones, the
    policy's trace says which and why, and ``pacer:t=0.6`` keeps its t."""
    from spec_core.policies.pacer import PacerLength, parse_params

    widths = (1, 2, 4, 8, 16)
    table = {
        "flat": CostProfile(widths=widths, target_ms=(50.0, 51.0, 52.0, 54.0, 58.0), draft_ms=4.0, engine_ms=0.3),
        "steep": CostProfile(widths=widths, target_ms=(50.0, 95.0, 190.0, 380.0, 760.0), draft_ms=4.0, engine_ms=0.3),
    }

    def forget_tuned_t():  # the pair caches a tuned t per head, b, ρ, max and precision
        for key in [k for k in embedded_f32.extras if str(k).startswith(tuning.TUNED_KEY)]:
            del embedded_f32.extras[key]

    chosen = {}
    for name, profile in table.items():
        forget_tuned_t()
        policy = PacerLength.build(parse_params(None), embedded_f32, costs=profile)
        chosen[name] = policy.params.threshold
        assert "tuned to the costs of" in policy.threshold_note and policy.trace()["threshold0"] == chosen[name]
    assert chosen["flat"] < chosen["steep"]
    fixed = PacerLength.build(parse_params("t=0.6"), embedded_f32)
    assert fixed.params.threshold == 0.6 and fixed.threshold_note == "t = 0.6, as given"
    forget_tuned_t()


def test_the_rounds_writer_scores_simulated_rounds_with_the_shipped_heads(embedded_f32, tmp_path):
    """Simulate two short prompts, score them with the shipped heads, read the asset back: every head and block
    size has one â per drafted token, and the card names the heads' sha256 (what ``t=auto`` checks)."""
    from spec_core.analysis.pacer_rounds import write_rounds
    from spec_core.train.pacer import SimConfig, simulate

    cfg = SimConfig(tmp_path / "feature", 2, shard_size=1, max_new_tokens=12, prompts=("Name three colours.", "Hi!"))
    simulate(embedded_f32, cfg, progress=False)
    path = write_rounds(cfg.out_dir, embedded_f32, tmp_path / "out", blocks=(1, 2))
    rounds = tuning.load_rounds(embedded_f32.draft_design, path.parent)
    assert rounds is not None and rounds.card["rounds"] == len(rounds.gamma) > 0
    assert set(rounds.card["heads"]) == {"pacer-feature", "pacer-feature-paper"}
    for head in rounds.card["heads"]:
        for b in (1, 2):
            values = rounds.predicted[tuning.prediction_key(head, b)]
            assert values.shape[0] == int(rounds.gamma.sum()) and bool(((values >= 0) & (values <= 1)).all())


def test_the_rounds_writer_leaves_out_prompts_a_shipped_head_trained_on(embedded_f32, tmp_path):
    """The shipped rounds back the head comparison, so every round must be held out: rounds of a prompt in a shipped
    head's training split (found by text: the lists overlap) are left out, and the card says how many."""
    import json

    from spec_core.analysis.pacer_rounds import write_rounds
    from spec_core.train.pacer import SimConfig, load_data, simulate, simulation_prompt_texts, trained_prompt_texts

    cfg = SimConfig(tmp_path / "feature", 8, max_new_tokens=6)  # the training lists: the heads' seed, 8 prompts
    simulate(embedded_f32, cfg, progress=False)
    heads = [json.loads((tuning.HEADS_DIR / f"{n}.json").read_text()) for n in ("pacer-feature", "pacer-feature-paper")]
    trained = set().union(*(trained_prompt_texts(c) for c in heads))
    texts = simulation_prompt_texts(json.loads((cfg.out_dir / "config.json").read_text()))
    data = load_data(sorted(cfg.out_dir.glob("shard_*.safetensors")))
    seen = torch.tensor([texts[int(i)] in trained for i in data["round_prompt"]])
    assert seen.any() and not seen.all()  # the case this guards against really occurs
    path = write_rounds(cfg.out_dir, embedded_f32, tmp_path / "out", blocks=(1,))
    rounds = tuning.load_rounds(embedded_f32.draft_design, path.parent)
    assert len(rounds.gamma) == int((~seen).sum()) and rounds.card["left_out"].startswith(f"{int(seen.sum())} rounds")
    assert rounds.gamma.tolist() == data["round_gamma"][~seen].tolist()


def test_the_head_comparison_on_a_prompt_files_own_rounds(tmp_path, capsys):
    """``analyze heads --prompts``: the embedded pair drafts fixed:8 over the file's prompts, the shipped heads score
    the rounds, and the rows are priced at the shipped rounds' head prices (no clock: a rerun prints the same
    table). A perfect pre-verifier is never beaten by a fixed window on the same rounds, nor the oracle by it."""
    from spec_core.analysis import heads

    prompts = tmp_path / "own.jsonl"
    prompts.write_text(
        '{"id": "a", "prompt": "Name three colours of the rainbow."}\n'
        '{"id": "b", "prompt": "Write a Python function that adds two numbers."}\n',
        encoding="utf-8",
    )
    table = "assets/results/costs/epyc-zen4-avx512-1thread.json"
    argv = ["--prompts", str(prompts), "--max-new-tokens", "12", "--costs", table, "--work-dir", str(tmp_path / "w")]
    assert heads.main(argv) == 0
    first = capsys.readouterr().out
    rounds = tuning.load_rounds("feature", tmp_path / "w")
    assert rounds is not None and f"{len(rounds.gamma):,} rounds of fixed:8 (greedy, int8) on 2 prompts" in first
    assert rounds.card["head_ms"] == tuning.load_rounds("feature").card["head_ms"]  # priced, not timed here
    assert int(rounds.gamma.max()) <= 8 and bool((rounds.accepted <= rounds.gamma).all())
    rows = [line.split("|") for line in first.splitlines() if line.count("|") > 3][2:]  # below the header
    speed = {cells[1].strip(): float(cells[2]) for cells in rows}
    fixed = max(v for k, v in speed.items() if k.startswith("fixed:"))
    assert speed["oracle"] >= speed["perfect pre-verifier"] >= fixed
    assert {"paper head", "hybrid head", "draft's own Π q"} <= set(speed)
    assert heads.main(argv) == 0  # resumed from the written rounds: the same table
    assert capsys.readouterr().out == first


@pytest.mark.parametrize(
    "text, extra, message",
    [
        (None, [], "does not exist"),
        ("", [], "is empty"),
        ('{"id": "a", "prompt": "hi"}\n', ["--max-new-tokens", "0"], "--max-new-tokens needs 1"),
        ('{"id": "a", "prompt": "   "}\n', [], "non-empty 'prompt'"),
    ],
)
def test_the_head_comparison_on_a_bad_prompt_file_says_why(tmp_path, capsys, text, extra, message):
    from spec_core.analysis import heads

    path = tmp_path / "p.jsonl"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert heads.main(["--prompts", str(path), "--work-dir", str(tmp_path / "w"), *extra]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: ") and message in out
