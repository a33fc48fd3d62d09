"""``python -m spec_core analyze policies``: draft-length policies replayed on recorded rounds, against an oracle.

With ``--prompts FILE`` it records each prompt's own greedy answer instead and replays every policy on it exactly
(:mod:`spec_core.serve.playground`, the policy playground); below, the training-rounds mode.

PACER (arXiv 2602.01274) motivates adaptive lengths with an oracle that knows each step's accepted length and
reports up to 1.4× over the best fixed window in theory. Here, from rounds recorded with a long window on
training prompts (``python -m spec_core train pacer`` writes them to ``runs/pacer/<draft>/``):

- a round records the draft's first ``γ`` tokens (the long window) and how many of them the verifier kept
  (``a``). A policy that drafts ``L ≤ γ`` tokens in that state keeps ``min(a, L)`` of them and emits
  ``min(a, L) + 1`` tokens (the target's recovered or bonus token included — at temperature 0 the target's token
  after ``min(a, L)`` kept drafts is the same whichever L it was);
- the round costs ``L`` draft steps, one target forward over ``L + 1`` tokens and the engine's own per-round
  overhead (plus, for PACER, one pre-verifier call per block), with the forward costs measured on this machine
  (:func:`spec_core.analysis.costs.measure_costs`, interpolated between the measured widths);
- each policy's rate is Σ tokens / Σ time over the same recorded states; ``ar`` costs one one-token forward (and
  the overhead) per token. The **oracle** drafts exactly the tokens that will be kept (``L = a``).

Every policy is scored on the same states, which the long window visited (the states a shorter window would
visit differ, but not systematically in difficulty): the same approximation as the seed's oracle analysis. Only
ratios between policies are reported. Greedy rounds only by default (the benchmark is greedy).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open

from spec_core.analysis.costs import measure_round_costs
from spec_core.analysis.playground_table import prompts_main
from spec_core.core.cli_args import add_threads
from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.engine.loop import generate
from spec_core.engine.methods import is_fixed_window, spec_of
from spec_core.engine.replay import paper_key
from spec_core.heads.preverifier import find_head, load_head
from spec_core.model.models import load_pair
from spec_core.policies.pacer import PacerParams, replay_length
from spec_core.serve.prompts import load_prompts
from spec_core.train.pacer import RUNS_DIR, TrainConfig, load_data, load_meta, paper_predictions, token_embeddings

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair
    from spec_core.policies.pacer import PacerParams

FIXED_WINDOWS = (1, 2, 3, 4, 6, 8)


@dataclass(frozen=True)
class RecordedRounds:
    """Rounds recorded with a long window: R rounds, N drafted tokens laid end to end."""

    gamma: torch.Tensor  # [R] tokens drafted (the long window, or less at the end of a generation)
    accepted: torch.Tensor  # [R] how many of them the verifier kept
    prompt: torch.Tensor  # [R] training-prompt index of each round
    greedy: torch.Tensor  # [R] bool: decoded greedily
    predicted: dict[str, torch.Tensor] = field(default_factory=dict)  # head variant ("" = shipped) → [N] â

    def select(self, mask: torch.Tensor) -> RecordedRounds:
        token_mask = torch.repeat_interleave(mask, self.gamma)
        pred = {variant: values[token_mask] for variant, values in self.predicted.items()}
        return RecordedRounds(self.gamma[mask], self.accepted[mask], self.prompt[mask], self.greedy[mask], pred)

    def per_round(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Split a per-token tensor ``[N]`` into one tensor per round."""
        return list(torch.split(values, self.gamma.tolist()))


def load_rounds(
    paths: list[Path], heads: dict | None = None, pair: ModelPair | None = None, blocks=(1, 2, 3, 4)
) -> RecordedRounds:
    """The rounds of PACER data shards (``spec_core.train.pacer``), with the predictions of ``heads`` (head
    variant → pre-verifier), if given. A paper head (it reads the drafted tokens' embeddings, from ``pair``)
    scores each block on its own: its predictions are kept per block size in ``blocks``."""

    if not paths:
        raise SpecScopeError("no recorded rounds: run `python -m spec_core train pacer` first (it writes runs/pacer/)")
    data = load_data(paths)
    greedy = torch.cat([torch.full((shard_rounds(p),), load_meta(p).get("sampled") != "True") for p in paths])
    predicted = {}
    for variant, head in (heads or {}).items():
        if getattr(head.cfg, "design", "") == "paper":
            if "token_embed" not in data and head.cfg.use_token:
                if pair is None or "token" not in data:
                    raise SpecScopeError("a paper head needs the pair and shards that record the drafted tokens")
                data["token_embed"] = token_embeddings(pair, data["token"])
            everything = torch.ones(len(data["label"]), dtype=torch.bool)
            for b in sorted({*blocks, PacerParams().block}):
                predicted[paper_key(variant, b)] = paper_predictions(head, data, everything, b)
            predicted[variant] = predicted[paper_key(variant, PacerParams().block)]
            continue
        with torch.inference_mode():
            predicted[variant] = head.predict(data["hidden"].float(), data["position"].long(), data["prob_features"])
    return RecordedRounds(
        data["round_gamma"].long(), data["round_accepted"].long(), data["round_prompt"].long(), greedy, predicted
    )


def shard_rounds(path: Path) -> int:
    """How many rounds one shard holds."""

    with safe_open(str(path), "pt") as f:
        return f.get_slice("round_gamma").get_shape()[0]


def replay(rounds: RecordedRounds, lengths: torch.Tensor, costs: CostProfile, head_calls: torch.Tensor | None = None):
    """Tokens, time and rate of drafting ``lengths`` ``[R]`` tokens in each recorded state (:meth:`CostProfile.replay`)."""
    lengths = torch.minimum(lengths.long(), rounds.gamma)
    calls = head_calls.numpy() if head_calls is not None else 0
    return costs.replay(lengths.numpy(), rounds.accepted.numpy(), calls)


def pacer_lengths(rounds: RecordedRounds, params) -> tuple[torch.Tensor, torch.Tensor]:
    """PACER's stop rule replayed on every round: (draft lengths [R], pre-verifier calls [R])."""

    if params.head not in rounds.predicted:
        raise SpecScopeError(
            f"replaying {params.describe()} needs the predictions of its head ({params.head or 'shipped'})"
        )

    per_round = rounds.per_round(
        rounds.predicted.get(paper_key(params.head, params.block), rounds.predicted[params.head])
    )
    lengths = torch.tensor([replay_length(p, params, budget=int(g)) for p, g in zip(per_round, rounds.gamma)])
    return lengths, (lengths + params.block - 1) // params.block


def policy_table(
    rounds: RecordedRounds, costs: CostProfile, pacer: Mapping[str, PacerParams] | None = None
) -> pd.DataFrame:
    """One row per policy: fixed windows, the oracle and the given PACER settings (name → PacerParams)."""
    rows = []

    def add(name: str, lengths: torch.Tensor, calls: torch.Tensor | None = None) -> None:
        r = replay(rounds, lengths, costs, calls)
        rows.append({"policy": name, **r, "speedup_vs_ar": r.pop("speedup")})

    for k in FIXED_WINDOWS:
        if k <= int(rounds.gamma.max()):
            add(f"fixed:{k}", torch.full_like(rounds.gamma, k))
    add("oracle", rounds.accepted.clone())
    for name, params in (pacer or {}).items():
        add(name, *pacer_lengths(rounds, params))
    df = pd.DataFrame(rows)
    best_fixed = df[df["policy"].map(is_fixed_window)]["speedup_vs_ar"].max()
    oracle = float(df.loc[df["policy"] == "oracle", "speedup_vs_ar"].iloc[0])
    df["vs_best_fixed"] = df["speedup_vs_ar"] / best_fixed
    df["share_of_oracle_gain"] = (
        (df["speedup_vs_ar"] - best_fixed) / (oracle - best_fixed) if oracle > best_fixed else np.nan
    )
    return df


def tune_pacer(rounds: RecordedRounds, costs: CostProfile, grid: dict[str, list]) -> pd.DataFrame:
    """Every PACER setting of ``grid`` (keys of :class:`PacerParams`) replayed, best first."""

    rows = []
    keys = list(grid)
    for values in product(*(grid[k] for k in keys)):
        params = PacerParams(**dict(zip(keys, values)))
        if params.block > params.max_len:
            continue
        lengths, calls = pacer_lengths(rounds, params)
        r = replay(rounds, lengths, costs, calls)
        rows.append({**dict(zip(keys, values)), **r, "speedup_vs_ar": r.pop("speedup")})
    return pd.DataFrame(rows).sort_values("speedup_vs_ar", ascending=False, ignore_index=True)


def preverifier_share(pair: ModelPair, prompts: list[str], method: str = "pacer", max_new_tokens: int = 96) -> dict:
    """The pre-verifier's share of decode time, measured in real generations: Σ head time / Σ wall time."""

    head_ms = wall_ms = 0.0
    calls = 0
    for prompt in prompts:
        result = generate(pair, prompt, method, max_new_tokens=max_new_tokens)
        traces = [e.policy_trace for e in result.events]
        head_ms += sum(t.get("head_ms", 0.0) for t in traces)
        calls += sum(len(t.get("blocks", ())) for t in traces)
        wall_ms += result.stats.wall_s * 1000
    return {
        "method": method,
        "prompts": len(prompts),
        "head_ms": head_ms,
        "wall_ms": wall_ms,
        "calls": calls,
        "share": head_ms / wall_ms if wall_ms else 0.0,
    }


def pacer_setting(text: str) -> PacerParams:
    """The :class:`PacerParams` of a ``--pacer`` setting (``pacer``, ``pacer:b=1,t=0.5``), parsed by the method
    parser; anything but a PACER policy is refused."""
    policy = spec_of(text).policy
    if policy is None or policy.family != "pacer":
        raise SpecScopeError(f"--pacer takes PACER settings (e.g. 'pacer;pacer:b=1'), got {text!r}")
    return policy.params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze policies", description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default="feature", help="embedded draft: feature (default) or standalone")
    ap.add_argument("--data", default=None, help="recorded rounds (default runs/pacer/<draft>)")
    ap.add_argument("--pacer", default="pacer", help="PACER settings to replay, ';'-separated (e.g. 'pacer;pacer:b=1')")
    ap.add_argument("--sampled", action="store_true", help="also use the sampled rounds (default: greedy only)")
    ap.add_argument("--heldout-only", action="store_true", help="only the prompts the head did not train on")
    ap.add_argument("--tune", action="store_true", help="grid-search PACER's b, t, rho, max on these rounds")
    ap.add_argument("--repeats", type=int, default=10, help="repeats of each cost measurement")
    ap.add_argument(
        "--costs",
        default=None,
        help="JSON of CostProfile fields (widths, target_ms, draft_ms, engine_ms, head_ms) instead of "
        "measuring now, e.g. costs measured alone on the machine",
    )
    add_threads(ap, 1)
    ap.add_argument(
        "--overhead-prompts",
        default=None,
        help="also measure the pre-verifier's share of decode time on these prompts (JSON lines)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="write the results as JSON here (with --prompts: a CSV, one row per policy and prompt)",
    )
    new = ap.add_argument_group("per-prompt records (the policy playground, spec_core.serve.playground)")
    new.add_argument(
        "--prompts",
        default=None,
        help="record each prompt's greedy answer (JSON lines) and replay "
        "every policy on it, instead of the training rounds",
    )
    new.add_argument(
        "--policies",
        default=None,
        help="comma-separated policies (default: fixed windows, heuristic, confidence, the --pacer settings, oracle)",
    )
    new.add_argument("--max-new-tokens", type=int, default=96)
    new.add_argument("--max-len", type=int, default=16, help="drafts recorded per position")
    new.add_argument("--confidence", type=float, default=0.4, help="T of confidence:T in the default policies")
    new.add_argument("--measure", type=int, default=2, help="also run the engine on the first N prompts")
    new.add_argument("--limit", type=int, default=0, help="only the first N prompts (0 = all)")
    new.add_argument("--dtype", default="bfloat16", help="the pair's precision (float32: the replay is exact)")
    new.add_argument("--save-records", default=None, help="write each prompt's record (JSON) in this folder")
    args = ap.parse_args(argv)
    if args.prompts:
        return prompts_main(args)
    torch.set_num_threads(args.threads)

    pair = load_pair("embedded", draft=args.draft)
    settings = {text.strip(): pacer_setting(text.strip()) for text in args.pacer.split(";") if text.strip()}
    loaded = {
        variant: load_head(find_head(pair.draft_card, variant))
        for variant in {"", *(p.head for p in settings.values())}
    }
    heads = {variant: head for variant, (head, _) in loaded.items()}
    head, card = loaded[""]
    paths = sorted(Path(args.data or RUNS_DIR / args.draft).glob("shard_*.safetensors"))
    rounds = load_rounds(paths, heads, pair, blocks=sorted({1, 2, 3, 4, *(p.block for p in settings.values())}))
    mask = torch.ones_like(rounds.greedy) if args.sampled else rounds.greedy.clone()
    if args.heldout_only:
        mask &= rounds.prompt % card["training"].get("heldout_every", TrainConfig.heldout_every) == 0
    rounds = rounds.select(mask)
    if len(rounds.gamma) == 0:
        raise SpecScopeError("no recorded rounds left after the selection")
    if args.costs:
        raw = json.loads(Path(args.costs).read_text())
        costs = CostProfile.from_dict(raw)
    else:
        costs = measure_round_costs(pair, head, max((p.block for p in settings.values()), default=2), args.repeats)
    table = policy_table(rounds, costs, settings)
    pd.set_option("display.width", 200)
    print(
        f"{len(rounds.gamma)} recorded rounds ({'greedy + sampled' if args.sampled else 'greedy'}), "
        f"window {int(rounds.gamma.max())}, draft {args.draft}; costs (ms): {asdict(costs)}"
    )
    print(table.round(4).to_string(index=False))
    oracle = table.set_index("policy").loc["oracle"]
    best = table[table["policy"].map(is_fixed_window)].sort_values("speedup_vs_ar").iloc[-1]
    print(f"\noracle gain over the best fixed window ({best['policy']}): x{oracle['vs_best_fixed']:.3f}")
    result = {
        "rounds": len(rounds.gamma),
        "costs": asdict(costs),
        "table": table.to_dict("records"),
        "best_fixed": best["policy"],
        "oracle_vs_best_fixed": float(oracle["vs_best_fixed"]),
    }
    if args.tune:
        grid: dict[str, list] = {
            "block": [1, 2, 3, 4],
            "threshold": [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
            "rho": [1.0, 1.1, 1.2, 1.3, 1.5],
            "max_len": [4, 6, 8],
        }
        tuned = tune_pacer(rounds, costs, grid)
        print("\nPACER settings replayed on these rounds, best first:")
        print(tuned.head(15).round(4).to_string(index=False))
        result["tuned"] = tuned.head(30).to_dict("records")
        result["default"] = asdict(PacerParams())
    if args.overhead_prompts:
        texts = [p["prompt"] for p in load_prompts(args.overhead_prompts)]
        share = preverifier_share(pair, texts, next(iter(settings), "pacer"))
        print(
            f"\npre-verifier: {share['calls']} calls, {share['head_ms']:.0f} ms of {share['wall_ms']:.0f} ms decode "
            f"time ({100 * share['share']:.2f}%)"
        )
        result["preverifier_share"] = share
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=float) + "\n")
        print(f"wrote {args.out}")
    return 0
