"""``python -m spec_core analyze preverifier``: PACER's pre-verifiers against the draft's own Π q, held out.

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274) trains a
pre-verification layer so as *not* to rely on the draft's probabilities. This command asks whether a head does
better than those probabilities, on rounds no head trained on (docs/PACER.md, docs/ALGORITHMS.md §1):

- **held-out rounds**: the simulated rounds of ``train pacer`` (``runs/pacer/<draft>/``) whose prompt index is a
  multiple of the heads' ``heldout_every``; or, with ``--prompts FILE``, rounds simulated now on those prompts
  (the same recording: ``fixed:<window>``, greedy; every round held out);
- **predictors** (one row each): the paper head (hidden states, drafted tokens, positions; no probability), the
  hybrid head (also log q and Σ log q), the draft's own Π_{j≤i} q_j, a perfect pre-verifier (â = the verifier's
  outcome: PACER's rule then stops right after the first token the target will reject), and the ablations found in
  ``<data>/heads`` (``train pacer`` writes them there): no position anywhere, no token embedding, the hybrid
  retrained on the same data; plus ρ = 1 and b ∈ {1, 2, 4} of the paper head;
- **columns**: ``auc`` and ``ece`` of â against the cumulative label (the token and every one before it kept),
  ``auc_position1`` (the first drafted token), and ``predicted_speedup`` over ``ar``: PACER's stop rule
  (:func:`spec_core.policies.pacer.replay_length`) on the predictor's â, replayed on the held-out rounds with
  :func:`spec_core.analysis.policies.replay` and the one cost model (:class:`spec_core.core.cost_model.CostProfile`:
  this machine's cached costs at the pair's precision, or ``--costs FILE``, plus each head's own measured call
  time). The threshold t of each row is the best one on the *training* rounds (never the held-out ones), at the
  row's b and ρ; ``speedup_accelerator_model`` is the same replay under the memory-bound accelerator model
  (:func:`spec_core.core.cost_model.accelerator_profile`), its t tuned under that model the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from spec_core.analysis.costs import median_ms
from spec_core.analysis.policies import RecordedRounds, replay, shard_rounds
from spec_core.core.cli_args import add_threads
from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.cost_tables import run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import DEFAULT_DRAFT_RATIO
from spec_core.heads.metrics import calibration, roc_auc
from spec_core.heads.preverifier import HEADS_DIR, available, find_head, load_head
from spec_core.model.models import load_pair
from spec_core.policies.pacer import PacerParams
from spec_core.policies.pacer_headroom import headroom
from spec_core.policies.pacer_heads import DRAFT_CUMPROB, FIXED_WINDOWS, token_labels
from spec_core.policies.pacer_tuning import load_rounds, prediction_key, replay_rule, rule_lengths
from spec_core.serve.prompts import load_prompts
from spec_core.train.pacer import (
    RUNS_DIR,
    SimConfig,
    TrainConfig,
    load_data,
    load_meta,
    paper_predictions,
    simulate,
    simulation_prompt_texts,
    token_embeddings,
    trained_prompt_texts,
)

if TYPE_CHECKING:
    from spec_core.heads.preverifier import BlockPreVerifier, PreVerifier
    from spec_core.model.models import ModelPair

THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # t grid for each row, tuned on training rounds
COLUMNS = ["head", "inputs", "auc", "ece", "predicted_speedup", "headroom", "headroom_low", "headroom_high"]
MIN_HELD_OUT_ROUNDS = 10  # fewer held-out rounds make no row worth reading
PERFECT = "perfect pre-verifier"  # the row H is measured against
ACCEL = "_accelerator_model"  # the suffix of the columns priced under the accelerator model
PRICED = "_priced"  # a row's per-round (tokens, ms) under each profile, for the bootstrap (not written)


@dataclasses.dataclass(frozen=True)
class Predictor:
    """One row's scorer: a name, what it reads, and â for the selected tokens at block size b."""

    head: str  # the row's name
    inputs: str  # what it reads, ' + '-joined
    score: Callable[[torch.Tensor, int], torch.Tensor]  # (mask [N], block) -> â [n]
    head_ms: Callable[[int], float]  # (block) -> ms of one call on a block (0: free)
    block: int
    rho: float
    share: float = 0.0  # its parameters over the target's: a call's price on a model in steps
    shipped_key: str | None = None  # its â in the shipped rounds asset, where t is tuned when no training rounds
    #   exist (a user's prompt file on a fresh clone); "" = the verifier's outcome (the perfect row)


def draft_cumprob(data: dict[str, torch.Tensor], mask: torch.Tensor, block: int) -> torch.Tensor:
    """The draft's own Π_{j≤i} q_j in its round (what a confidence rule knows)."""
    return data["prob_features"][mask][:, 1].exp()


def head_scorer(head, data: dict[str, torch.Tensor]):
    """â of a loaded head (paper or hybrid) on the selected tokens; the paper head scores each block alone."""

    if getattr(head.cfg, "design", "") == "paper":
        return lambda mask, block: paper_predictions(head, data, mask, block)

    def hybrid(mask, block):  # per token: the block does not matter
        with torch.inference_mode():
            return head.predict(
                data["hidden"][mask].float(), data["position"][mask].long(), data["prob_features"][mask]
            )

    return hybrid


def head_call_ms(head, embed_dim: int, repeats: int = 200):
    """Median ms of one inference call on a block of ``b`` tokens (as :class:`PacerLength` makes it), after a few
    warm-up calls (a call is a fraction of a millisecond: a few dozen samples wander with the machine's state)."""
    cache: dict[int, float] = {}

    def ms(block: int) -> float:
        if block not in cache:
            hidden = torch.zeros(block, head.cfg.hidden_size)
            positions = torch.arange(1, block + 1)
            if getattr(head.cfg, "design", "") == "paper":
                embeds = torch.zeros(block, embed_dim) if head.cfg.use_token else None
                call = lambda: head.predict(hidden, embeds, positions)  # noqa: E731
                cache[block] = median_ms(call, repeats, warmup=20)
            else:
                feats = head.prob_features(torch.full((block,), 0.5)) if head.cfg.use_token_prob else None
                call = lambda: head.predict(hidden, positions, feats)  # noqa: E731
                cache[block] = median_ms(call, repeats, warmup=20)
        return cache[block]

    return ms


def rounds_of(data: dict[str, torch.Tensor], round_mask: torch.Tensor, predicted: torch.Tensor) -> RecordedRounds:
    """The selected rounds with one predictor's â (``predicted`` already restricted to their tokens)."""
    return RecordedRounds(
        data["round_gamma"][round_mask].long(),
        data["round_accepted"][round_mask].long(),
        data["round_prompt"][round_mask].long(),
        torch.ones(int(round_mask.sum()), dtype=torch.bool),
        {"": predicted},
    )


def replay_speed(rounds: RecordedRounds, params: PacerParams, costs: CostProfile) -> dict:
    """PACER's stop rule on recorded â: speedup over ar, drafts and tokens per round."""
    per_round = rounds.per_round(rounds.predicted[""])
    return replay_rule(per_round, rounds.gamma, rounds.accepted, params, costs)


def evaluate(pred: Predictor, data, train_tok, train_rounds, test_tok, test_rounds, costs, accel, shipped=None) -> dict:
    """One row: held-out AUC / ECE, and the stop rule's held-out speed under each cost model at the t tuned on the
    training rounds under that cost model; without training rounds, on the shipped rounds (``shipped``, a
    :class:`~spec_core.policies.pacer_tuning.TuningRounds`) where they carry this predictor's â."""

    labels = data["label"][test_tok].float()
    probs = pred.score(test_tok, pred.block).float()
    ece, _ = calibration(probs.clamp(0, 1), labels)
    first = data["position"][test_tok] == 1
    ms = pred.head_ms(pred.block)
    # each profile prices a call in its own unit: the measured ms here, the head's parameter share of a step on the
    # accelerator model (a few kFLOPs beside a forward of the target), as the app's head comparison does
    costs, accel = costs.with_head(ms, pred.share), accel.with_head(ms, pred.share)
    train = rounds_of(data, train_rounds, pred.score(train_tok, pred.block).float()) if train_tok.any() else None
    test = rounds_of(data, test_rounds, probs)

    tune_on = shipped_per_round(shipped, pred) if train is None else None

    def tuned(profile: CostProfile) -> tuple[PacerParams, dict]:
        best_t, best = PacerParams().threshold, -1.0
        for t in THRESHOLDS if train is not None or tune_on is not None else ():
            params = PacerParams(block=pred.block, threshold=t, rho=pred.rho)
            if train is not None:
                s = replay_speed(train, params, profile)["speedup"]
            else:
                s = replay_rule(tune_on, shipped.gamma, shipped.accepted, params, profile)["speedup"]
            if s > best:
                best_t, best = t, s
        params = PacerParams(block=pred.block, threshold=best_t, rho=pred.rho)
        return params, replay_speed(test, params, profile)

    params, speed = tuned(costs)
    accel_params, accel_speed = tuned(accel)
    priced = {}
    for suffix, profile, chosen in (("", costs, params), (ACCEL, accel, accel_params)):
        lengths, calls = rule_lengths(test.per_round(test.predicted[""]), test.gamma, chosen)
        priced[suffix] = profile.round_prices(lengths, test.accepted.numpy(), calls)
    return {
        PRICED: priced,
        "head": pred.head,
        "inputs": pred.inputs,
        "auc": round(roc_auc(probs, labels), 4),
        "ece": round(ece, 4),
        "predicted_speedup": round(speed["speedup"], 4),
        "block": pred.block,
        "rho": pred.rho,
        "threshold": params.threshold,
        "auc_position1": round(roc_auc(probs[first], labels[first]), 4),
        "drafted_per_round": round(speed["drafted_per_round"], 3),
        "tokens_per_round": round(speed["tokens_per_round"], 3),
        "head_ms": round(ms, 4),
        "speedup_accelerator_model": round(accel_speed["speedup"], 4),
        "threshold_accelerator_model": accel_params.threshold,
        "drafted_per_round_accelerator_model": round(accel_speed["drafted_per_round"], 3),
        "heldout_tokens": int(test_tok.sum()),
        "heldout_rounds": int(test_rounds.sum()),
    }


def confidence_lengths(q_rounds: list[torch.Tensor], t: float) -> torch.Tensor:
    """``confidence:T``'s length in each round: up to the first drafted token whose q is under T."""
    out = []
    for row in q_rounds:
        low = torch.nonzero(row < t)
        out.append(int(low[0]) + 1 if len(low) else len(row))
    return torch.tensor(out)


def shipped_per_round(shipped, pred: Predictor) -> list[torch.Tensor] | None:
    """The predictor's â per round of the shipped rounds (None where they carry none for it)."""

    if shipped is None or pred.shipped_key is None:
        return None
    if pred.shipped_key == "":  # the perfect row: the verifier's outcome
        labels, _ = token_labels(shipped)
        return list(torch.split(labels.float(), shipped.gamma.tolist()))
    return shipped.per_round(pred.shipped_key) if pred.shipped_key in shipped.predicted else None


def shipped_q(shipped) -> list[torch.Tensor] | None:
    """The draft's q of each drafted token in the shipped rounds, from their Π_{j≤i} q_j (None without it)."""

    if shipped is None or DRAFT_CUMPROB not in shipped.predicted:
        return None
    out = []
    for cum in shipped.per_round(DRAFT_CUMPROB):
        before = torch.cat([torch.ones(1), cum[:-1]])
        out.append(cum / before.clamp_min(1e-12))
    return out


def confidence_row(
    data, train_rounds, test_rounds, costs: CostProfile, accel: CostProfile, shipped=None
) -> dict | None:
    """``confidence:T``, the confidence baseline (stop after the first drafted token whose q is under T; at most the
    recorded window), T tuned on the training rounds under each cost model, or on the shipped rounds when there are
    none (None when neither exists)."""

    def q_rounds(rounds_mask: torch.Tensor) -> list[torch.Tensor]:
        q = data["token_prob"][torch.repeat_interleave(rounds_mask, data["round_gamma"].long())]
        return list(torch.split(q, data["round_gamma"][rounds_mask].long().tolist()))

    test = rounds_of(data, test_rounds, torch.zeros(0))
    tune_q: list[torch.Tensor] | None
    if train_rounds.any():
        train = rounds_of(data, train_rounds, torch.zeros(0))
        tune_q, tune_rounds = q_rounds(train_rounds), train
    else:
        tune_q, tune_rounds = shipped_q(shipped), shipped
        if tune_q is None:
            return None
    row: dict[str, Any] = {"head": "confidence:T", "inputs": "draft probability: q_i", PRICED: {}}
    for suffix, profile in (("", costs), (ACCEL, accel)):
        best = max(THRESHOLDS, key=lambda t: replay(tune_rounds, confidence_lengths(tune_q, t), profile)["speedup"])
        lengths = torch.minimum(confidence_lengths(q_rounds(test_rounds), best), test.gamma)
        r = replay(test, lengths, profile)
        row[PRICED][suffix] = profile.round_prices(lengths.numpy(), test.accepted.numpy())
        key = "predicted_speedup" if not suffix else f"speedup{suffix}"
        row |= {
            key: round(r["speedup"], 4),
            f"threshold{suffix}": best,
            f"drafted_per_round{suffix}": round(r["drafted_per_round"], 3),
        }
        if not suffix:
            row["tokens_per_round"] = round(r["tokens_per_round"], 3)
    return row


def add_headroom(rows: list[dict], prompts) -> None:
    """Each row gets ``headroom`` (H of :mod:`spec_core.policies.pacer_headroom`: the share of a perfect
    pre-verifier's gain over the best fixed window that it captures) and its bootstrap interval over prompts
    (``headroom_low``, ``headroom_high``), under this machine's costs and under the accelerator model; the rows'
    per-round prices are dropped."""
    for suffix in ("", ACCEL):
        priced = {r["head"]: r[PRICED][suffix] for r in rows}
        fixed = [f"fixed:{k}" for k in FIXED_WINDOWS]
        found = headroom(priced, fixed, PERFECT, prompts)
        for r in rows:
            h = found[r["head"]]
            r |= {f"headroom{suffix}": round(h.value, 4), f"headroom_low{suffix}": round(h.low, 4)}
            r[f"headroom_high{suffix}"] = round(h.high, 4)
    for r in rows:
        r.pop(PRICED)


def reference_rows(data, test_rounds, costs: CostProfile, accel: CostProfile) -> list[dict]:
    """The fixed windows the app compares with (fixed:1 … fixed:4, at most the recorded window) and the oracle on
    the same held-out rounds (no predictor: no AUC)."""
    rounds = rounds_of(data, test_rounds, torch.zeros(0))
    rows = []
    windows = [(f"fixed:{k}", torch.minimum(torch.full_like(rounds.gamma, k), rounds.gamma)) for k in FIXED_WINDOWS]
    for name, lengths in [*windows, ("oracle", rounds.accepted.clone())]:
        r, a = replay(rounds, lengths, costs), replay(rounds, lengths, accel)
        accepted = rounds.accepted.numpy()
        rows.append(
            {
                PRICED: {
                    "": costs.round_prices(lengths.numpy(), accepted),
                    ACCEL: accel.round_prices(lengths.numpy(), accepted),
                },
                "head": name,
                "inputs": "none (a fixed window)" if name != "oracle" else "the verifier's outcome",
                "predicted_speedup": round(r["speedup"], 4),
                "drafted_per_round": round(r["drafted_per_round"], 3),
                "tokens_per_round": round(r["tokens_per_round"], 3),
                "speedup_accelerator_model": round(a["speedup"], 4),
            }
        )
    return rows


def this_machine_costs(pair: ModelPair, path: str | None) -> CostProfile:
    """``--costs FILE`` (CostProfile fields), or the table in force at the pair's precision (this machine's, which
    ``python -m spec_core costs --machine`` writes, else the one shipped for its CPU kind; never timed here)."""
    if path:
        return CostProfile.from_dict(json.loads(Path(path).read_text()))

    return run_costs(pair)[0]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze preverifier", description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default="feature", help="embedded draft: feature (default) or standalone")
    ap.add_argument("--data", default=None, help="simulated rounds (default runs/pacer/<draft>)")
    ap.add_argument("--heads-dir", default=None, help="ablation heads (default <data>/heads, written by train pacer)")
    ap.add_argument("--prompts", default=None, help="JSON lines: simulate held-out rounds on these prompts instead")
    ap.add_argument("--limit", type=int, default=0, help="with --prompts: only the first N (0 = all)")
    ap.add_argument("--max-new-tokens", type=int, default=48, help="with --prompts: tokens per simulated prompt")
    ap.add_argument("--block", type=int, default=PacerParams().block, help="b of the main rows")
    ap.add_argument("--rho", type=float, default=PacerParams().rho, help="ρ of the main rows")
    ap.add_argument(
        "--rounds",
        choices=("all", "greedy", "sampled"),
        default="all",
        help="which simulated rounds: all (default), greedy only, or sampled (T = 0.7) only",
    )
    ap.add_argument("--costs", default=None, help="JSON of CostProfile fields instead of this machine's cached costs")
    add_threads(ap, 1)
    ap.add_argument("--out", default="runs/preverifier.csv", help="the table (CSV)")
    ap.add_argument("--assets-dir", default=None, help="where the shipped heads are (default assets/heads)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)

    table = analyze(load_pair("embedded", draft=args.draft), args)
    print(table.to_string(index=False))
    print(f"wrote {args.out}")
    return 0


def analyze(pair: ModelPair, args: argparse.Namespace) -> pd.DataFrame:
    """The table of :func:`main` for a loaded pair (written to ``args.out``)."""

    assets = Path(args.assets_dir) if args.assets_dir else HEADS_DIR
    data_dir = Path(args.data or RUNS_DIR / args.draft)
    heads_dir = Path(args.heads_dir) if args.heads_dir else data_dir / "heads"
    shipped = shipped_heads(pair, assets)
    if not shipped:
        raise SpecScopeError(
            f"no PACER pre-verifier for this draft in {assets}: train one (`python -m spec_core train pacer`)"
        )
    card = next(iter(shipped.values()))[1]  # `pacer`'s head
    heldout_every = card.get("training", {}).get("heldout_every", TrainConfig.heldout_every)
    if args.prompts:  # rounds on these prompts, all held out; t is still tuned on the training rounds if present
        texts = [p["prompt"] for p in load_prompts(args.prompts)][: args.limit or None]
        # one folder per prompt list and length: a folder is only resumed with the settings it was simulated with
        sim_dir = data_dir.parent / f"{args.draft}-heldout-{Path(args.prompts).stem}-{len(texts)}x{args.max_new_tokens}"
        sim = SimConfig(
            sim_dir,
            len(texts),
            window=int(card["config"]["max_len"]),
            max_new_tokens=args.max_new_tokens,
            sampled_fraction=0.0,
            prompts=tuple(texts),
        )
        test_paths = simulate(pair, sim)
        train_paths = sorted(data_dir.glob("shard_*.safetensors"))
        paths = train_paths + test_paths
    else:
        paths = sorted(data_dir.glob("shard_*.safetensors"))
        test_paths = []
    if not paths:
        raise SpecScopeError(f"no simulated rounds in {data_dir}: run `python -m spec_core train pacer` first")

    data = load_data(paths)
    if "token" not in data:
        raise SpecScopeError(f"the shards in {data_dir} predate the drafted token ids: simulate them again")
    data["token_embed"] = token_embeddings(pair, data["token"])
    # which rounds / tokens are held out, which are training; greedy or not
    shard_of_round = torch.cat([torch.full((int(load_file_rounds(p)),), i) for i, p in enumerate(paths)])
    greedy_shard = torch.tensor([load_meta(p).get("sampled") != "True" for p in paths])
    is_test_shard = torch.tensor([p in test_paths for p in paths])
    round_greedy = greedy_shard[shard_of_round]
    if test_paths:
        test_rounds = is_test_shard[shard_of_round]
        train_rounds = ~test_rounds & (data["round_prompt"] % heldout_every != 0)
    else:
        test_rounds = data["round_prompt"] % heldout_every == 0
        train_rounds = ~test_rounds
        seen, why = rounds_seen_in_training(data, data_dir, [c for _, c in shipped.values()])
        if seen is not None:  # a prompt some shipped head trained on is never held out, whatever its index here
            dropped = test_rounds & seen
            test_rounds &= ~dropped
            why = f"{int(dropped.sum())} held-out rounds dropped: their prompts were in a shipped head's training split"
        print(why)
    if args.rounds != "all":  # the same selection for tuning and for the held-out numbers
        wanted = round_greedy if args.rounds == "greedy" else ~round_greedy
        test_rounds &= wanted
        train_rounds &= wanted
    to_tokens = lambda rounds: torch.repeat_interleave(rounds, data["round_gamma"].long())  # noqa: E731
    test_tok, train_tok = to_tokens(test_rounds), to_tokens(train_rounds)
    if not test_tok.any():
        raise SpecScopeError("no held-out rounds left after the selection")
    if int(test_rounds.sum()) < MIN_HELD_OUT_ROUNDS:
        raise SpecScopeError(
            f"only {int(test_rounds.sum())} held-out rounds: a row needs at least {MIN_HELD_OUT_ROUNDS} "
            "(more prompts, or more --max-new-tokens)"
        )
    shipped_rounds = None
    if not train_rounds.any():  # a user's prompt file on a clone without training shards: tune on the shipped rounds
        shipped_rounds = load_rounds(args.draft)
        if shipped_rounds is None:
            raise SpecScopeError(
                f"no training rounds in {data_dir} and no shipped rounds for the {args.draft} draft to tune t on"
            )

    costs = this_machine_costs(pair, args.costs)
    accel = accelerator_profile(DEFAULT_DRAFT_RATIO)  # the embedded pair: draft/target parameters ≈ 0.046
    embed_dim = int(data["token_embed"].shape[1])

    target_parameters = sum(p.numel() for p in pair.parts_target.parameters())

    def row(
        name: str, head, inputs: str | None = None, block: int = args.block, rho: float = args.rho, file: str = ""
    ) -> Predictor:
        share = sum(p.numel() for p in head.parameters()) / target_parameters
        scorer = head_scorer(head, data)
        key = prediction_key(file, block) if file else None  # a shipped head's â in the shipped rounds
        return Predictor(
            name, inputs or " + ".join(head.inputs), scorer, head_call_ms(head, embed_dim), block, rho, share, key
        )

    predictors = []  # the shipped heads first: the default (`pacer`'s), the paper head, the hybrid
    for i, (name, (head, hcard)) in enumerate(shipped.items()):
        default = " = pacer" if i == 0 else ""
        predictors.append(row(f"{name} ({hcard['config'].get('design', 'hybrid')}, shipped{default})", head, file=name))
    predictors.append(
        Predictor(
            "draft Π q",
            "draft probability: Π_{j≤i} q_j",
            lambda m, b: draft_cumprob(data, m, b),
            lambda b: 0.0,
            args.block,
            args.rho,
            shipped_key=DRAFT_CUMPROB,
        )
    )
    predictors.append(  # a head that never errs: â is the verifier's outcome (AUC 1), the rule unchanged
        Predictor(
            PERFECT,
            "the verifier's outcome, token by token (a bound, not a head)",
            lambda m, b: data["label"][m].float(),
            lambda b: 0.0,
            args.block,
            args.rho,
            shipped_key="",
        )
    )
    names = set(available(heads_dir)) if heads_dir.exists() else set()
    for name in sorted(names):  # variants and ablations trained by `train pacer` on these shards
        head, hcard = load_head(name, heads_dir)
        predictors.append(row(f"{name} (trained on {data_dir.name}, {hcard['config'].get('design', 'hybrid')})", head))
    for name, (head, _) in shipped.items():  # the stop rule's ablations: ρ = 1, b ∈ {1, 2, 4}
        predictors.append(row(f"{name} ρ = 1", head, rho=1.0, file=name))
        for b in (1, 2, 4):
            if b != args.block:
                predictors.append(row(f"{name} b = {b}", head, block=b, file=name))
    rows = [
        evaluate(p, data, train_tok, train_rounds, test_tok, test_rounds, costs, accel, shipped_rounds)
        for p in predictors
    ]
    confidence = confidence_row(data, train_rounds, test_rounds, costs, accel, shipped_rounds)
    rows += [confidence] if confidence is not None else []
    rows += reference_rows(data, test_rounds, costs, accel)
    add_headroom(rows, data["round_prompt"][test_rounds].numpy())
    table = pd.DataFrame(rows)
    table = table[COLUMNS + [c for c in table.columns if c not in COLUMNS]]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    Path(args.out).with_suffix(".costs.json").write_text(costs.to_json() + "\n")  # what the speeds rest on
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 60)
    where = f"rounds simulated on {args.prompts}" if args.prompts else f"prompts with index % {heldout_every} == 0"
    print(
        f"held out: {int(test_rounds.sum())} rounds, {int(test_tok.sum())} drafted tokens ({where}; "
        f"{'greedy' if args.prompts else args.rounds + ' rounds'}); costs: {costs.name} "
        f"({costs.about}); "
        + (
            f"t tuned per row on {int(train_rounds.sum())} training rounds"
            if shipped_rounds is None
            else f"t tuned per row on the {len(shipped_rounds.gamma)} shipped rounds (no training rounds here)"
        )
    )
    return table


def shipped_heads(pair: ModelPair, assets: Path) -> dict[str, tuple[PreVerifier | BlockPreVerifier, dict]]:
    """name → (head, card) of the shipped heads for the pair's draft: the default (first), the paper head, the
    hybrid."""

    out: dict[str, tuple[PreVerifier | BlockPreVerifier, dict]] = {}
    for variant in ("", "paper", "hybrid"):
        try:
            name = find_head(pair.draft_card, variant, assets)
        except SpecScopeError:
            continue
        if name not in out:
            out[name] = load_head(name, assets)
    return out


def prompts_seen_in_training(data_dir: Path, cards: list[dict]) -> tuple[torch.Tensor | None, str]:
    """Per prompt index of the simulated data: True where one of these heads trained on that prompt. The data's
    prompts are rebuilt from its ``config.json`` and each head's from its card (another ``--prompts`` reorders the
    whole list, so an index alone says nothing). (None, why) when the data's prompts cannot be rebuilt."""

    try:
        config = json.loads((data_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    texts = simulation_prompt_texts(config) if config else None
    if not texts:
        return (
            None,
            f"note: {data_dir} has no config.json to rebuild its prompts from: the held-out split is by index only",
        )
    trained = set().union(*(trained_prompt_texts(c) for c in cards))
    return torch.tensor([t in trained for t in texts]), ""


def rounds_seen_in_training(data: dict, data_dir: Path, cards: list[dict]) -> tuple[torch.Tensor | None, str]:
    """Per simulated round ``[R]``: True where one of these heads trained on the round's prompt ((None, why) as in
    :func:`prompts_seen_in_training`)."""
    seen, why = prompts_seen_in_training(data_dir, cards)
    return (None, why) if seen is None else (seen[data["round_prompt"].long()], why)


def load_file_rounds(path: Path) -> int:
    return shard_rounds(path)
