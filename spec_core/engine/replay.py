"""Replaying draft-length policies on a recorded text, with no model call (the Playground's arithmetic).

A :class:`TextRecord` (recorded by :mod:`spec_core.serve.playground`: one batched pass over a greedy text) holds,
for every position of the target's greedy answer, the draft's greedy continuation, its probabilities, PACER's
pre-verifier scores and ``match[i]``, how many leading drafts the greedy lossless verifier keeps there.
:func:`replay_policy` replays any policy on it the engine's way: a round at position ``pos`` drafts ``L`` tokens
(the policy decides from the recorded row, with the engine's budget ``max_new_tokens − pos − 1``), keeps
``min(match[pos], L)`` and emits one more. ``fixed``, ``heuristic`` and ``confidence`` are the engine's own
policy objects fed the recorded drafts; PACER is :func:`~spec_core.policies.pacer.replay_length` on the recorded
scores. Time comes from the one cost model (:class:`~spec_core.core.cost_model.CostProfile`). The **oracle** knows
``match`` and the costs and plans the cheapest path (docs/ALGORITHMS.md §0): no policy is predicted above it.

Pure: numpy and the policies' own objects, so the views (:mod:`visuals.playground`, :mod:`visuals.hardware`) can
draw replays without reaching the model-running analysis floor.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spec_core.core.cost_model import CostProfile, profile_from_events, rounds_spread
from spec_core.core.cost_tables import machine_table
from spec_core.core.errors import SpecScopeError
from spec_core.core.quotes import Quote
from spec_core.engine.methods import spec_of
from spec_core.policies import DraftSoFar, make_policy
from spec_core.policies.pacer import PacerParams, replay_length

DEFAULT_MAX_LEN = 16  # drafts recorded per position: confidence:T's maximum, PACER's max slider's end
FIXED_WINDOWS = (1, 2, 3, 4, 6, 8)
ORACLE = "oracle"
# the embedded pair (bf16, feature draft, one thread) on this project's 2-core machine, 2026-11-29 (docs/LOG.md, "This
# machine": `python -m spec_core costs --threads 1`): the default when a record carries no costs of its own
DEFAULT_COSTS = CostProfile(
    widths=(1, 2, 4, 8, 16),
    target_ms=(93.8, 125.0, 166.1, 346.4, 614.4),
    draft_ms=7.6,
    engine_ms=2.2,
    head_ms=0.43,
    name="a reference machine",
    source="reference",
    about="an earlier session's measurement on this project's AVX2 machine (bfloat16)",
)


@dataclass(frozen=True)
class TextRecord:
    """One text's recorded pass: N positions (the answer's tokens), M drafts recorded per position."""

    prompt: str
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]  # y: the target's greedy answer (cut at EOS or max_new_tokens)
    max_new_tokens: int  # the generation's limit (the engine's budget reads it)
    draft_tokens: np.ndarray  # [N, M] int64: the draft's greedy continuation from each position
    draft_probs: np.ndarray  # [N, M] float32: the draft's (temperature-1) probability of each drafted token
    match: np.ndarray  # [N] int64: leading drafts equal to y[i:], what the greedy verifier keeps
    predicted: dict[str, np.ndarray] = field(default_factory=dict)  # head variant ("" = shipped) → [N, M] â
    costs: CostProfile | None = None  # measured forward costs (ms) for the predicted speed
    meta: dict[str, Any] = field(default_factory=dict)  # pair, dtype, draft design, record_s, pieces, ...

    @property
    def max_len(self) -> int:
        return int(self.draft_tokens.shape[1])

    def to_json(self) -> str:
        d = {
            "prompt": self.prompt,
            "prompt_ids": list(self.prompt_ids),
            "tokens": list(self.tokens),
            "max_new_tokens": self.max_new_tokens,
            "draft_tokens": self.draft_tokens.tolist(),
            "draft_probs": self.draft_probs.tolist(),
            "match": self.match.tolist(),
            "predicted": {k: v.tolist() for k, v in self.predicted.items()},
            "costs": dataclasses.asdict(self.costs) if self.costs else None,
            "meta": self.meta,
        }
        return json.dumps({"kind": "specscope-playground-record", **d})

    @classmethod
    def from_json(cls, text: str) -> TextRecord:
        """A record back from :meth:`to_json`; a clear :class:`SpecScopeError` for anything else."""
        try:
            d = json.loads(text)
            if d.get("kind") != "specscope-playground-record":
                raise ValueError("not a playground record")
            n = len(d["tokens"])
            drafts = np.asarray(d["draft_tokens"], dtype=np.int64).reshape(n, -1)
            probs = np.asarray(d["draft_probs"], dtype=np.float32).reshape(drafts.shape)
            pred = {k: np.asarray(v, dtype=np.float32).reshape(drafts.shape) for k, v in d["predicted"].items()}
            costs = d.get("costs")
            costs = CostProfile.from_dict(costs) if costs else None
            return cls(
                str(d["prompt"]),
                tuple(d["prompt_ids"]),
                tuple(d["tokens"]),
                int(d["max_new_tokens"]),
                drafts,
                probs,
                np.asarray(d["match"], dtype=np.int64).reshape(n),
                pred,
                costs,
                dict(d.get("meta", {})),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise SpecScopeError(
                f"not a playground record (save one with `analyze policies --save-records`): {err}"
            ) from err


@dataclass(frozen=True)
class PolicyReplay:
    """A policy replayed on a record: per round, where it started, what it drafted and kept; totals and time."""

    policy: str
    starts: tuple[int, ...]  # tokens emitted before each round
    lengths: tuple[int, ...]  # drafted per round
    kept: tuple[int, ...]  # drafts the target kept per round
    tokens: int  # new tokens (the record's answer)
    head_calls: int = 0  # PACER's pre-verifier calls
    truncated: int = 0  # rounds that asked for more drafts than the record holds (then the replay is a bound)
    ms: float | None = None  # the cost model's time (None without costs)
    ar_ms: float | None = None  # ar's time for the same tokens
    round_ms: tuple[float, ...] = ()  # the cost model's time of each round (empty without costs)

    @property
    def rounds(self) -> int:
        return len(self.lengths)

    @property
    def tau(self) -> float:
        return self.tokens / self.rounds if self.rounds else 0.0

    @property
    def drafted(self) -> int:
        return sum(self.lengths)

    @property
    def accepted(self) -> int:
        return sum(self.kept)

    @property
    def wasted(self) -> int:
        return self.drafted - self.accepted

    @property
    def ms_per_token(self) -> float | None:
        return self.ms / self.tokens if self.ms is not None and self.tokens else None

    @property
    def predicted_speedup(self) -> float | None:
        return self.ar_ms / self.ms if self.ms and self.ar_ms is not None else None

    @property
    def round_tokens(self) -> tuple[int, ...]:
        """Tokens each round added: from its start to the next round's (the last, to the end of the text)."""
        return tuple(b - a for a, b in zip(self.starts, (*self.starts[1:], self.tokens)))

    @property
    def spread(self) -> tuple[float, float] | None:
        """10th–90th percentile of the predicted speedup when the rounds are resampled (a bootstrap over rounds, as
        the Live lane's measured spread is; :func:`spec_core.core.cost_model.rounds_spread`); None without costs."""
        if not self.round_ms or self.ar_ms is None or not self.tokens:
            return None
        return rounds_spread(self.round_tokens, self.round_ms, self.ar_ms / self.tokens)

    def quote(self, source: str, text: str = "", view: str = "the Playground") -> Quote | None:
        """This replay's speedup as the Playground quotes it beside the Live lane's (:mod:`spec_core.core.quotes`):
        ``source`` is its costs' (``CostProfile.source``), ``text`` the prompt it answers; None without costs."""
        speedup, spread = self.predicted_speedup, self.spread
        if speedup is None or spread is None or self.ar_ms is None:
            return None
        return Quote(
            view=view,
            method=self.policy,
            value=speedup,
            low=spread[0],
            high=spread[1],
            source=source,
            measured=False,
            tau=self.tau,
            about=f"the Playground's {self.rounds} replayed rounds",
            text=text,
            step_ms=self.ar_ms / self.tokens if source != "model" else None,
        )

    def row(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "rounds": self.rounds,
            "new_tokens": self.tokens,
            "tau": self.tau,
            "drafted_tokens": self.drafted,
            "accepted_tokens": self.accepted,
            "wasted_tokens": self.wasted,
            "predicted_ms": self.ms,
            "predicted_speedup": self.predicted_speedup,
            "head_calls": self.head_calls,
            "truncated_rounds": self.truncated,
        }


def paper_key(variant: str, block: int) -> str:
    """``predicted``'s key of a paper head's scores at block size ``block`` (its attention sees the block)."""
    return f"{variant}|b={block}"


def match_lengths(drafts: np.ndarray, tokens: Sequence[int]) -> np.ndarray:
    """``[N]``: per position, how many leading drafts equal the answer from there on."""
    n, m = drafts.shape
    y = np.asarray(tokens, dtype=np.int64)
    padded = np.concatenate([y, np.full(m, -1, dtype=np.int64)])
    ahead = np.stack([padded[i : i + m] for i in range(n)]) if n else np.zeros((0, m), dtype=np.int64)
    equal = drafts == ahead
    return np.where(equal.all(1), m, equal.argmin(1)).astype(np.int64)


@dataclass(frozen=True)
class _Drafted:
    """What a policy's ``end_round`` reads of a replayed round (the engine passes the full RoundInputs)."""

    draft_tokens: tuple[int, ...]


def policy_name(policy: str | PacerParams) -> str:
    return policy.describe() if isinstance(policy, PacerParams) else str(policy).strip()


def _parse(policy: str | PacerParams):
    """(family, params) of a policy name (``fixed:4``, ``pacer:b=2``, ``oracle``; ``+lossless`` allowed)."""
    if isinstance(policy, PacerParams):
        return "pacer", policy
    name = str(policy or "").strip()
    if name == ORACLE:
        return ORACLE, None
    if not name:
        raise SpecScopeError("empty policy name; try fixed:4, heuristic, confidence:0.4, pacer or oracle")
    spec = spec_of(name)  # a clear SpecScopeError for unknown names
    if (
        spec.kind != "speculative"
        or spec.drafter is None
        or spec.policy is None
        or spec.verifier is None
        or spec.drafter.family != "default"
        or spec.policy.family not in spec.heads
    ):
        raise SpecScopeError(
            f"the playground replays a draft-length policy on the pair's own draft, and {name!r} names none; "
            "try fixed:4, heuristic, confidence:0.4, pacer or oracle"
        )
    if spec.verifier.family != "lossless":
        raise SpecScopeError(
            f"the playground replays greedy lossless verification; drop {'+' + spec.verifier.text!r} from {name!r}"
        )
    return spec.policy.family, spec.policy


def _drive(policy, row_tokens: list[int], row_probs: list[float], budget: int) -> tuple[int, bool]:
    """Run a policy's ``next_chunk`` over a recorded row, as the engine's drafting loop does: (length, truncated)."""
    tokens: list[int] = []
    probs: list[float] = []
    while (n := policy.next_chunk(DraftSoFar(tokens, probs, [], budget))) > 0:
        end = len(tokens) + n
        if end > len(row_tokens):
            return len(row_tokens), True
        tokens, probs = row_tokens[:end], row_probs[:end]
    return len(tokens), False


def replay_policy(record: TextRecord, policy: str | PacerParams, costs: CostProfile | None = None) -> PolicyReplay:
    """Replay one policy on the record (no model call): its rounds, τ, drafts kept and wasted, predicted time."""
    family, params = _parse(policy)
    n_tokens, limit, m = len(record.tokens), record.max_new_tokens, record.max_len
    live = None
    if family == "pacer":
        params = params if isinstance(params, PacerParams) else params.params
        if params.head not in record.predicted:
            raise SpecScopeError(
                f"this record has no pre-verifier scores for {params.describe()} (no "
                f"{params.head or 'shipped'} head matches the draft it was recorded with)"
            )
        if params.max_len > m:
            raise SpecScopeError(
                f"{params.describe()}: max {params.max_len} is over the {m} drafts recorded per position"
            )
        recorded = record.predicted.get(paper_key(params.head, params.block), record.predicted[params.head])
        scores = torch.from_numpy(recorded.astype(np.float64))
    elif family != ORACLE:
        live = make_policy(params)
    drafts, probs = record.draft_tokens.tolist(), record.draft_probs.tolist()
    plan = _oracle_plan(record, costs or record.costs) if family == ORACLE else None
    starts, lengths, kept, round_calls = [], [], [], []
    calls = truncated = 0
    pos = 0
    while pos < n_tokens:
        budget = limit - pos - 1
        if family == ORACLE:
            length = plan[pos] if plan is not None else min(int(record.match[pos]), m, budget)
        elif family == "pacer":
            length = replay_length(scores[pos], params, budget=max(budget, 0))
            round_calls.append(math.ceil(length / params.block))
            calls += round_calls[-1]
        else:
            length, cut = _drive(live, drafts[pos], probs[pos], budget)
            truncated += cut
        keep = min(int(record.match[pos]), length)
        if length and live is not None:
            # _Drafted stands in for RoundInputs: a policy's end_round reads only draft_tokens
            live.end_round(_Drafted(tuple(drafts[pos][:length])), keep)  # type: ignore[arg-type]
        starts.append(pos)
        lengths.append(length)
        kept.append(keep)
        pos += min(keep + 1, n_tokens - pos)
    ms = ar_ms = None
    per_round: tuple[float, ...] = ()
    costs = costs or record.costs
    if costs is not None:
        widths = np.asarray(lengths)
        heads = np.asarray(round_calls) if round_calls else 0
        per_round = tuple(float(x) for x in costs.round_ms(widths + 1, widths, heads) * np.ones(len(widths)))
        ms = float(sum(per_round))
        ar_ms = costs.step_ms * n_tokens
    return PolicyReplay(
        policy_name(policy),
        tuple(starts),
        tuple(lengths),
        tuple(kept),
        n_tokens,
        calls,
        truncated,
        ms,
        ar_ms,
        per_round,
    )


def _oracle_plan(record: TextRecord, costs: CostProfile | None) -> list[int] | None:
    """The draft length at each position that reaches the end of the record in the least predicted time.

    The oracle knows what the target keeps (``match``) and what rounds cost: at each position it may draft any
    length up to what will be kept (drafting past it only adds waste), and a dynamic programme over positions
    picks the cheapest path. So no policy, which drafts without that knowledge, is ever predicted above it on
    the same record and costs. Without costs it drafts everything that will be kept (fewest rounds).
    """
    if costs is None:
        return None
    n, limit, m = len(record.tokens), record.max_new_tokens, record.max_len
    best = [0.0] * (n + 1)  # best[pos]: least ms from pos to the end
    choice = [0] * (n + 1)
    for pos in range(n - 1, -1, -1):
        top = max(0, min(int(record.match[pos]), m, limit - pos - 1))
        lengths = np.arange(top + 1)
        ms = costs.round_ms(lengths + 1, lengths) + np.array([best[min(pos + int(k) + 1, n)] for k in lengths])
        choice[pos] = int(np.argmin(ms))
        best[pos] = float(ms[choice[pos]])
    return choice


def standard_policies(confidence: float = 0.4, pacer: Sequence[str | PacerParams] = ("pacer",)) -> list:
    """The policies the table compares: every fixed window, heuristic, confidence, PACER settings, the oracle."""
    return [*(f"fixed:{k}" for k in FIXED_WINDOWS), "heuristic", f"confidence:{confidence:g}", *pacer, ORACLE]


def replay_all(record: TextRecord, policies: Sequence[str | PacerParams], costs: CostProfile | None = None):
    """Replays of every policy that this record can replay (PACER without scores is left out)."""
    out = []
    for p in policies:
        try:
            out.append(replay_policy(record, p, costs))
        except SpecScopeError:
            if _parse(p)[0] != "pacer":
                raise
    return out


def best_fixed(replays: Sequence[PolicyReplay]) -> PolicyReplay:
    """The fixed window with the best predicted speed (fewest rounds without costs)."""
    fixed = [r for r in replays if _parse(r.policy)[0] == "fixed"]
    if not fixed:
        raise SpecScopeError("no fixed window among the replays")
    return min(fixed, key=lambda r: (r.ms if r.ms is not None else r.rounds, r.rounds))


def pacer_grid(
    record: TextRecord,
    thresholds: Sequence[float],
    rhos: Sequence[float],
    block: int = 1,
    max_len: int = 8,
    costs: CostProfile | None = None,
    head: str = "",
) -> np.ndarray:
    """Predicted speedup (τ without costs) of PACER over ``rhos`` (rows) × ``thresholds`` (columns)."""
    grid = np.zeros((len(rhos), len(thresholds)))
    for r, rho in enumerate(rhos):
        for c, t in enumerate(thresholds):
            rep = replay_policy(record, PacerParams(block, float(t), float(rho), max_len, head), costs)
            grid[r, c] = rep.predicted_speedup if rep.predicted_speedup is not None else rep.tau
    return grid


def save_record(record: TextRecord, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(record.to_json() + "\n", encoding="utf-8")


def load_record(path: str | Path) -> TextRecord:
    return TextRecord.from_json(Path(path).read_text(encoding="utf-8"))


# -- the app's sources: the live tab's last run, a saved record, an events file -------------------------------------


def default_costs(precision: str | None = None) -> CostProfile:
    """The costs a record without its own is replayed under: this machine's own table for ``precision``
    (``costs --machine``; never measured here, a view must not wait), else :data:`DEFAULT_COSTS`."""

    table = machine_table()
    profile = table.profiles.get(precision or "") if table is not None else None
    if table is None or profile is None or not profile.draft_ms:
        return DEFAULT_COSTS
    named = dataclasses.replace(
        profile, name="this machine", about=f"this machine's cost table {table.label} ({precision})"
    )
    return named if named.head_ms else dataclasses.replace(named, head_ms=DEFAULT_COSTS.head_ms)


def costs_from_events(lanes) -> CostProfile | None:
    """The costs measured in a run's own rounds (:func:`spec_core.core.cost_model.profile_from_events`: medians per
    width, made monotone, the engine's work and PACER's head per call); None if too little ran."""

    profile = profile_from_events(lanes, name="this run", about="medians of the live run's own rounds")
    if profile is None or not profile.draft_ms:
        return None
    return profile if profile.head_ms else dataclasses.replace(profile, head_ms=DEFAULT_COSTS.head_ms)
