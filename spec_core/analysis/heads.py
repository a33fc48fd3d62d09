"""``python -m spec_core analyze heads``: the app's "which pre-verifier?" comparison, printed from shipped assets.

The rows of :func:`spec_core.policies.pacer_heads.compare` on the shipped rounds (``assets/results/pacer-rounds-*``):
PACER's rule driven by each shipped head and by the draft's own Π q (t tuned for each), a perfect pre-verifier,
``fixed:1`` … ``fixed:4`` and the oracle, each with its predicted speedup over ``ar`` and H, the share of a perfect
pre-verifier's gain over the best fixed window it captures (:mod:`spec_core.policies.pacer_headroom`, a 90%
bootstrap interval over the rounds). Priced under a shipped cost table (``--costs FILE --precision P``, e.g.
``assets/results/costs/xeon-amx-1thread.json``) or the accelerator model (``--costs accelerator``), so a docs
table made by it is reproduced from a clone (``tests/unit/test_docs_numbers.py`` does).

``--prompts FILE`` asks the same question of a prompt set's own rounds instead: the embedded pair drafts a long
window (``fixed:8``, greedy) over each prompt, the shipped heads score every drafted token, and the rows are priced
as above (each head's call at the shipped rounds' price, so the table is the same on any machine). On the
benchmark's prompts this says how far any t could take ``pacer`` there: t is tuned on the very rounds it is judged
on, an upper bound no rule tuned elsewhere can pass. An analysis, never an input: ``t=auto`` replays training
prompts only (:mod:`spec_core.policies.pacer_tuning`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from spec_core.core.cost_model import CostProfile, accelerator_profile
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import DEFAULT_DRAFT_RATIO
from spec_core.core.precision import read_table as table_file
from spec_core.model.models import ModelPair, load_pair
from spec_core.policies.pacer_heads import HeadRow, compare, rounds_card, shipped_comparison
from spec_core.policies.pacer_tuning import TuningRounds, load_rounds
from spec_core.serve.prompts import load_prompts

ACCELERATOR = "accelerator"


def read_table(path: Path, precision: str) -> CostProfile:
    """One precision's profile from a cost table file (:func:`spec_core.core.precision.read_table`)."""
    profiles = table_file(path)
    if precision not in profiles:
        raise SpecScopeError(f"{path} has no {precision!r} profile (it has: {', '.join(sorted(profiles)) or 'none'})")
    return profiles[precision]


def costs_of(costs: str, precision: str) -> CostProfile:
    return accelerator_profile(DEFAULT_DRAFT_RATIO) if costs == ACCELERATOR else read_table(Path(costs), precision)


def rows_table(rows: list[HeadRow]) -> list[dict]:
    """The printed columns of each row (3 decimals: what the docs quote)."""
    out = []
    for r in rows:
        h = r.headroom
        out.append(
            {
                "rule": r.name,
                "speedup": f"{r.speedup:.3f}",
                "headroom": "" if h is None else f"{h.value:.2f}",
                "interval": "" if h is None else f"{h.low:.2f} … {h.high:.2f}",
                "t": "" if r.threshold is None or r.kind == "perfect" else f"{r.threshold:g}",
                "auc_first": "" if r.auc_first is None else f"{r.auc_first:.3f}",
                "drafted_per_round": f"{r.drafted_per_round:.2f}",
            }
        )
    return out


def markdown(table: list[dict]) -> str:
    header = list(table[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[k] for k in header) + " |" for row in table]
    return "\n".join(lines)


WINDOW = 8  # the long window the rounds are drafted with (PACER's max: every rule's length fits in it)


def prompt_rounds(pair: ModelPair, prompts: list[str], work_dir: Path, max_new_tokens: int) -> TuningRounds:
    """The rounds of ``fixed:8`` over ``prompts`` (greedy, ``max_new_tokens`` each; resumable in ``work_dir``),
    scored by the shipped heads of the pair's draft, each head's call priced as in the shipped rounds."""
    from spec_core.analysis.pacer_rounds import write_rounds  # loads the training stack: only for --prompts
    from spec_core.train.pacer import SimConfig, simulate  # the simulation, likewise

    cfg = SimConfig(
        out_dir=work_dir / pair.draft_design,
        prompts=tuple(prompts),
        window=WINDOW,
        max_new_tokens=max_new_tokens,
        sampled_fraction=0.0,
    )
    simulate(pair, cfg)
    write_rounds(cfg.out_dir, pair, out_dir=work_dir, head_ms=rounds_card(pair.draft_design).get("head_ms"))
    rounds = load_rounds(pair.draft_design, work_dir)
    assert rounds is not None  # just written
    return rounds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core analyze heads", description=__doc__.splitlines()[0])
    ap.add_argument("--costs", default=ACCELERATOR, help="a cost table JSON (shipped or cached), or 'accelerator'")
    ap.add_argument("--precision", default="int8", help="the table's profile to price with (not for 'accelerator')")
    ap.add_argument("--draft", default="feature", help="the shipped rounds of this draft design")
    ap.add_argument(
        "--prompts", help="a prompt file (JSON lines, or Spec-Bench's questions): compare on its own rounds instead"
    )
    ap.add_argument("--max-new-tokens", type=int, default=64, help="with --prompts: new tokens per prompt")
    ap.add_argument("--work-dir", help="with --prompts: where its rounds go (resumable; default runs/heads/FILE-N)")
    ap.add_argument("--threads", type=int, default=1, help="with --prompts: torch CPU threads")
    a = ap.parse_args(argv)
    try:
        costs = costs_of(a.costs, a.precision)
        rows = on_prompts(a, costs) if a.prompts else list(shipped_comparison(costs, draft_design=a.draft))
    except SpecScopeError as err:
        print(f"error: {err}")
        return 2
    if not rows:
        print(f"error: no shipped rounds for the {a.draft!r} draft (assets/results/pacer-rounds-{a.draft})")
        return 2
    print(markdown(rows_table(rows)))
    return 0


def priced_by(a: argparse.Namespace) -> str:
    return "the accelerator model" if a.costs == ACCELERATOR else f"{Path(a.costs).name} ({a.precision})"


def on_prompts(a: argparse.Namespace, costs: CostProfile) -> list[HeadRow]:
    """``--prompts``: the comparison on the file's own rounds (first turns: a second turn's context is another
    run's answer), drafted at ``--precision`` (the arithmetic the table prices)."""
    if not 1 <= a.max_new_tokens <= 1024:
        raise SpecScopeError(f"--max-new-tokens needs 1 … 1024, got {a.max_new_tokens}")
    if a.threads < 1:
        raise SpecScopeError(f"--threads needs at least 1, got {a.threads}")
    rows = load_prompts(a.prompts)
    prompts = [r["prompt"] for r in rows if not r.get("history")]
    if not prompts:
        raise SpecScopeError(f"{a.prompts}: no first turn to draft over")
    torch.set_num_threads(a.threads)
    pair = load_pair("embedded", "cpu", a.precision, draft=a.draft)
    work = Path(a.work_dir or Path("runs") / "heads" / f"{Path(a.prompts).stem}-{a.max_new_tokens}")
    rounds = prompt_rounds(pair, prompts, work, a.max_new_tokens)
    left = len(rows) - len(prompts)
    print(
        f"{len(rounds.gamma):,} rounds of fixed:{WINDOW} (greedy, {a.precision}) on {len(prompts)} prompts of "
        f"{a.prompts}" + (f" ({left} second turns left out)" if left else "") + f"; priced by {priced_by(a)}\n"
    )
    return compare(rounds, costs)
