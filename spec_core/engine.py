"""The decoding loop: plain autoregressive decoding and speculative rounds, yielding one event per round.

Speculative round (Leviathan et al. 2023; Chen et al. 2023), with the invariant that both KV caches hold every
token but the last one (the *pending* token) at the start of a round:

1. draft — the draft-length policy asks the drafter for chunks until it says stop;
2. verify — one target forward over [pending, x_1..x_γ] gives p_1..p_{γ+1} (the first round feeds only the
   drafts: the prefill of the whole prompt already gave p_1, so a generation of N tokens costs N target
   forwards counting the prefill, exactly like transformers' ``generate``);
3. accept — the verifier keeps the first ``accepted`` drafts and adds the recovered or bonus token;
4. roll back — the target cache is cropped to the accepted path, the drafter commits;
5. emit — the new tokens (cut at EOS / max_new_tokens) and one :class:`RoundEvent`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

import torch

from spec_core import rules
from spec_core.cached_lm import CachedLM, LMOutput
from spec_core.drafters import make_drafter
from spec_core.errors import SpecScopeError
from spec_core.guards import oom_guarded
from spec_core.methods import MethodSpec, parse_method
from spec_core.policies import DraftSoFar, make_policy
from spec_core.policies.fixed import FixedLength
from spec_core.prompting import prompt_ids
from spec_core.types import GenerationResult, RoundEvent, RoundInputs, SamplingConfig, Stats
from spec_core.verifiers import make_verifier

MAX_NEW_TOKENS_LIMIT = 4096
DRAFT_OVERSHOOT = 64  # positions a round may draft past the final length (cache room to check for)

__all__ = ["Generation", "generate", "prompt_ids", "stream"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Generation:
    """One generation run: iterate :meth:`rounds` for events, then read :meth:`result`."""

    def __init__(
        self,
        pair,
        prompt: str,
        method: str | MethodSpec = "fixed:4",
        max_new_tokens: int = 128,
        sampling: SamplingConfig | None = None,
        chat: bool = True,
        should_stop: Callable[[], bool] | None = None,
        display: bool = True,
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
        self.prompt_ids = prompt_ids(pair, prompt, chat)
        limit = getattr(pair.target.config, "max_position_embeddings", 1 << 30)
        if len(self.prompt_ids) + max_new_tokens + DRAFT_OVERSHOOT > limit:
            raise SpecScopeError(
                f"prompt ({len(self.prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the "
                f"target's context of {limit} tokens"
            )
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
        """(drafter, policy, verifier) of a speculative method, built with the loaded pair; Nones for ``ar``."""
        spec, pair = self.spec, self.pair
        if spec.kind != "speculative":
            return None, None, None
        drafter = make_drafter(pair, spec.drafter)
        policy = make_policy(spec.policy, pair) if spec.policy is not None else FixedLength(drafter.block_len)
        return drafter, policy, make_verifier(spec.verifier, pair)

    def rounds(self) -> Iterator[RoundEvent]:
        """One event per round until EOS, ``max_new_tokens`` or ``should_stop``.

        An out-of-memory error inside a round ends the run as a :class:`SpecScopeError` with its memory freed
        (:func:`spec_core.guards.oom_guarded`), so the next request finds the memory free.
        """
        rounds = self._tree_rounds() if self.spec.drafter.startswith("tree") else self._chain_rounds()
        return oom_guarded(rounds, self.pair.device, f"this {self.spec.name} generation", self._release)

    def _release(self) -> None:
        """Drop the caches kept for inspection, after a failed run (their memory is reused at once)."""
        self.target_lm = self.drafter = None

    @torch.inference_mode()
    def _chain_rounds(self) -> Iterator[RoundEvent]:
        pair, sampling = self.pair, self.sampling
        t_start = time.perf_counter()
        drafter, policy, verifier = self._parts()
        speculative = drafter is not None
        target = CachedLM(
            pair.target,
            layers=drafter.target_layers if speculative else (),
            hidden=speculative and (drafter.needs_target_hidden or verifier.needs_target_hidden),
        )
        target.reset()
        self.target_lm, self.drafter = target, drafter  # kept for inspection (tests check cache rollback)
        ids = list(self.prompt_ids)
        # The prefill runs the whole prompt, so its last position already gives p for the first new token
        # (as transformers' generate does): the first round feeds only its drafts. From then on the cache
        # holds every token but the pending one (the recovered / bonus token, not yet run).
        context, first = _split_prefill(target.forward(torch.tensor(ids), all_logits=False))
        if speculative:
            drafter.reset(ids, context if len(ids) > 1 else None)
        finished = False
        while not finished:
            t0 = time.perf_counter()
            # 1. draft: the policy asks for chunks until it says stop
            tokens, qs, token_probs, hidden, draft_logits = [], [], [], [], []
            propose_s = 0.0
            if speculative:
                budget = self.max_new_tokens - len(self.new_tokens) - 1
                while (n := policy.next_chunk(DraftSoFar(tokens, token_probs, hidden, budget))) > 0:
                    tp = time.perf_counter()
                    chunk = drafter.propose(n, sampling, self.generator)
                    propose_s += time.perf_counter() - tp
                    if not chunk.tokens:
                        break
                    tokens += chunk.tokens
                    token_probs += chunk.token_probs
                    hidden += chunk.hidden
                    draft_logits += chunk.logits
                    if chunk.probs is not None:
                        qs.append(chunk.probs)
            _sync(pair.device)
            t1 = time.perf_counter()
            # 2. verify: one target forward over [pending, x_1..x_γ] (first round: [x_1..x_γ] after the prefill)
            gamma = len(tokens)
            if first is not None:
                fed = torch.tensor(tokens)
                out = _concat(first, target.forward(fed)) if tokens else first
                first = None
            else:
                fed = torch.tensor([ids[-1], *tokens])
                out = target.forward(fed)
            _sync(pair.device)
            target_s = time.perf_counter() - t1
            # 3. accept
            inputs = verdict = None
            if gamma:
                inputs = RoundInputs(
                    draft_tokens=fed[-gamma:].to(out.logits.device),
                    draft_logit_rows=tuple(draft_logits),
                    sampled_probs=torch.cat(qs) if qs else None,
                    draft_hidden=torch.stack(hidden),
                    target_logits=out.logits,
                    target_hidden=out.hidden if verifier.needs_target_hidden else None,
                )
                verdict = verifier.verify(inputs, sampling, self.generator)
                accepted, next_token = verdict.accepted, verdict.next_token
                kind = "bonus" if accepted == gamma else "recovered"
            else:  # plain decoding step (ar, or a policy that drafted nothing)
                accepted, kind = 0, "target"
            # the target's distribution where next_token is chosen: one warp serves the draw and next_prob
            row = out.logits[accepted : accepted + 1]  # [1, V]
            dist = None if sampling.greedy else rules.warp_probs(row, sampling.temperature, sampling.top_k,
                                                                 sampling.top_p)  # fmt: skip
            if not gamma:
                next_token = int(row.argmax()) if dist is None else int(rules.sample(dist, self.generator)[0])
            next_prob = self._next_prob(next_token, dist, inputs, row, accepted) if self.display else None
            # 4. roll back to the accepted path
            target.crop(len(ids) + accepted)
            commit_s = 0.0
            if speculative:  # the drafter's own work on the verified tokens (e.g. EAGLE's feature fusion)
                tc = time.perf_counter()
                drafter.commit(accepted, next_token, _rows(out, accepted + 1))
                _sync(pair.device)
                commit_s = time.perf_counter() - tc
            ids += [*tokens[:accepted], next_token]
            # 5. emit
            emitted, finished = self._emit(tokens[:accepted], next_token)
            if self.should_stop is not None and self.should_stop():
                finished = True
            if speculative:
                stop_reason, policy_trace = policy.stop_reason, policy.trace()
                if inputs is not None:
                    policy.end_round(inputs, accepted)
            event = self._event(tokens, token_probs, inputs, verdict, accepted, next_token, next_prob, kind,
                                emitted, finished, len(ids) - accepted - 1)  # fmt: skip
            _sync(pair.device)
            t2 = time.perf_counter()
            event = dataclasses.replace(
                event, draft_s=t1 - t0, verify_s=t2 - t1, target_s=target_s,
                engine_s=(t1 - t0 - propose_s) + (t2 - t1 - target_s - commit_s),
                stop_reason=stop_reason if speculative else "", policy_trace=policy_trace if speculative else {},
            )  # fmt: skip
            self.events.append(event)
            self.wall_s = time.perf_counter() - t_start
            yield event

    @torch.inference_mode()
    def _tree_rounds(self) -> Iterator[RoundEvent]:
        """Token-tree rounds (EAGLE-2, arXiv 2406.16858): draft a tree, verify every node in one target forward
        with a tree mask, walk down the accepted path, compact both caches to it (a gather, not a crop)."""
        from spec_core.drafters.tree import TreeShape, attention_mask, make_tree_drafter, verification_inputs
        from spec_core.verifiers.tree import verify_tree

        pair, sampling = self.pair, self.sampling
        shape = TreeShape.parse(self.spec.drafter.partition(":")[2] or None)
        t_start = time.perf_counter()
        drafter = make_tree_drafter(pair)
        target = CachedLM(pair.target, layers=drafter.target_layers, hidden=True)
        target.reset()
        self.target_lm, self.drafter = target, drafter
        ids = list(self.prompt_ids)
        context, first = _split_prefill(target.forward(torch.tensor(ids), all_logits=False))
        drafter.reset(ids, context if len(ids) > 1 else None)
        finished = False
        while not finished:
            t0 = time.perf_counter()
            # 1. draft a tree (budget: never more depth than tokens still allowed)
            budget = self.max_new_tokens - len(self.new_tokens) - 1
            tree = drafter.propose_tree(dataclasses.replace(shape, depth=min(shape.depth, budget))) if budget else None
            t1 = time.perf_counter()
            # 2. verify every node in one target forward: [pending, nodes] (first round: the nodes only)
            if tree is None:
                out = first if first is not None else target.forward(torch.tensor([ids[-1]]))
            else:
                tokens, positions, visible = verification_inputs(tree, ids[-1], len(ids) - 1)
                skip = 1 if first is not None else 0  # the prefill already ran the pending token
                mask = attention_mask(visible[skip:, skip:], target.length, pair.target, pair.device)
                tail = target.forward(tokens[skip:], positions=positions[skip:], mask=mask)
                out = _concat(first, tail) if first is not None else tail
            first = None
            _sync(pair.device)
            target_s = time.perf_counter() - t1
            # 3. accept: walk down the tree
            if tree is not None:
                verdict = verify_tree(tree, out.logits, sampling, self.generator)
                path, next_token, kind = verdict.path, verdict.next_token, verdict.kind
            else:
                path, kind = [], "target"
                row = out.logits[:1]
                next_token = int(row.argmax()) if sampling.greedy else int(rules.sample(
                    rules.warp_probs(row, sampling.temperature, sampling.top_k, sampling.top_p), self.generator)[0])  # fmt: skip
            path_tokens = [int(tree.tokens[i]) for i in path] if tree is not None else []
            # 4. compact both caches to the accepted path
            rows = torch.tensor([0, *[1 + i for i in path]])
            if tree is not None:
                target.gather(torch.cat([torch.arange(len(ids)), len(ids) + torch.tensor(path, dtype=torch.long)]))
                drafter.commit_path(path, path_tokens, next_token, _select(out, rows))
            else:
                target.crop(len(ids))
                drafter.commit(0, next_token, _rows(out, 1))
            ids += [*path_tokens, next_token]
            # 5. emit
            emitted, finished = self._emit(path_tokens, next_token)
            if self.should_stop is not None and self.should_stop():
                finished = True
            event = self._tree_event(tree, verdict if tree is not None else None, path_tokens, next_token, kind,
                                     emitted, finished, len(ids) - len(path_tokens) - 1, out.logits)  # fmt: skip
            _sync(pair.device)
            t2 = time.perf_counter()
            event = dataclasses.replace(event, draft_s=t1 - t0, verify_s=t2 - t1, target_s=target_s,
                                        engine_s=t2 - t1 - target_s)  # fmt: skip
            self.events.append(event)
            self.wall_s = time.perf_counter() - t_start
            yield event

    def _tree_event(self, tree, verdict, path_tokens, next_token, kind, emitted, finished, context_len,
                    logits) -> RoundEvent:  # fmt: skip
        """A tree round as a chain-shaped event (the accepted path, then the first child rejected at the last node)
        plus the whole tree in ``tree`` for the tree view."""
        tree_record: dict = {}
        drafted = list(path_tokens)
        nodes = list(verdict.path) if verdict is not None else []
        last_rejected = [n for n, a in verdict.tried if n not in verdict.path] if verdict is not None else []
        draft_probs = target_probs = accept_probs = ()
        if verdict is not None:
            leaf_parent = verdict.path[-1] if verdict.path else -1
            rejected_here = [n for n in last_rejected if int(tree.parents[n]) == leaf_parent]
            if rejected_here:
                nodes.append(rejected_here[0])
                drafted.append(int(tree.tokens[rejected_here[0]]))
            tried = dict(verdict.tried)
            # the tree's shape and walk always (round_shape prices a round by them); its numbers only when shown
            tree_record = {
                "tokens": tree.tokens.tolist(), "parents": tree.parents.tolist(), "depths": tree.depths.tolist(),
                "path": list(verdict.path), "tried": [[n, a] for n, a in verdict.tried],
            }  # fmt: skip
            accept_probs = tuple(tried.get(n, 0.0) for n in nodes)
            if self.display:
                p = verdict.target_probs
                if p is None:  # greedy: the target's temperature-1 p of each node's token at its parent
                    p = rules.softmax_at(logits[tree.parents + 1], tree.tokens)
                values = torch.stack([tree.draft_probs.float(), p.float()]).tolist()
                tree_record |= {"pieces": list(self.pair.pieces(tree_record["tokens"])), "draft_probs": values[0],
                                "target_probs": values[1]}  # fmt: skip
                draft_probs = tuple(values[0][n] for n in nodes)
                target_probs = tuple(values[1][n] for n in nodes)
            else:
                draft_probs = tuple(float(tree.draft_probs[n]) for n in nodes)
        next_prob = None
        if self.display:
            at = 1 + verdict.path[-1] if verdict is not None and verdict.path else 0  # where next_token came from
            row = logits[at]
            next_prob = float(rules.softmax_at(row[None], torch.tensor([next_token], device=row.device))[0])
        return RoundEvent(
            index=len(self.events), method=self.spec.name, context_len=context_len, draft_tokens=tuple(drafted),
            draft_pieces=self.pair.pieces(drafted), draft_probs=draft_probs, target_probs=target_probs,
            accept_probs=accept_probs, gold_draft_probs=(), accepted=len(path_tokens), next_token=next_token,
            next_piece=self.pair.pieces([next_token])[0], next_kind=kind, emitted=emitted, draft_s=0.0, verify_s=0.0,
            finished=finished, next_prob=next_prob, tree=tree_record,
        )  # fmt: skip

    @staticmethod
    def _next_prob(next_token, dist, inputs, row, accepted) -> torch.Tensor:
        """``[1]`` the target's probability of ``next_token``: from the warped ``dist`` when sampling, else its
        temperature-1 softmax (from the round's one normaliser pass when there were drafts)."""
        next_id = torch.tensor([next_token], device=row.device)
        if dist is not None:
            return dist[0, next_id]
        if inputs is not None:
            return inputs.target_prob_at(slice(accepted, accepted + 1), next_id)
        return rules.softmax_at(row, next_id)

    def _event(self, tokens, token_probs, inputs, verdict, accepted, next_token, next_prob, kind, emitted, finished,
               context_len) -> RoundEvent:  # fmt: skip
        """The round's display record: the per-token probabilities in one host copy, pieces from the pair's cache.

        ``next_prob`` ``[1]`` is the target's probability of ``next_token`` (its temperature-1 softmax when greedy,
        else the warped distribution). Without ``display`` (benchmarks) the event keeps what the method produced
        (draft and acceptance probabilities, the verifier's trace) and leaves ``target_probs``,
        ``gold_draft_probs`` empty and ``next_prob`` None unless the rule computed them anyway.
        """
        gamma = len(tokens)
        if gamma and not self.display:
            shown = [verdict.accept_probs.float()] + (
                [verdict.target_probs.float()] if verdict.target_probs is not None else []
            )
            values = torch.cat(shown).tolist()
            accept_probs, target_probs = tuple(values[:gamma]), tuple(values[gamma:])
            gold_probs, next_value = (), None
        elif gamma:
            gold = inputs.target_argmax[:gamma]  # [γ] the target's own choices
            if self.sampling.greedy:  # q(gold) = q(x)·exp(l_gold − l_x): token_probs are q's softmax here
                x = inputs.draft_tokens[:, None]
                ratio = (inputs.draft_logits.gather(-1, gold[:, None]) - inputs.draft_logits.gather(-1, x))[:, 0]
                gold_q = ratio.exp() * torch.tensor(token_probs, dtype=ratio.dtype, device=ratio.device)
            else:
                gold_q = rules.softmax_at(inputs.draft_logits, gold)
            p_x = verdict.target_probs
            if p_x is None:  # the rule did not need p: its temperature-1 softmax, one normaliser pass
                p_x = inputs.target_prob_at(slice(0, gamma), inputs.draft_tokens)
            rows = torch.cat([p_x.float(), verdict.accept_probs.float(), gold_q.float(), next_prob.float()])
            values = rows.tolist()  # the one host copy of the round's display numbers
            target_probs, accept_probs = tuple(values[:gamma]), tuple(values[gamma : 2 * gamma])
            gold_probs, next_value = tuple(values[2 * gamma : 3 * gamma]), values[-1]
        else:
            target_probs = accept_probs = gold_probs = ()
            next_value = float(next_prob) if next_prob is not None else None
        return RoundEvent(
            index=len(self.events),
            method=self.spec.name,
            context_len=context_len,
            draft_tokens=tuple(tokens),
            draft_pieces=self.pair.pieces(tokens),
            draft_probs=tuple(token_probs),
            target_probs=target_probs,
            accept_probs=accept_probs,
            gold_draft_probs=gold_probs,
            accepted=accepted,
            next_token=next_token,
            next_piece=self.pair.pieces([next_token])[0],
            next_kind=kind,
            emitted=emitted,
            draft_s=0.0,
            verify_s=0.0,
            verifier_trace=verdict.trace if verdict is not None else {},
            finished=finished,
            next_prob=next_value,
        )

    def result(self) -> GenerationResult:
        return GenerationResult(
            text=self.pair.tokenizer.decode(self.new_tokens, skip_special_tokens=True),
            token_ids=tuple(self.new_tokens),
            prompt_ids=tuple(self.prompt_ids),
            events=tuple(self.events),
            stats=Stats.from_events(self.events, len(self.new_tokens), self.wall_s),
        )


def _cut(t: torch.Tensor | None, start: int | None, stop: int | None) -> torch.Tensor | None:
    return t[start:stop] if t is not None else None


def _split_prefill(prefill: LMOutput) -> tuple[LMOutput, LMOutput]:
    """(the prompt's positions but the last, without logits; the last position with its logits)."""
    head = LMOutput(prefill.logits[:0], _cut(prefill.hidden, None, -1), _cut(prefill.layer_hidden, None, -1))
    last = LMOutput(prefill.logits[-1:], _cut(prefill.hidden, -1, None), _cut(prefill.layer_hidden, -1, None))
    return head, last


def _concat(a: LMOutput, b: LMOutput) -> LMOutput:
    cat = lambda x, y: torch.cat([x, y]) if x is not None and y is not None else None  # noqa: E731
    return LMOutput(logits=torch.cat([a.logits, b.logits]), hidden=cat(a.hidden, b.hidden),
                    layer_hidden=cat(a.layer_hidden, b.layer_hidden))  # fmt: skip


def _select(out: LMOutput, rows: torch.Tensor) -> LMOutput:
    """The target output at positions ``rows`` (a tree's accepted path)."""
    pick = lambda x: x.index_select(0, rows.to(x.device)) if x is not None else None  # noqa: E731
    return LMOutput(pick(out.logits), pick(out.hidden), pick(out.layer_hidden))


def _rows(out: LMOutput, n: int) -> LMOutput:
    """The first ``n`` positions of a target output (the accepted path)."""
    return LMOutput(out.logits[:n], _cut(out.hidden, None, n), _cut(out.layer_hidden, None, n))


def stream(
    pair,
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
    pair,
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
    run = Generation(pair, prompt, method, max_new_tokens, sampling, chat)
    for _ in run.rounds():
        pass
    return run.result()
