"""Command line: ``python -m spec_core {generate,bench,train,analyze} ...``.

Bad input ends with a one-line ``error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from spec_core.analysis.bench import run_bench, summarize
from spec_core.analysis.costs import acceptance_needed, measure_costs, round_breakdown
from spec_core.analysis.machine import machine_costs
from spec_core.core import precision
from spec_core.core.cli_args import add_threads
from spec_core.core.cost_tables import run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.precision import PRECISION_ENV
from spec_core.core.threads import apply_threads
from spec_core.core.types import SamplingConfig
from spec_core.engine.loop import Generation
from spec_core.engine.methods import parse_method, split_methods
from spec_core.model.invariance import is_batch_invariant
from spec_core.model.models import load_pair
from spec_core.model.prompting import check_prompt, prompt_ids
from spec_core.serve import spec_bench
from spec_core.serve.prompts import load_prompts

if TYPE_CHECKING:
    from torch import nn

    from spec_core.model.models import ModelPair

DEFAULT_PROMPTS = "prompts/specscope.jsonl"  # bench's prompt set without --prompts or --suite


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pair", default="embedded", help="'embedded' (offline default) or 'TARGET_ID,DRAFT_ID'")
    p.add_argument("--draft", default=None, help="embedded pair: draft asset name (feature, standalone, truncated)")
    p.add_argument(
        "--dtype",
        default=None,
        help="precision: auto (default: what this machine's cost table predicts fastest), bfloat16, "
        "float32, float16 or int8 (weight-only int8 target)",
    )
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    add_threads(p, None)


def _add_sampling_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=_positive_int, default=128)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)


def _pair(args):
    apply_threads(args.threads)  # --threads, else the cores this process may use
    pair = load_pair(args.pair, device=args.device, dtype=args.dtype, draft=args.draft, operator=True)
    _, table = run_costs(pair)  # read, never timed: the runs are priced with it (spec_core/core/cost_tables.py)
    pinned = os.environ.get(PRECISION_ENV, "auto").strip() not in ("", "auto")
    auto = (args.dtype or "auto") == "auto" and not pinned
    print(table.sentence(pair.precision, auto), file=sys.stderr, flush=True)
    return pair


def cmd_generate(args) -> int:
    sampling = SamplingConfig(args.temperature, args.top_p, args.top_k, args.seed).validate()
    check_prompt(args.prompt)  # bad input is refused before the pair loads
    parse_method(args.method)
    pair = _pair(args)
    run = Generation(pair, args.prompt, args.method, args.max_new_tokens, sampling, chat=not args.no_chat)
    for event in run.rounds():
        if args.show_rounds:
            kept = "".join(event.draft_pieces[: event.accepted])
            dropped = "".join(event.draft_pieces[event.accepted :])
            print(f"[{event.index:3d}] +{kept!r} ✗{dropped!r} {event.next_kind}:{event.next_piece!r}", file=sys.stderr)
    r = run.result()
    print(r.text)
    s = r.stats
    print(
        f"--- {args.method}: {s.new_tokens} tokens in {s.wall_s:.2f} s wall ({s.tokens_per_s:.1f} tok/s decoding), "
        f"{s.target_forwards} target forwards, tau {s.tau:.2f}, acceptance {s.acceptance_rate:.2f}",
        file=sys.stderr,
    )
    return 0


def cmd_bench(args) -> int:
    methods = split_methods(args.methods)
    if not methods:
        raise SpecScopeError("--methods is empty")
    for m in methods:
        parse_method(m)
    if args.suite and args.prompts:
        raise SpecScopeError("give --suite or --prompts, not both")
    if args.suite:
        prompts = spec_bench.select(spec_bench.parse_suite(args.suite))[: args.limit]
    else:
        prompts = load_prompts(args.prompts or DEFAULT_PROMPTS)[: args.limit]
    if args.temperature < 0:
        raise SpecScopeError(f"temperature must be >= 0, got {args.temperature}")
    pair = _pair(args)

    def pair_for(precision: str) -> ModelPair:
        return load_pair(args.pair, device=args.device, dtype=precision, draft=args.draft, operator=True)

    df = run_bench(
        pair, prompts, methods, args.max_new_tokens, args.temperature, args.repeats, args.seed, pair_for=pair_for
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    print(summarize(df).to_string())
    if df["category"].fillna("").astype(str).ne("").any():
        print("\nper category (Spec-Bench's table): median speedup vs the fastest ar of the run")
        print(spec_bench.leaderboard(df).to_string())
    print(
        f"wrote {out} ({len(df)} rows; default precision {pair.precision}, device {pair.device}, "
        f"draft {pair.draft_design})"
    )
    return 0


def cmd_costs(args) -> int:
    from spec_core.model.draft_assets import available_drafts, load_draft  # transformers' modeling code (~2 s)
    from spec_core.model.draft_networks import build_truncated  # only `costs` on the embedded pair needs it

    if args.machine:  # the table `auto` picks from: every precision measured, cached, explained
        if args.threads:
            torch.set_num_threads(args.threads)
        table = machine_costs(args.pair, refresh=True)
        print(precision.explain(table))
        busy = any("busy" in p.extra for p in table.values())
        kept = "kept as provisional (the machine was busy)" if busy else "cached"
        where = f"{kept} in {precision.table_path()}"
        print(f"auto picks {precision.choose(table)} on this machine; {where}")
        return 0
    pair = _pair(args)
    drafts: dict[str, nn.Module] = {"truncated": build_truncated(pair.parts_target)}
    if pair.name == "embedded":
        drafts |= {name: load_draft(pair.parts_target, name)[0] for name in available_drafts()}
    own = pair.draft_card.get("name") or "pair"
    if own not in drafts and pair.draft is not None:
        drafts[own] = pair.draft
    df = measure_costs(pair, drafts, args.repeats)
    print(df.to_string(index=False))
    passes = "batch-invariant" if is_batch_invariant(pair.target) else "plain"  # the passes generation runs
    print(
        f"(precision {pair.precision}, device {pair.device}, {torch.get_num_threads()} thread(s), {args.repeats} "
        f"repeats, context 200 tokens, {passes} target passes)"
    )
    for name in drafts:
        if name == "truncated":
            continue
        need = acceptance_needed(df, name, args.speedup, args.tau, overhead_ms=args.overhead_ms)
        print(
            f"\nper-token acceptance fixed:k needs with the {name} draft (i.i.d. model, Leviathan et al. 2023; "
            f"engine overhead {args.overhead_ms:g} ms per round)"
        )
        print(need.to_string(index=False))
    methods = split_methods(args.methods)
    if methods and pair.draft is not None:
        prompts = [p["prompt"] for p in load_prompts(args.prompts)[: args.limit]]
        # the model's costs at the rounds' own mean context (prompt + half the answer), not the table's 200 tokens
        context = round(statistics.mean(len(prompt_ids(pair, p)) for p in prompts) + args.max_new_tokens / 2)
        at_context = measure_costs(pair, {own: pair.draft}, args.repeats, context=context)
        rounds = round_breakdown(pair, at_context, own, prompts, methods, args.max_new_tokens, args.round_repeats)
        print(
            f"\nwhere a round's time goes ({own} draft; ms per round; {len(prompts)} prompts × "
            f"{args.round_repeats} repeats, {args.max_new_tokens} new tokens, greedy) and the decode speedup "
            f"over ar, measured vs predicted by the cost model for the same rounds (costs measured at the "
            f"rounds' mean context, {context} tokens; draft_ms includes the drafter's commit, e.g. the feature "
            "draft's fusion of the target's features, which its measured draft step includes too)"
        )
        print(rounds.to_string(index=False))
    return 0


DELEGATED = {  # commands owned by their modules: `main(argv) -> int` there, so their --help is their own
    ("train", "draft"): "spec_core.train.draft",
    ("train", "block"): "spec_core.train.block",
    ("train", "data"): "spec_core.train.data",
    ("train", "pacer"): "spec_core.train.pacer",
    ("train", "diversed"): "spec_core.train.diversed",
    ("train", "copy"): "spec_core.train.copy",
    ("analyze", "block"): "spec_core.analysis.block",
    ("analyze", "policies"): "spec_core.analysis.policies",
    ("analyze", "preverifier"): "spec_core.analysis.preverifier",
    ("analyze", "trees"): "spec_core.analysis.trees",
    ("analyze", "lookup"): "spec_core.analysis.lookup",
    ("analyze", "heads"): "spec_core.analysis.heads",
    ("analyze", "calibration"): "spec_core.analysis.calibration",
    ("pareto", None): "spec_core.analysis.pareto",
    ("loadtest", None): "spec_core.analysis.loadtest",
}
HELP = {
    "train": "train a learned part: draft | copy | block | data | pacer | diversed (see `train WHAT --help`)",
    "analyze": "analyses: block (block drafters per loss) | policies (policy replay and oracle) | preverifier (PACER's heads vs the draft's Π q, held out) | trees (token-tree shapes) | lookup (prompt lookup replayed at every copy length on Spec-Bench answers) | heads (the app's which-pre-verifier comparison from shipped assets) | calibration (each shipped draft's own Π q: ECE, reliability, AUC)",
    "pareto": "acceptance vs quality of the verifiers on the evaluation split (see `pareto --help`)",
    "loadtest": "concurrent gradio_client users against a running app: latency, errors, isolation",
}


def cmd_delegated(module: str, rest: list[str]) -> int:
    """Hand the rest of the command line (``--help`` included) to the module that owns the command."""

    return importlib.import_module(module).main(rest)


def _delegated(argv: list[str]) -> tuple[str, list[str]] | None:
    if argv and (argv[0], None) in DELEGATED:
        return DELEGATED[(argv[0], None)], argv[1:]
    if len(argv) >= 2 and (argv[0], argv[1]) in DELEGATED:
        return DELEGATED[(argv[0], argv[1])], argv[2:]
    return None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m spec_core", description="SpecScope speculative decoding engine")
    sub = ap.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text with one method and print it with its stats")
    g.add_argument("--prompt", required=True)
    g.add_argument("--method", default="fixed:4", help="ar, fixed:K, heuristic, confidence:T, block:LOSS, ...")
    g.add_argument("--no-chat", action="store_true", help="feed the prompt raw, without the chat template")
    g.add_argument("--show-rounds", action="store_true", help="print each round's accepted/rejected drafts")
    _add_sampling_args(g)
    _add_model_args(g)

    b = sub.add_parser("bench", help="benchmark methods on a prompt set (CSV + summary)")
    b.add_argument(
        "--prompts",
        default=None,
        help=f"JSON lines with id, category, prompt, or Spec-Bench's question_id, category, turns (default {DEFAULT_PROMPTS})",
    )
    b.add_argument(
        "--suite",
        default=None,
        help="spec-bench[:N]: instead of --prompts, Spec-Bench's first N questions of each of its six categories "
        "(spec_core/serve/spec_bench.py; N = 2 when omitted)",
    )
    b.add_argument("--methods", default="ar,fixed:2,fixed:4,fixed:6,heuristic")
    b.add_argument("--max-new-tokens", type=_positive_int, default=96)
    b.add_argument("--temperature", type=float, default=0.0)
    b.add_argument("--repeats", type=_positive_int, default=3)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--limit", type=_positive_int, default=None, help="only the first N prompts")
    b.add_argument("--out", default="runs/bench.csv")
    _add_model_args(b)

    c = sub.add_parser("costs", help="time target forwards and draft steps side by side")
    c.add_argument("--repeats", type=_positive_int, default=20)
    c.add_argument("--speedup", type=float, default=1.5, help="speedup whose needed acceptance is reported")
    c.add_argument("--tau", type=float, default=3.0, help="τ whose needed acceptance is reported")
    c.add_argument("--overhead-ms", type=float, default=0.0, help="engine overhead per round in the estimate")
    c.add_argument("--methods", default="fixed:2,fixed:4", help="methods whose rounds are broken down ('' = none)")
    c.add_argument("--prompts", default="prompts/specscope.jsonl")
    c.add_argument("--limit", type=_positive_int, default=4, help="prompts for the round breakdown")
    c.add_argument("--max-new-tokens", type=_positive_int, default=96)
    c.add_argument("--round-repeats", type=_positive_int, default=3)
    c.add_argument(
        "--machine",
        action="store_true",
        help="measure every precision (the table `auto` picks from), cache it and say what auto picks",
    )
    _add_model_args(c)

    for command in ("train", "analyze", "pareto", "loadtest"):
        d = sub.add_parser(command, help=HELP[command])
        whats = [what for (cmd, what) in DELEGATED if cmd == command and what]
        if whats:
            d.add_argument("what", choices=whats)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        if (delegated := _delegated(argv)) is not None:  # before parsing: their --help is their own
            return cmd_delegated(*delegated)
        args, rest = parser.parse_known_args(argv)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return {"generate": cmd_generate, "bench": cmd_bench, "costs": cmd_costs}[args.command](args)
    except SpecScopeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
