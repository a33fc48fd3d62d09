"""The decoding loop: speculative rounds, one event per round (plain decoding is the round with no draft).

Speculative round (Leviathan et al. 2023; Chen et al. 2023; docs/ALGORITHMS.md §0), with the invariant that the
target's KV cache holds every token but the last one (the *pending* token) at the start of a round:

1. draft — the draft-length policy asks the drafter for chunks until it says stop. The drafts x_1..x_γ form a
   chain (each follows the one before) or branch (EAGLE-2's dynamic drafts, arXiv 2406.16858, docs/ALGORITHMS.md
   §4: several candidates per position, each with a parent); ``ar``'s drafter proposes nothing;
2. verify — one target forward over [pending, x_1..x_γ] gives p at every draft's parent (the first round feeds
   only the drafts: the prefill of the whole prompt already gave the pending token's p, so a generation of N tokens
   costs N target forwards counting the prefill, exactly like transformers' ``generate``); branching drafts go in
   at their depth's position, each seeing the verified text and its own ancestors;
3. accept — the verifier keeps a path of drafts (a chain's first ``accepted``) and adds the target's token: the
   recovered token, or the bonus token; with nothing drafted, the target's own token;
4. roll back — the target's cache keeps the accepted path (a crop for a chain, a gather otherwise) and the drafter
   commits it;
5. emit — the new tokens (cut at EOS / max_new_tokens) and one :class:`RoundEvent`
   (:class:`~spec_core.engine.events.RoundRecorder` writes it, :class:`~spec_core.engine.events.RoundClock` times it).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import torch

from spec_core.core import rules
from spec_core.core.cost_model import CostProfile
from spec_core.core.cost_tables import run_costs
from spec_core.core.errors import SpecScopeError
from spec_core.core.guards import oom_guarded
from spec_core.core.types import GenerationResult, RoundEvent, RoundInputs, SamplingConfig, Stats
from spec_core.drafters import Drafter, RoundDraft, make_drafter
from spec_core.engine.events import RoundClock, RoundRecorder
from spec_core.engine.methods import MethodSpec, parse_method
from spec_core.model.cached_lm import CachedLM, LMOutput, attention_mask
from spec_core.model.prompting import prompt_ids
from spec_core.policies import DraftLengthPolicy, DraftSoFar, make_policy, own_length
from spec_core.verifiers import make_verifier

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

MAX_NEW_TOKENS_LIMIT = 4096
DRAFT_OVERSHOOT = 64  # positions a round may draft past the final length (cache room to check for)

__all__ = ["Generation", "generate", "prompt_ids", "stream"]


class Generation:
    """One generation run: iterate :meth:`rounds` for events, then read :meth:`result`."""

    target_lm: CachedLM | None  # the run's caches, kept for inspection (set by the rounds, dropped by _release)
    drafter: Drafter | None

    def __init__(
        self,
        pair: ModelPair,
        prompt: str,
        method: str | MethodSpec = "fixed:4",
        max_new_tokens: int = 128,
        sampling: SamplingConfig | None = None,
        chat: bool = True,
        should_stop: Callable[[], bool] | None = None,
        display: bool = True,
        history: Sequence[tuple[str, str]] | None = None,  # earlier (user, assistant) turns before ``prompt``
        costs: CostProfile | None = None,
    ):
        self.pair, self.sampling = pair, (sampling or SamplingConfig()).validate()
        self.spec: MethodSpec = method if isinstance(method, MethodSpec) else parse_method(method)
        if self.spec.kind == "peer":
            raise SpecScopeError(f"{method!r} runs transformers' own generate; use spec_core.peers or `bench`")
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or not 1 <= max_new_tokens <= MAX_NEW_TOKENS_LIMIT
        ):
            raise SpecScopeError(
                f"max_new_tokens must be an integer in [1, {MAX_NEW_TOKENS_LIMIT}], got {max_new_tokens!r}"
            )
        self.prompt_ids = prompt_ids(pair, prompt, chat, history)
        limit = getattr(pair.target.config, "max_position_embeddings", 1 << 30)
        if len(self.prompt_ids) + max_new_tokens + DRAFT_OVERSHOOT > limit:
            raise SpecScopeError(
                f"prompt ({len(self.prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the "
                f"target's context of {limit} tokens"
            )
        # The prices a policy or drafter that weighs costs uses (``cost``, the hybrid, ``pacer`` t=auto): data handed
        # to the run, or the table in force for the pair's device read once now (spec_core/core/cost_tables.py), never
        # a timing. Round 0's event records it, so a replay prices alike and the rounds never follow the load.
        self.costs: CostProfile = costs if costs is not None else run_costs(pair)[0]
        self.max_new_tokens, self.should_stop = max_new_tokens, should_stop
        # display=False (benchmarks): events skip the numbers only a viewer reads — p(x) where the rule did not
        # need it, q(the target's choice), p(next token) — so a round costs what the method itself costs
        self.display = display
        self.eos = pair.eos_token_ids  # a property that asks the tokenizer: once per run, not once per round
        self.generator = torch.Generator(device=pair.device).manual_seed(self.sampling.seed)
        self.new_tokens: list[int] = []
        self.events: list[RoundEvent] = []
        self.wall_s = 0.0

    # -- helpers ------------------------------------------------------------------------------------------

    def _emit(self, accepted_tokens: list[int], next_token: int) -> tuple[tuple[int, ...], bool]:
        """Append this round's tokens, cut at EOS and at max_new_tokens; returns (emitted, finished)."""
        emitted: list[int] = []
        eos = self.eos
        for t in [*accepted_tokens, next_token]:
            if len(self.new_tokens) >= self.max_new_tokens:
                break
            self.new_tokens.append(t)
            emitted.append(t)
            if t in eos:
                return tuple(emitted), True
        return tuple(emitted), len(self.new_tokens) >= self.max_new_tokens

    # -- the loop -----------------------------------------------------------------------------------------

    def _parts(self):
        """(drafter, policy, verifier) of the method, built with the loaded pair. A drafter that sets its own length
        (a block drafter, a branching one, the empty drafter of ``ar``) drafts its ``block_len`` a round."""
        spec, pair = self.spec, self.pair
        drafter = make_drafter(pair, spec.drafter, self.costs)
        policy = (
            make_policy(spec.policy, pair, self.costs) if spec.policy is not None else own_length(drafter.block_len)
        )
        return drafter, policy, make_verifier(spec.verifier, pair)

    def rounds(self) -> Iterator[RoundEvent]:
        """One event per round until EOS, ``max_new_tokens`` or ``should_stop``.

        An out-of-memory error inside a round ends the run as a :class:`SpecScopeError` with its memory freed
        (:func:`spec_core.core.guards.oom_guarded`), so the next request finds the memory free.
        """
        return oom_guarded(self._rounds(), self.pair.device, f"this {self.spec.name} generation", self._release)

    def _release(self) -> None:
        """Drop the caches kept for inspection, after a failed run (their memory is reused at once)."""
        self.target_lm = self.drafter = None

    @torch.inference_mode()
    def _rounds(self) -> Iterator[RoundEvent]:
        pair, sampling = self.pair, self.sampling
        t_start = time.perf_counter()
        drafter, policy, verifier = self._parts()
        target = CachedLM(
            pair.target,
            layers=drafter.target_layers,
            hidden=drafter.needs_target_hidden or verifier.needs_target_hidden,
            prefill_model=getattr(pair, "prefill_target", None),
        )
        target.reset()
        self.target_lm, self.drafter = target, drafter  # the target's cache after the run: a lane's verdict times a
        # step on it (spec_core/serve/live.py, pass_timing.probe_profile), and the tests check its rollback
        recorder = RoundRecorder(self.spec.name, pair.pieces, sampling.greedy, self.display)
        ids = list(self.prompt_ids)
        # The prefill runs the whole prompt, so its last position already gives p for the first new token
        # (as transformers' generate does): the first round feeds only its drafts. From then on the cache
        # holds every token but the pending one (the recovered / bonus token, not yet run).
        first: LMOutput | None
        context, first = _split_prefill(target.forward(torch.tensor(ids), all_logits=False))
        drafter.reset(ids, context if len(ids) > 1 else None)
        finished = False
        while not finished:
            clock = RoundClock(pair.device)
            # 1. draft: the policy asks for chunks until it says stop
            draft = self._draft(drafter, policy, clock)
            clock.verifying()
            # 2. verify: one target forward over [pending, x_1..x_γ] (first round: [x_1..x_γ] after the prefill)
            with clock.target():
                out = _target_pass(target, draft, ids, first)
            first = None
            # 3. accept: the verifier keeps a path of drafts and adds the target's token
            inputs = verdict = None
            path: Sequence[int] = ()
            if len(draft):
                inputs = _round_inputs(draft, out, verifier.needs_target_hidden)
                verdict = verifier.verify(inputs, sampling, self.generator)
                path, next_token = verdict.accepted_path, verdict.next_token
            at = 1 + path[-1] if path else 0  # the target's row after the kept drafts, where next_token comes from
            row = out.logits[at : at + 1]  # [1, V]
            dist = None  # the warped distribution there: one warp serves the draw and next_prob
            if not sampling.greedy and (not len(draft) or self.display):
                dist = rules.warp_probs(row, sampling.temperature, sampling.top_k, sampling.top_p)
            if not len(draft):  # nothing drafted (ar, or the budget is spent): the target's own token
                next_token = int(row.argmax()) if dist is None else int(rules.sample(dist, self.generator)[0])
            next_prob = _next_prob(next_token, row, dist, inputs, at) if self.display else None
            # 4. roll back to the accepted path
            target.keep_path(len(ids), path)
            with clock.drafter():  # the drafter's own work on the verified tokens (e.g. EAGLE's feature fusion)
                drafter.commit(len(path), next_token, _path_rows(out, path), path)
            accepted_tokens = [draft.tokens[i] for i in path]
            ids += [*accepted_tokens, next_token]
            # 5. emit
            emitted, finished = self._emit(accepted_tokens, next_token)
            if self.should_stop is not None and self.should_stop():
                finished = True
            stop_reason, policy_trace = policy.stop_reason, policy.trace()
            if inputs is not None:
                policy.end_round(inputs, len(path))
            event = recorder.event(
                index=len(self.events),
                context_len=len(ids) - len(path) - 1,
                draft=draft,
                inputs=inputs,
                verdict=verdict,
                next_token=next_token,
                next_prob=next_prob,
                emitted=emitted,
                finished=finished,
                stop_reason=stop_reason,
                policy_trace=policy_trace,
            )
            event = clock.stamp(event)
            if not self.events:  # the prices this run's choices were made with, once (round 0)
                event = dataclasses.replace(event, costs=json.loads(self.costs.to_json()))
            self.events.append(event)
            self.wall_s = time.perf_counter() - t_start
            yield event

    def _draft(self, drafter: Drafter, policy: DraftLengthPolicy, clock: RoundClock) -> RoundDraft:
        """Step 1: chunks from the drafter while the policy asks for more (and the drafter has more to give)."""
        draft = RoundDraft()
        budget = self.max_new_tokens - len(self.new_tokens) - 1  # one token is the target's
        before_round = getattr(drafter, "before_round", None)  # optional (drafters/base.py)
        if before_round is not None:
            before_round(budget + 1)
        while (n := policy.next_chunk(_so_far(draft, budget))) > 0:
            with clock.drafter():
                chunk = drafter.propose(n, self.sampling, self.generator)
            if not chunk.tokens:
                break
            draft.add(chunk)
        return draft

    def run(self) -> GenerationResult:
        """Every round to the end (EOS, ``max_new_tokens`` or ``should_stop``), then :meth:`result`."""
        for _ in self.rounds():
            pass
        return self.result()

    def result(self) -> GenerationResult:
        return GenerationResult(
            text=cast(str, self.pair.tokenizer.decode(self.new_tokens, skip_special_tokens=True)),  # one sequence
            token_ids=tuple(self.new_tokens),
            prompt_ids=tuple(self.prompt_ids),
            events=tuple(self.events),
            stats=Stats.from_events(self.events, len(self.new_tokens), self.wall_s),
        )


def _so_far(draft: RoundDraft, budget: int) -> DraftSoFar:
    """What the draft-length policy sees of the round so far."""
    return DraftSoFar(
        draft.tokens, draft.token_probs, draft.hidden, budget, draft.sources, draft.estimates, draft.parents
    )


def _target_pass(target: CachedLM, draft: RoundDraft, ids: list[int], first: LMOutput | None) -> LMOutput:
    """Step 2: the target over [pending, x_1..x_γ], rows in that order; on the first round the prefill's last
    position (``first``) stands for the pending token. Branching drafts go in at their depth's position, each seeing
    the verified text and its own ancestors (a 4D mask)."""
    tokens, positions, visible = draft.target_inputs(ids[-1], len(ids) - 1)
    skip = 0 if first is None else 1  # the prefill already ran the pending token
    if first is not None and len(tokens) == 1:
        return first
    mask = None
    if visible is not None:
        mask = attention_mask(visible[skip:, skip:], target.length, target.model, target.device)
        positions = positions[skip:]
    out = target.forward(tokens[skip:], positions=positions, mask=mask)
    return _concat(first, out) if first is not None else out


def _round_inputs(draft: RoundDraft, out: LMOutput, target_hidden: bool) -> RoundInputs:
    """Step 3's record of the round, for the verifier and then the policy."""
    device = out.logits.device
    return RoundInputs(
        draft_tokens=torch.tensor(draft.tokens, device=device),
        draft_logit_rows=tuple(draft.logits),
        sampled_probs=torch.cat(draft.sampled) if draft.sampled else None,
        draft_hidden=torch.stack(draft.hidden),
        target_logits=out.logits,
        target_hidden=out.hidden if target_hidden else None,
        draft_parents=torch.tensor(draft.parents, device=device) if draft.parents is not None else None,
    )


def _next_prob(
    next_token: int, row: torch.Tensor, dist: torch.Tensor | None, inputs: RoundInputs | None, at: int
) -> torch.Tensor:
    """``[1]`` the target's probability of ``next_token`` at row ``at`` (``row`` ``[1, V]``): from the warped ``dist``
    when sampling, else its temperature-1 softmax (from the round's one normaliser pass when there were drafts)."""
    next_id = torch.tensor([next_token], device=row.device)
    if dist is not None:
        return dist[0, next_id]
    if inputs is not None:
        return inputs.target_prob_at(slice(at, at + 1), next_id)
    return rules.softmax_at(row, next_id)


def _cut(t: torch.Tensor | None, start: int | None, stop: int | None) -> torch.Tensor | None:
    return t[start:stop] if t is not None else None


def _split_prefill(prefill: LMOutput) -> tuple[LMOutput, LMOutput]:
    """(the prompt's positions but the last, without logits; the last position with its logits)."""
    head = LMOutput(prefill.logits[:0], _cut(prefill.hidden, None, -1), _cut(prefill.layer_hidden, None, -1))
    last = LMOutput(prefill.logits[-1:], _cut(prefill.hidden, -1, None), _cut(prefill.layer_hidden, -1, None))
    return head, last


def _concat(a: LMOutput, b: LMOutput) -> LMOutput:
    cat = lambda x, y: torch.cat([x, y]) if x is not None and y is not None else None  # noqa: E731
    return LMOutput(
        logits=torch.cat([a.logits, b.logits]),
        hidden=cat(a.hidden, b.hidden),
        layer_hidden=cat(a.layer_hidden, b.layer_hidden),
    )


def _path_rows(out: LMOutput, path: Sequence[int]) -> LMOutput:
    """The target's output at [pending, the accepted drafts] (rows 0 and 1 + i for i in ``path``): the first rows
    when ``path`` is ``0..k−1`` (a chain), else a gather."""
    if all(i == k for k, i in enumerate(path)):
        n = len(path) + 1
        return LMOutput(out.logits[:n], _cut(out.hidden, None, n), _cut(out.layer_hidden, None, n))
    rows = torch.tensor([0, *(1 + i for i in path)])
    pick = lambda x: x.index_select(0, rows.to(x.device)) if x is not None else None  # noqa: E731
    return LMOutput(out.logits.index_select(0, rows.to(out.logits.device)), pick(out.hidden), pick(out.layer_hidden))


def stream(
    pair: ModelPair,
    prompt: str,
    method: str = "fixed:4",
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    chat: bool = True,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[RoundEvent]:
    """Yield one frozen :class:`RoundEvent` per round (see :class:`Generation` for the result)."""
    sampling = SamplingConfig(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    yield from Generation(pair, prompt, method, max_new_tokens, sampling, chat, should_stop).rounds()


def generate(
    pair: ModelPair,
    prompt: str,
    method: str = "fixed:4",
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    chat: bool = True,
) -> GenerationResult:
    """Run a whole generation; returns text, token ids, events and :class:`Stats`."""
    sampling = SamplingConfig(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    return Generation(pair, prompt, method, max_new_tokens, sampling, chat).run()
