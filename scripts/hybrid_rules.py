"""How far a per-round forecast could take ``hybrid`` past ``lookup``: choice rules replayed on recorded answers.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/hybrid_rules.py record --per-category 6 --offset 10 --out runs/tune.json
    PYTHONPATH=. .venv/bin/python scripts/hybrid_rules.py record --per-category 5 --offset 70 --out runs/held.json
    PYTHONPATH=. .venv/bin/python scripts/hybrid_rules.py replay --fit runs/tune.json --on runs/held.json \\
        --table assets/results/costs/epyc-zen4-avx512-1thread.json

``record`` writes each Spec-Bench first turn's greedy answer (the embedded pair, int8, one thread) with the draft
network's greedy chain at every position and its q (:func:`~spec_core.engine.hybrid_replay.network_chains`).
``replay`` walks the rounds of each answer under a cost table, with no model call, for these rules:

- ``lookup``: ``lookup`` as it runs (:func:`~spec_core.engine.lookup_replay.replay_cost`), the baseline;
- ``record``: ``hybrid``'s one-source rule (:class:`~spec_core.drafters.lookup.HybridDrafter`): the copy at its
  estimates' best length, against the network's record in this answer (tokens over price, from its prior) and a
  plain step; the network's length from the ``cost`` policy on its q. Its start and its one-in-8 exploration are
  left out, as :mod:`scripts.priced_rounds` leaves the start out;
- ``forecast``: every round drafts the network's first token first (one draft forward, paid whatever the round
  does), then picks the copy, the network's chain or a plain step. The copy's first token is forecast by the rate
  at which it was kept in ``--fit``'s answers, by whether it is the network's token and by the network's q
  (bucketed at ``--q-bins``), learned further from this answer's own rounds as the copy's estimates are;
- ``oracle-source``: knows which source's round keeps most, at the rules' own lengths (a perfect source forecast).

It prints, per rule, the ratio of its median speedup to ``lookup``'s (the bench's statistic), the median of the
per-answer ratios, and the ratio of total times. The prefill is left out of all.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
import torch

from spec_core.core.cost_model import CostProfile
from spec_core.core.cost_tables import given_table
from spec_core.core.errors import SpecScopeError
from spec_core.drafters.lookup import PRIOR_FIRST, PRIOR_WEIGHT, KeepEstimates, LookupParams
from spec_core.engine.hybrid_replay import network_chains
from spec_core.engine.lookup_replay import CopyAt, copies, replay_cost, run_length
from spec_core.policies.cost import MAX_LEN

RULES = ("lookup", "record", "forecast", "oracle-source")


def record(a: argparse.Namespace) -> None:
    from spec_core.analysis.lookup import record_answers
    from spec_core.model.models import load_pair
    from spec_core.serve import spec_bench

    torch.set_num_threads(1)
    pair = load_pair("embedded", dtype="int8")
    prompts = [p for p in spec_bench.select(a.per_category, a.offset) if not p.get("history")]
    answers = record_answers(pair, prompts, a.max_new_tokens)
    for ans in answers:
        ans["chains"] = network_chains(pair, ans["prompt_ids"], ans["tokens"])
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(answers))
    print(f"wrote {a.out}: {len(answers)} answers")


class Replay:
    """The rounds of one rule over one answer, priced by ``profile``."""

    def __init__(self, profile: CostProfile, limit: int, prior: dict[tuple[bool, int], float], bins: tuple[float, ...]):
        self.p, self.limit, self.prior, self.bins = profile, limit, prior, bins

    def ms(self, width: int, forwards: int) -> float:
        return float(self.p.round_ms(width, forwards))

    def network_length(self, q: tuple[float, ...], room: int) -> int:
        """The ``cost`` policy's length on the network's q (its first token always drafted)."""
        a, length = np.asarray(q, dtype=float), 1
        while length < min(len(a), room):
            kept = np.cumprod(a[:length])
            now = (1 + kept.sum()) / self.ms(length + 1, length)
            more = np.arange(1, MAX_LEN - length + 1)
            later = (1 + kept.sum() + kept[-1] * np.cumsum(a[length - 1] ** more)) / self.p.round_ms(
                length + 1 + more, length + more
            )
            if later.max() <= now:
                break
            length += 1
        return length

    def copy_best(self, estimates: list[float], forwards: int) -> tuple[float, int]:
        """The copy's best tokens per millisecond and its length (0: none)."""
        best, length, tokens, kept = 0.0, 0, 1.0, 1.0
        for i, e in enumerate(estimates, 1):
            kept *= e
            tokens += kept
            if tokens / self.ms(i + 1, forwards) > best:
                best, length = tokens / self.ms(i + 1, forwards), i
        return best, length

    def key(self, copy: CopyAt, chain: tuple) -> tuple[bool, int]:
        return copy.tokens[0] == chain[0][0], int(sum(chain[1][0] >= b for b in self.bins))

    def run(self, rule: str, answer: list[int], at: list[CopyAt], chains: list) -> float:
        """The answer's priced milliseconds under ``rule``."""
        n = min(len(answer), self.limit)
        estimates, rates = KeepEstimates(), {}
        plain = self.ms(1, 0)
        record = [PRIOR_WEIGHT * (1 + PRIOR_FIRST), PRIOR_WEIGHT * self.ms(2, 1)]  # the hybrid's network prior
        pos, total = 0, 0.0
        while pos < n:
            room, copy, (tokens, q) = n - pos - 1, at[pos], chains[pos]
            est = [estimates.estimate(copy.n, i + 1, copy.recurred) for i in range(len(copy.tokens))][:room]
            net = min(self.network_length(q, room), room) if room else 0
            net_value = (1 + np.cumprod(q[:net]).sum()) / self.ms(net + 1, net) if net else 0.0
            source, length, forwards = "plain", 0, 0
            if rule == "record":
                value, length = self.copy_best(est, 0)
                own = record[0] / record[1]
                if length and value >= max(own, 1 / plain):
                    source = "copy"
                elif net and own >= 1 / plain:
                    source, length, forwards = "net", net, net
            elif rule == "forecast" and room:
                options = [(1 / self.ms(1, 1), "plain", 0, 1), (net_value, "net", net, net)]
                if est:
                    k = self.key(copy, chains[pos])
                    kept, tried = rates.get(k, (0.0, 0.0))
                    est[0] = (kept + PRIOR_WEIGHT * self.prior.get(k, PRIOR_FIRST)) / (tried + PRIOR_WEIGHT)
                    value, copied = self.copy_best(est, 1)
                    options.append((value, "copy", copied, 1))
                _, source, length, forwards = max(options)
            elif rule == "oracle-source":
                value, copied = self.copy_best(est, 0)
                options = [(1 / plain, "plain", 0, 0)]
                if copied:
                    options.append(((min(copy.match, copied) + 1) / self.ms(copied + 1, 0), "copy", copied, 0))
                if net:
                    options.append(
                        ((min(run_length(tokens, answer[pos:]), net) + 1) / self.ms(net + 1, net), "net", net, net)
                    )
                _, source, length, forwards = max(options)
            if source == "copy":
                keep = min(copy.match, length)
            elif source == "net":
                keep = min(run_length(tokens, answer[pos:]), length)
            else:
                keep, length = 0, 0
            total += self.ms(length + 1, forwards)
            if source == "net":
                record[0] += keep + 1
                record[1] += self.ms(length + 1, forwards)
            if copy.tokens:  # the copy learns from every round's verified text, as the drafter's learn does
                text = answer[pos : pos + keep + 1]
                match = run_length(copy.tokens, text)
                estimates.update(
                    copy.n, match if match == len(text) else min(len(copy.tokens), match + 1), match, copy.recurred
                )
                if rule == "forecast" and room:
                    row = rates.setdefault(self.key(copy, chains[pos]), [0.0, 0.0])
                    row[0] += copy.match > 0
                    row[1] += 1
            pos += keep + 1
        return total


def first_token_rates(answers: list[dict], bins: tuple[float, ...], limit: int) -> dict[tuple[bool, int], float]:
    """How often the copy's first token was kept, by (it is the network's token, the network's q bucket)."""
    counts: dict[tuple[bool, int], list[int]] = {}
    for ans in answers:
        for copy, (tokens, q) in list(zip(ans["copy"], ans["chains"]))[:limit]:
            if copy.tokens:
                row = counts.setdefault((copy.tokens[0] == tokens[0], int(sum(q[0] >= b for b in bins))), [0, 0])
                row[0] += copy.match > 0
                row[1] += 1
    return {k: kept / tried for k, (kept, tried) in counts.items()}


RECORDED = ("prompt_ids", "tokens", "special_ids", "chains")  # what ``record`` writes for each answer


def load(path: str) -> list[dict]:
    try:
        answers = json.loads(Path(path).read_text())
    except ValueError as err:
        raise SpecScopeError(f"{path} is not JSON ({err}); give a file that `record` wrote") from err
    if (
        not isinstance(answers, list)
        or not answers
        or not all(isinstance(a, dict) and all(k in a for k in RECORDED) for a in answers)
    ):
        raise SpecScopeError(f"{path} was not written by `record`: it needs a list of answers, each with {RECORDED}")
    for ans in answers:
        ans["copy"] = copies(ans["prompt_ids"], ans["tokens"], LookupParams(), frozenset(ans["special_ids"]))
    return answers


def replay(a: argparse.Namespace) -> None:
    profile = given_table(a.table, "--table").profiles["int8"]
    bins = tuple(float(b) for b in a.q_bins.split(","))
    prior = first_token_rates(load(a.fit), bins, a.max_new_tokens)
    answers = load(a.on)
    replayer = Replay(profile, a.max_new_tokens, prior, bins)
    base = [replay_cost(ans["copy"], profile, a.max_new_tokens) for ans in answers]
    ar = [profile.step_ms * min(len(ans["tokens"]), a.max_new_tokens) for ans in answers]
    base_speed = [x / r.ms for x, r in zip(ar, base)]
    print(f"priced by {Path(a.table).name}; {len(answers)} answers of {a.on}; forecast fitted on {a.fit}")
    print(
        "the copy's first token kept, by (the network's token, its q bucket):",
        {k: round(v, 3) for k, v in sorted(prior.items())},
    )
    print("rule            median/lookup's  median ratio  total")
    for rule in RULES:
        ms = (
            [r.ms for r in base]
            if rule == "lookup"
            else [replayer.run(rule, ans["tokens"], ans["copy"], ans["chains"]) for ans in answers]
        )
        speed = [x / m for x, m in zip(ar, ms)]
        print(
            f"{rule:15s} {statistics.median(speed) / statistics.median(base_speed):15.3f}"
            f" {statistics.median(np.divide(speed, base_speed)):13.3f} {sum(r.ms for r in base) / sum(ms):6.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="answers and the network's chains, to a JSON file")
    rec.add_argument("--per-category", type=int, default=6)
    rec.add_argument("--offset", type=int, default=10)
    rec.add_argument("--max-new-tokens", type=int, default=128)
    rec.add_argument("--out", required=True)
    rep = sub.add_parser("replay", help="the rules on recorded answers, priced by a cost table")
    rep.add_argument("--fit", required=True, help="recorded answers the forecast's rates are counted on")
    rep.add_argument("--on", required=True, help="recorded answers the rules are replayed on")
    rep.add_argument("--table", required=True, help="a cost table JSON")
    rep.add_argument("--q-bins", default="0.5", help="the network's q buckets' edges, comma-separated")
    rep.add_argument("--max-new-tokens", type=int, default=128)
    a = ap.parse_args(argv)
    try:
        record(a) if a.command == "record" else replay(a)
    except (
        OSError,
        ValueError,
        KeyError,
        TypeError,
        IndexError,
        SpecScopeError,
    ) as err:  # a file not written by record
        print(f"error: {err}" if isinstance(err, SpecScopeError) else f"error: {err.__class__.__name__}: {err}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
