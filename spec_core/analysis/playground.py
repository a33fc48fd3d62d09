"""The policy playground: one recorded pass per text answers "what would policy X have done here?" exactly.

At temperature 0 the output is the target's greedy text ``y`` whatever the draft-length policy, and the draft's
greedy proposal at position ``i`` depends only on the verified prefix ``prompt + y[:i]``. So one pass records,
for every position of ``y`` (:class:`TextRecord`):

- the draft's greedy continuation of up to ``max_len`` tokens given the true prefix (``draft_tokens``), the
  draft's own (temperature-1) probability of each (``draft_probs``: what ``confidence:T`` reads) and PACER's
  pre-verifier scores â for each (``predicted``: the head reads the draft's hidden state, the position in the
  draft and the probabilities, exactly as :class:`~spec_core.policies.pacer.PacerLength` calls it);
- ``match[i]``: how many leading drafted tokens equal ``y[i:]``, which is what the greedy lossless verifier keeps.

The pass is batched: one target forward over ``prompt + y`` (the feature draft reads its hidden states), one
draft forward over the whole text (every position's first drafted token), then one draft forward per depth over
all positions at once, each position attending to its own prefix and its own drafts through a 4D mask (the
token-tree trick of :mod:`spec_core.drafters.tree`), and one pre-verifier call over everything.

:func:`replay_policy` then replays any policy on the record with no model call, the engine's way: a round at
position ``pos`` drafts ``L`` tokens (the policy decides from the recorded row, with the engine's budget
``max_new_tokens − pos − 1``), keeps ``min(match[pos], L)`` and emits one more. ``fixed``, ``heuristic`` and
``confidence`` are the engine's own policy objects fed the recorded drafts; PACER is
:func:`~spec_core.policies.pacer.replay_length` on the recorded â. The **oracle** drafts exactly the tokens the
target will keep (``L = match[pos]``). Time comes from :class:`~spec_core.analysis.policies.RoundCosts`: a round
costs ``L`` draft steps, one target forward over ``L + 1`` tokens, the engine's own work and (PACER) one
pre-verifier call per block; ``ar`` one one-token forward and the engine's work per token.

In float32 the replay gives the engine's rounds exactly (``tests/test_playground.py``). In bfloat16 a k-token
pass rounds differently from a one-token step, so a real run can part from the recorded text at a near-tie
and the replay is an estimate from then on (docs/RESULTS.md says how close it came). Drafts past an EOS are not
recorded (the record stops at EOS), so a round that drafts through the EOS may count fewer kept drafts than the
engine, which verifies them against the target's tokens after EOS; the text, rounds and τ are unaffected.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spec_core.analysis.policies import RoundCosts
from spec_core.errors import SpecScopeError
from spec_core.policies import DraftSoFar, make_policy, parse_policy
from spec_core.policies.pacer import PacerParams, replay_length

DEFAULT_MAX_LEN = 16  # drafts recorded per position: confidence:T's maximum, PACER's max slider's end
FIXED_WINDOWS = (1, 2, 3, 4, 6, 8)
ORACLE = "oracle"
# the embedded pair (bf16, feature draft, one thread) on this project's 2-core machine, 2026-11-29 (docs/RESULTS.md, "This
# machine": `python -m spec_core costs --threads 1`): the default when a record carries no costs of its own
DEFAULT_COSTS = RoundCosts(widths=(1, 2, 4, 8, 16), target_ms=(93.8, 125.0, 166.1, 346.4, 614.4),
                           draft_ms=7.6, engine_ms=2.2, head_ms=0.43, name="a reference machine",
                           about="an earlier session's measurement on this project's AVX2 machine (bfloat16)")  # fmt: skip


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
    costs: RoundCosts | None = None  # measured forward costs (ms) for the predicted speed
    meta: dict[str, Any] = field(default_factory=dict)  # pair, dtype, draft design, record_s, pieces, ...

    @property
    def max_len(self) -> int:
        return int(self.draft_tokens.shape[1])

    def to_json(self) -> str:
        d = {"prompt": self.prompt, "prompt_ids": list(self.prompt_ids), "tokens": list(self.tokens),
             "max_new_tokens": self.max_new_tokens, "draft_tokens": self.draft_tokens.tolist(),
             "draft_probs": self.draft_probs.tolist(), "match": self.match.tolist(),
             "predicted": {k: v.tolist() for k, v in self.predicted.items()},
             "costs": dataclasses.asdict(self.costs) if self.costs else None, "meta": self.meta}  # fmt: skip
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
            costs = RoundCosts.from_dict(costs) if costs else None
            return cls(str(d["prompt"]), tuple(d["prompt_ids"]), tuple(d["tokens"]), int(d["max_new_tokens"]), drafts,
                       probs, np.asarray(d["match"], dtype=np.int64).reshape(n), pred, costs, dict(d.get("meta", {})))  # fmt: skip
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

    def row(self) -> dict[str, Any]:
        return {"policy": self.policy, "rounds": self.rounds, "new_tokens": self.tokens, "tau": self.tau,
                "drafted_tokens": self.drafted, "accepted_tokens": self.accepted, "wasted_tokens": self.wasted,
                "predicted_ms": self.ms, "predicted_speedup": self.predicted_speedup,
                "head_calls": self.head_calls, "truncated_rounds": self.truncated}  # fmt: skip


# -- recording ----------------------------------------------------------------------------------------------------


def _mask(prefix: torch.Tensor, cached: int, own: list[int], n: int, model, device) -> torch.Tensor:
    """``[1, 1, n, cached + n]``: row i sees the cached text positions ``< prefix[i]``, its own earlier drafts
    (cache columns ``c + i`` for ``c`` in ``own``) and itself."""
    from spec_core.drafters.tree import attention_mask

    rows = torch.arange(n)
    visible = torch.arange(cached + n)[None, :] < prefix[:, None]  # [n, cached + n]
    for start in own:
        visible[rows, start + rows] = True
    visible[rows, cached + rows] = True
    return attention_mask(visible, 0, model, device)


def _pick(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy tokens ``[n]`` and the draft's temperature-1 probability of each, as the drafters' ``draw``."""
    logits = logits.float()
    tokens = logits.argmax(-1)
    return tokens, torch.softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]


@torch.inference_mode()
def _draft_rows(pair, seq: list[int], p: int, n: int, m: int):
    """Drafts ``[n, m]``, their probabilities ``[n, m]`` and the draft's hidden states ``[n, m, H]`` from each of
    the ``n`` prefixes ``seq[:p + i]``: depth 1 from one forward over the text, then one forward per depth."""
    from spec_core.cached_lm import CachedLM

    device, text = pair.device, torch.tensor(seq[:-1])
    start = torch.arange(n) + p  # prefix length of each row
    if pair.draft_design == "feature":
        from spec_core.drafters.feature import FeatureDrafter

        draft = pair.draft
        lm = CachedLM(pair.target, layers=FeatureDrafter(draft).target_layers, hidden=True)
        out = lm.forward(text, all_logits=False)
        layers = out.layer_hidden
        feats = draft.target_features(out.hidden, layers).to(next(draft.parameters()).dtype)  # [T-1, H]
        from transformers import DynamicCache

        cache = DynamicCache(config=draft.config)
        # pair j = (feature j − 1, token j) at cache index j − 1, rotary position j − 1
        body = draft(feats[None, :-1], text[None, 1:].to(device), past_key_values=cache)[0]  # [T-2, H]
        hidden = body[start - 2]  # the feature predicted at position p + i − 1
        logits = draft.logits(hidden)
        cached, mask_model = body.shape[0], draft.body

        def step(tokens, prev_hidden, depth, mask):
            pos = (start + depth - 3)[None].to(device)
            h = draft(prev_hidden[None], tokens[None], past_key_values=cache, attention_mask=mask, position_ids=pos)[0]
            return draft.logits(h), h
    else:
        lm = CachedLM(pair.draft)
        out = lm.forward(text)
        hidden, logits = out.hidden[start - 1], out.logits[start - 1]
        cached, mask_model = text.shape[0], pair.draft

        def step(tokens, prev_hidden, depth, mask):
            o = lm.forward(tokens, positions=start + depth - 2, mask=mask)
            return o.logits, o.hidden

    tok, prob = _pick(logits)
    all_tok, all_prob, all_hidden = [tok], [prob], [hidden]
    visible_prefix = start - (1 if pair.draft_design == "feature" else 0)  # cached text each row may see
    for depth in range(2, m + 1):
        own = [cached + k * n for k in range(depth - 2)]
        mask = _mask(visible_prefix, cached + (depth - 2) * n, own, n, mask_model, device)
        logits, hidden = step(tok.to(device), hidden, depth, mask)
        tok, prob = _pick(logits)
        all_tok.append(tok), all_prob.append(prob), all_hidden.append(hidden)
    return torch.stack(all_tok, 1).cpu(), torch.stack(all_prob, 1).cpu(), torch.stack(all_hidden, 1)


def paper_key(variant: str, block: int) -> str:
    """``predicted``'s key of a paper head's scores at block size ``block`` (its attention sees the block)."""
    return f"{variant}|b={block}"


def _heads(pair, variants: Sequence[str]) -> dict[str, Any]:
    """The pre-verifiers PACER would use on this pair (built the engine's way, cached in ``pair.extras``)."""
    from spec_core.policies.pacer import PacerLength

    heads = {}
    for variant in variants:
        try:
            heads[variant] = PacerLength.build(PacerParams(head=variant), pair).head
        except (SpecScopeError, FileNotFoundError):
            pass  # no head for this draft: the record has no PACER scores (PACER replays then say so)
    return heads


def match_lengths(drafts: np.ndarray, tokens: Sequence[int]) -> np.ndarray:
    """``[N]``: per position, how many leading drafts equal the answer from there on."""
    n, m = drafts.shape
    y = np.asarray(tokens, dtype=np.int64)
    padded = np.concatenate([y, np.full(m, -1, dtype=np.int64)])
    ahead = np.stack([padded[i : i + m] for i in range(n)]) if n else np.zeros((0, m), dtype=np.int64)
    equal = drafts == ahead
    return np.where(equal.all(1), m, equal.argmin(1)).astype(np.int64)


@torch.inference_mode()
def record_text(pair, prompt: str, max_new_tokens: int = 96, max_len: int = DEFAULT_MAX_LEN,
                tokens: Sequence[int] | None = None, heads: Sequence[str] = ("",), costs: RoundCosts | None = None,
                chat: bool = True, method: str = "ar") -> TextRecord:  # fmt: skip
    """One recorded pass over ``prompt``'s greedy answer (``tokens``, or the engine's ``method`` run now).

    Records drafts for every position, the draft's probabilities, the pre-verifier's â (each head variant in
    ``heads`` that matches the pair's draft) and what the greedy verifier keeps. ``meta["record_s"]`` is the
    recording's time (the answer's generation apart, in ``meta["text_s"]``).
    """
    from spec_core.engine import generate
    from spec_core.prompting import prompt_ids

    if not 1 <= max_len <= 64:
        raise SpecScopeError(f"max_len must be in [1, 64], got {max_len}")
    if pair.draft is None:
        raise SpecScopeError(f"the pair {pair.name!r} has no draft model to record")
    ids = prompt_ids(pair, prompt, chat)
    t0 = time.perf_counter()
    if tokens is None:
        tokens = generate(pair, prompt, method, max_new_tokens=max_new_tokens, chat=chat).token_ids
    tokens = tuple(int(t) for t in tokens)
    if not tokens or len(tokens) > max_new_tokens:
        raise SpecScopeError(f"the answer has {len(tokens)} tokens; need 1..max_new_tokens ({max_new_tokens})")
    if len(ids) < 2:
        raise SpecScopeError("the prompt is one token long: the draft has nothing to condition on")
    t1 = time.perf_counter()
    drafts, probs, hidden = _draft_rows(pair, [*ids, *tokens], len(ids), len(tokens), max_len)
    predicted = {}
    for variant, head in _heads(pair, heads).items():
        positions = torch.arange(1, max_len + 1, device=hidden.device).expand(len(tokens), -1)
        if getattr(head.cfg, "design", "") == "paper":  # scores depend on the blocks: one array per block size b
            embeds = pair.target.get_input_embeddings()(drafts.to(hidden.device)) if head.cfg.use_token else None
            for b in range(1, max_len + 1):
                segments = (positions - 1) // b  # [N, M] block k of the draft from each position
                scores = torch.sigmoid(head(hidden, embeds, positions, segments)).float().cpu().numpy()
                predicted[paper_key(variant, b)] = scores
            predicted[variant] = predicted[paper_key(variant, PacerParams().block)]
            continue
        feats = (
            type(head).prob_features(probs.to(hidden.device)) if getattr(head.cfg, "use_token_prob", False) else None
        )
        predicted[variant] = head.predict(hidden, positions, feats).float().cpu().numpy()
    drafts_np = drafts.numpy().astype(np.int64)
    t2 = time.perf_counter()
    from spec_core.lane_speed import draft_ratio

    meta = {"pair": pair.name, "dtype": getattr(pair, "precision", "") or str(pair.dtype).replace("torch.", ""),
            "draft": pair.draft_design, "record_s": t2 - t1, "text_s": t1 - t0, "pieces": list(pair.pieces(tokens)),
            "draft_ratio": draft_ratio(pair) or 0.05}  # fmt: skip
    return TextRecord(prompt, tuple(ids), tokens, max_new_tokens, drafts_np, probs.float().numpy(),
                      match_lengths(drafts_np, tokens), predicted, costs, meta)  # fmt: skip


# -- replay -------------------------------------------------------------------------------------------------------


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
    head, _, verifier = name.partition("+")
    if verifier and verifier != "lossless":
        raise SpecScopeError(
            f"the playground replays greedy lossless verification; drop {'+' + verifier!r} from {name!r}"
        )
    if not head:
        raise SpecScopeError("empty policy name; try fixed:4, heuristic, confidence:0.4, pacer or oracle")
    part = parse_policy(head)  # a clear SpecScopeError for unknown names
    return part.family, part


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


def replay_policy(record: TextRecord, policy: str | PacerParams, costs: RoundCosts | None = None) -> PolicyReplay:
    """Replay one policy on the record (no model call): its rounds, τ, drafts kept and wasted, predicted time."""
    family, params = _parse(policy)
    n_tokens, limit, m = len(record.tokens), record.max_new_tokens, record.max_len
    live = None
    if family == "pacer":
        params = params if isinstance(params, PacerParams) else params.params
        if params.head not in record.predicted:
            raise SpecScopeError(f"this record has no pre-verifier scores for {params.describe()} (no "
                                 f"{params.head or 'shipped'} head matches the draft it was recorded with)")  # fmt: skip
        if params.max_len > m:
            raise SpecScopeError(
                f"{params.describe()}: max {params.max_len} is over the {m} drafts recorded per position"
            )
        scores = record.predicted.get(paper_key(params.head, params.block), record.predicted[params.head])
        scores = torch.from_numpy(scores.astype(np.float64))
    elif family != ORACLE:
        live = make_policy(params)
    drafts, probs = record.draft_tokens.tolist(), record.draft_probs.tolist()
    plan = _oracle_plan(record, costs or record.costs) if family == ORACLE else None
    starts, lengths, kept = [], [], []
    calls = truncated = 0
    pos = 0
    while pos < n_tokens:
        budget = limit - pos - 1
        if family == ORACLE:
            length = plan[pos] if plan is not None else min(int(record.match[pos]), m, budget)
        elif family == "pacer":
            length = replay_length(scores[pos], params, budget=max(budget, 0))
            calls += math.ceil(length / params.block)
        else:
            length, cut = _drive(live, drafts[pos], probs[pos], budget)
            truncated += cut
        keep = min(int(record.match[pos]), length)
        if length and live is not None:
            live.end_round(_Drafted(tuple(drafts[pos][:length])), keep)
        starts.append(pos), lengths.append(length), kept.append(keep)
        pos += min(keep + 1, n_tokens - pos)
    ms = ar_ms = None
    costs = costs or record.costs
    if costs is not None:
        widths = np.asarray(lengths)
        ms = float(costs.round_ms(widths + 1, widths).sum() + calls * costs.head_ms)
        ar_ms = costs.step_ms * n_tokens
    return PolicyReplay(
        policy_name(policy), tuple(starts), tuple(lengths), tuple(kept), n_tokens, calls, truncated, ms, ar_ms
    )


def _oracle_plan(record: TextRecord, costs: RoundCosts | None) -> list[int] | None:
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
        ms = costs.round_ms(lengths + 1, lengths) + np.array([best[min(pos + k + 1, n)] for k in lengths])
        choice[pos] = int(np.argmin(ms))
        best[pos] = float(ms[choice[pos]])
    return choice


def standard_policies(confidence: float = 0.4, pacer: Sequence[str | PacerParams] = ("pacer",)) -> list:
    """The policies the table compares: every fixed window, heuristic, confidence, PACER settings, the oracle."""
    return [*(f"fixed:{k}" for k in FIXED_WINDOWS), "heuristic", f"confidence:{confidence:g}", *pacer, ORACLE]


def replay_all(record: TextRecord, policies: Sequence[str | PacerParams], costs: RoundCosts | None = None):
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
    fixed = [r for r in replays if r.policy.startswith("fixed:")]
    if not fixed:
        raise SpecScopeError("no fixed window among the replays")
    return min(fixed, key=lambda r: (r.ms if r.ms is not None else r.rounds, r.rounds))


def pacer_grid(record: TextRecord, thresholds: Sequence[float], rhos: Sequence[float], block: int = 1,
               max_len: int = 8, costs: RoundCosts | None = None, head: str = "") -> np.ndarray:  # fmt: skip
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


def costs_from_events(lanes) -> RoundCosts | None:
    """The costs measured in a run's own rounds (:func:`spec_core.cost_model.profile_from_events`: medians per
    width, made monotone, the engine's work and PACER's head per call); None if too little ran."""
    from spec_core.cost_model import profile_from_events

    profile = profile_from_events(lanes, name="this run", about="medians of the live run's own rounds")
    if profile is None or not profile.draft_ms:
        return None
    return profile if profile.head_ms else dataclasses.replace(profile, head_ms=DEFAULT_COSTS.head_ms)


def greedy_lane(lanes, temperature: float) -> tuple[str, tuple[int, ...]]:
    """(method, tokens) of the run's greedy text: ``ar``'s if it ran, else the first lossless lane's."""
    from spec_core.methods import parse_method

    if temperature != 0:
        raise SpecScopeError("the playground replays greedy decoding: generate at temperature 0 first")
    for method in sorted(lanes, key=lambda m: m != "ar"):
        spec = parse_method(method)
        if lanes[method] and (spec.kind == "ar" or (spec.verifier and spec.verifier.family == "lossless")):
            return method, tuple(t for e in lanes[method] for t in e.emitted)
    raise SpecScopeError("no greedy lossless text in this run (add an ar lane, or a lossless method)")


def record_lanes(pair, prompt: str, lanes, temperature: float, max_new_tokens: int,
                 max_len: int = DEFAULT_MAX_LEN) -> TextRecord:  # fmt: skip
    """Record a finished run's greedy text (the live tab's last frame), with the costs its rounds measured."""
    from spec_core.prompting import prompt_ids

    if not lanes:
        raise SpecScopeError("nothing to record yet: generate on the Live tab (temperature 0), then record")
    method, tokens = greedy_lane(lanes, temperature)
    first = lanes[method][0]
    if first.context_len and first.context_len != len(prompt_ids(pair, prompt)):
        raise SpecScopeError("the prompt box changed since that run: generate again, then record")
    costs = costs_from_events(lanes)
    record = record_text(pair, prompt, max(max_new_tokens, len(tokens)), max_len, tokens=tokens, costs=costs)
    return dataclasses.replace(record, meta={**record.meta, "source": f"the live run's {method} text",
                                             "costs": "measured in that run" if costs else "default"})  # fmt: skip


def record_upload(path: str | Path, pair_for) -> TextRecord:
    """A saved record (``.json``, no model call), or the first prompt of an events file (``.jsonl``, recorded
    with ``pair_for()``)."""
    if str(path).endswith(".json"):
        return load_record(path)
    from spec_core.analysis.records import records_from_file

    rec = next(iter(records_from_file(path).values()), None)
    if rec is None:
        raise SpecScopeError("the events file holds no run")
    n = max(sum(len(e.emitted) for e in events) for events in rec.lanes.values())
    return record_lanes(pair_for(), rec.prompt, rec.lanes, rec.temperature, n)


def record_frame(pair_for, frame, prompt: str, max_new_tokens) -> TextRecord:
    """Record the live tab's last run (a :class:`~spec_core.live.LiveFrame`); ``pair_for(precision)`` gives the
    pair at the precision that run used."""
    if frame is None or not frame.done:
        raise SpecScopeError("nothing to record yet: generate on the Live tab (temperature 0) and let it finish")
    return record_lanes(pair_for(frame.precision), prompt, frame.lanes, frame.temperature, int(max_new_tokens))
