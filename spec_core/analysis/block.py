"""Evaluate the block drafters in the real engine: τ per loss, acceptance by block position, and the weights
each schedule gives along a real block (DFlash, arXiv 2602.06036; D-PACE, arXiv 2605.18810).

``python -m spec_core analyze block [--extra runs/block/assets] [--n-prompts 6] [--max-new-tokens 96]``

For every drafter it runs ``spec_core.engine.loop.generate`` (greedy, bf16 by default) on the evaluation prompts
and records per prompt: τ (new tokens / target forwards), tokens/s, and whether the text equals ``ar``'s.
From the rounds it builds the acceptance curve P(accepted ≥ k) for k = 1..B−1, and from the events'
``gold_draft_probs`` (the draft's probability of the target's own token at each block position, D-PACE's q_j)
the weights of every schedule on a real block. Output: one JSON file (the app plots it) and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from spec_core.core import rules
from spec_core.core.assets import BLOCK_DIR
from spec_core.core.cli_args import add_threads
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.drafters.block.assets import load_block_model
from spec_core.engine.loop import generate
from spec_core.model.models import load_pair
from spec_core.train import block as tb

if TYPE_CHECKING:
    from spec_core.core.types import RoundEvent
    from spec_core.model.models import ModelPair

ROOT = Path(__file__).resolve().parents[2]
EVAL_PROMPTS = [  # used only when prompts/specscope.jsonl is absent; none of them is a training prompt
    ("code", "Write a Python function that returns the list of prime numbers below n."),
    (
        "math",
        "A bakery makes 48 muffins each morning and sells them in boxes of 6. If 3 boxes are left unsold, "
        "how many muffins were sold?",
    ),
    ("summarization", "Summarize in one sentence: Bees pollinate many crops, and their decline worries farmers."),
    ("chat", "I have a job interview tomorrow. Any quick tips?"),
    ("qa", "Why is the sky blue?"),
    ("lists", "List five fruits that are rich in vitamin C."),
]
SCHEDULES = BLOCK_LOSSES  # every weight schedule, drawn along real blocks


def eval_prompts(path: Path, n: int) -> list[tuple[str, str, str]]:
    """(id, category, prompt): one per category first, then the rest, up to ``n``."""
    if path.exists():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [(r["id"], r["category"], r["prompt"]) for r in rows]
    else:
        rows = [(f"{c}-eval", c, p) for c, p in EVAL_PROMPTS]
    seen: set[str] = set()
    first: list[tuple[str, str, str]] = []
    rest: list[tuple[str, str, str]] = []
    for r in rows:
        (rest if r[1] in seen else first).append(r)
        seen.add(r[1])
    return (first + rest)[:n]


def acceptance_curve(events, block_len: int) -> list[float]:
    """P(accepted ≥ k), k = 1..block_len, over the rounds that drafted a full block."""
    full = [e.accepted for e in events if e.draft_len == block_len]
    if not full:
        return [0.0] * block_len
    return [sum(a >= k for a in full) / len(full) for k in range(1, block_len + 1)]


def block_weights(q: list[float], alpha: float = 0.5, gamma_w: float = 4.0) -> dict[str, list[float]]:
    """Every schedule's weights on one block's q_j, each normalised to sum 1 (the share per position)."""
    qt = torch.tensor(q, dtype=torch.float64)
    out = {}
    for s in SCHEDULES:
        w = rules.position_weights(s, qt, alpha, gamma_w)
        out[s] = (w / w.sum()).tolist()
    return out


def run_method(
    pair: ModelPair, prompts, method: str, max_new_tokens: int, temperature: float = 0.0, seed: int = 0
) -> dict:
    """Every prompt through the engine (prompt n sampled with seed ``seed + n`` when ``temperature`` > 0)."""

    rows: list[dict] = []
    events: list[RoundEvent] = []
    for n, (pid, cat, prompt) in enumerate(prompts):
        t0 = time.perf_counter()
        res = generate(pair, prompt, method, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + n)
        wall = time.perf_counter() - t0
        rows.append(
            {
                "prompt_id": pid,
                "category": cat,
                "tau": res.stats.tau,
                "new_tokens": res.stats.new_tokens,
                "target_forwards": res.stats.target_forwards,
                "tokens_per_s": res.stats.new_tokens / wall,
                "acceptance_rate": res.stats.acceptance_rate,
                "token_ids": list(res.token_ids),
            }
        )
        events += res.events
    return {"rows": rows, "events": events}


def measure_overhead(steps: int, data: str, shards: int, seed: int = 0) -> dict:
    """Training-time overhead of D-PACE over the decay schedule, measured fairly on a shared CPU.

    Two identical drafters train on the same batches, one step of each in turn (the order alternates), so
    that load from other processes hits both alike; returns median step times and their ratio.
    """

    cfgs = {loss: tb.BlockTrainConfig(loss=loss, data=data, shards=shards) for loss in ("decay", "dpace")}
    train_seqs, _, _ = tb.load_sequences(Path(data), cfgs["decay"].heldout_shards, shards)
    target = tb.load_training_target(torch.float32)
    for p in target.parameters():
        p.requires_grad_(False)
    features = tb.online_features(target, train_seqs, tb.TARGET_LAYERS)  # token-id shards: computed per batch
    models, opts = {}, {}
    for loss in cfgs:
        torch.manual_seed(seed)
        models[loss] = tb.BlockDraftModel.for_target(target, tb.TARGET_LAYERS, 1, 8, "target").float().train()
        opts[loss] = torch.optim.AdamW(models[loss].parameters(), lr=5e-4, betas=(0.9, 0.95))
    times: dict[str, list[float]] = {loss: [] for loss in cfgs}
    weight_times: dict[str, list[float]] = {loss: [] for loss in cfgs}
    for step in range(steps):
        rng = random.Random(seed * 1_000_003 + step)
        batch = tb.make_batch(train_seqs, *tb.sample_blocks(train_seqs, 2, 8, rng), 8, features)
        order = ("decay", "dpace") if step % 2 == 0 else ("dpace", "decay")
        for loss in order:
            model, opt, cfg = models[loss], opts[loss], cfgs[loss]
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                ce, _ = tb.block_forward(model, batch)
            t1 = time.perf_counter()
            with torch.no_grad():
                w = rules.position_weights(loss, torch.exp(-ce), cfg.alpha, cfg.decay, batch[-1])
            t2 = time.perf_counter()
            out = (w * ce).sum() / w.sum().clamp_min(1e-8)
            opt.zero_grad(set_to_none=True)
            out.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step >= 3:  # warm-up
                times[loss].append(time.perf_counter() - t0)
                weight_times[loss].append(t2 - t1)
    med = {loss: statistics.median(v) for loss, v in times.items()}
    wmed = {loss: statistics.median(v) for loss, v in weight_times.items()}
    return {
        "steps": steps - 3,
        "median_step_s": med,
        "median_weights_s": wmed,
        "overhead": med["dpace"] / med["decay"] - 1.0,
        "weights_share_of_step": wmed["dpace"] / med["dpace"],
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze block", description=__doc__.splitlines()[0])
    ap.add_argument("--losses", default=",".join(BLOCK_LOSSES), help="assets in assets/block to evaluate")
    ap.add_argument("--extra", default="", help="a folder of further block assets (e.g. the α ablation)")
    ap.add_argument("--prompts", default=str(ROOT / "prompts" / "specscope.jsonl"))
    ap.add_argument("--n-prompts", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--temperature", type=float, default=0.0, help="engine runs sample at T > 0 (τ under sampling)")
    ap.add_argument("--seed", type=int, default=0, help="prompt n samples with seed SEED + n")
    add_threads(ap, 0)
    ap.add_argument("--out", default=str(ROOT / "runs" / "block" / "analysis.json"))
    ap.add_argument("--overhead-steps", type=int, default=0, help="also time D-PACE vs decay training steps")
    ap.add_argument("--data", default="data/train", help="training shards (for --overhead-steps)")
    ap.add_argument("--shards", type=int, default=10, help="first N shards (held-out set and --overhead-steps)")
    ap.add_argument("--heldout-blocks", type=int, default=2048, help="teacher-forced held-out blocks (0 = skip)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    overhead = measure_overhead(a.overhead_steps, a.data, a.shards) if a.overhead_steps else None
    if overhead:
        print(
            f"D-PACE training overhead over decay: {100 * overhead['overhead']:+.1f}% "
            f"(median step {overhead['median_step_s']}; weights {100 * overhead['weights_share_of_step']:.2f}% "
            "of a D-PACE step)",
            flush=True,
        )

    pair = load_pair("embedded", "cpu", a.dtype)
    prompts = eval_prompts(Path(a.prompts), a.n_prompts)
    drafters: list[tuple[str, Path]] = [(x, BLOCK_DIR) for x in a.losses.split(",") if x]
    if a.extra:
        drafters += [(p.stem, Path(a.extra)) for p in sorted(Path(a.extra).glob("*.json"))]

    if not drafters:  # only the overhead measurement was asked for
        if overhead:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps({"training_overhead": overhead}, indent=1) + "\n")
        return 0
    held_seqs: list = []
    held_features = None
    if a.heldout_blocks:
        _, held_seqs, _ = tb.load_sequences(Path(a.data), tb.BlockTrainConfig(loss="dpace").heldout_shards, a.shards)
        held_features = tb.online_features(pair.parts_target, held_seqs, tb.TARGET_LAYERS)  # token-id shards
    if a.temperature < 0:
        ap.error("--temperature must be ≥ 0")
    ar = run_method(pair, prompts, "ar", a.max_new_tokens, a.temperature, a.seed)
    ar_ids = {r["prompt_id"]: r["token_ids"] for r in ar["rows"]}
    ar_tps = statistics.mean(r["tokens_per_s"] for r in ar["rows"])
    results, saved = {}, dict(pair.extras)
    for name, directory in drafters:
        model, card = load_block_model(pair.parts_target, name, directory)
        loss = card["loss"]
        pair.extras[f"block:{loss}"] = model.to(pair.device)  # route block:LOSS to this asset for the run
        run = run_method(pair, prompts, f"block:{loss}", a.max_new_tokens, a.temperature, a.seed)
        pair.extras.clear()
        pair.extras.update(saved)
        block_len = model.config.block_size - 1
        held = {}
        if held_seqs:  # the same fixed held-out blocks for every drafter, more of them than during training
            ecfg = tb.BlockTrainConfig(loss=loss, block_size=model.config.block_size, eval_blocks=a.heldout_blocks)
            held = tb.evaluate(model, held_seqs, ecfg, held_features)
        evs = [e for e in run["events"] if e.draft_len == block_len]
        qs = torch.tensor([e.gold_draft_probs for e in evs], dtype=torch.float64)  # [rounds, B−1]
        median_round = evs[len(evs) // 2] if evs else None
        tc = card["train_config"]
        results[name] = {
            "loss": loss,
            "alpha": tc["alpha"],
            "block_size": model.config.block_size,
            "seed": tc.get("seed"),
            "tau_mean": statistics.mean(r["tau"] for r in run["rows"]),
            "tau_by_prompt": {r["prompt_id"]: r["tau"] for r in run["rows"]},
            "tokens_per_s": statistics.mean(r["tokens_per_s"] for r in run["rows"]),
            "speedup_vs_ar": statistics.mean(r["tokens_per_s"] for r in run["rows"]) / ar_tps,
            "identical_to_ar": sum(r["token_ids"] == ar_ids[r["prompt_id"]] for r in run["rows"]),
            "accept_curve": acceptance_curve(run["events"], block_len),
            "heldout": held,
            "mean_gold_q": qs.mean(0).tolist() if len(qs) else [],
            "mean_weights": {
                s: (lambda w: (w / w.sum(-1, keepdim=True)).mean(0).tolist())(
                    rules.position_weights(s, qs, tc["alpha"], tc["decay_gamma_w"])
                )
                for s in SCHEDULES
            }
            if len(qs)
            else {},
            "example_block": {
                "pieces": list(median_round.draft_pieces),
                "accepted": median_round.accepted,
                "q": list(median_round.gold_draft_probs),
                "weights": block_weights(list(median_round.gold_draft_probs), tc["alpha"], tc["decay_gamma_w"]),
            }
            if median_round
            else {},
            "copy": copy_summary(card),
            "train": {
                "steps": card["steps"],
                "wall_s": card["wall_s"],
                "median_step_s": card["median_step_s"],
                "mean_weights_s": card["mean_weights_s"],
                "heldout": card["heldout"],
                "log": card["log"],
            },
        }
        said = f"held-out τ≈{held['tau_estimate']:.3f}" if held else "no held-out blocks"
        print(
            f"{name:24s} τ {results[name]['tau_mean']:.3f}  {said}  "
            f"same-as-ar {results[name]['identical_to_ar']}/{len(prompts)}",
            flush=True,
        )
    out = {
        "prompts": [p[0] for p in prompts],
        "max_new_tokens": a.max_new_tokens,
        "dtype": a.dtype,
        "temperature": a.temperature,
        "ar": {"tokens_per_s": ar_tps},
        "drafters": results,
        "training_overhead": overhead,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(markdown_table(out))
    print(f"wrote {a.out}")
    return 0


def copy_summary(card: dict) -> dict:
    """A copying drafter's gate as its card reports it (``train copy``): held-out τ estimates alone and gated, and
    the held-out shards; {} for a drafter without a gate."""
    held = (card.get("copy") or {}).get("results", {}).get("heldout") or {}
    if not held:
        return {}
    return {
        "alone_tau": held["alone"]["tau_estimate"],
        "gated_tau": held["gated"]["tau_estimate"],
        "blocks": held["blocks"],
        "heldout_shards": card["copy"]["training"]["heldout_shards"],
    }


def markdown_table(analysis: dict) -> str:
    """τ, acceptance by position and training cost per drafter, as a Markdown table (a copying drafter's gate:
    its card's held-out τ estimate alone → gated, on the gate's own held-out shards)."""
    temp = analysis.get("temperature", 0.0)
    lines = [
        f"| drafter | B | seed | α | τ (engine, T = {temp:g}) | held-out τ est. | held-out P(acc ≥ 1, 2, 3) | "
        "engine P(acc ≥ 1, 2, 3) | same as ar | median step (s) | copy gate: held-out τ alone → gated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in analysis["drafters"].items():
        c = r["accept_curve"]
        pick = ", ".join(f"{c[k]:.3f}" for k in (0, 1, 2) if k < len(c))
        h = r["heldout"] or r["train"]["heldout"]
        hpick = ", ".join(f"{h['accept_by_position'][k]:.3f}" for k in (0, 1, 2))
        alpha = r["alpha"] if r["loss"].startswith("dpace") else "–"
        copied = r.get("copy") or {}
        gate = f"{copied['alone_tau']:.3f} → {copied['gated_tau']:.3f}" if copied else "–"
        lines.append(
            f"| {name} | {r.get('block_size', '?')} | {r.get('seed', '?')} | {alpha} | {r['tau_mean']:.3f} | {h['tau_estimate']:.3f} | {hpick} | "
            f"{pick} | {r['identical_to_ar']}/{len(analysis['prompts'])} | "
            f"{r['train']['median_step_s']:.3f} | {gate} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
