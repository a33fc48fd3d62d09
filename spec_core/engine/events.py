"""A round's record, written beside the loop: the :class:`~spec_core.core.types.RoundEvent` and the clock that times it.

The engine (:mod:`spec_core.engine.loop`) runs the algorithm; :class:`RoundRecorder` turns what a round produced into
its frozen event (the display numbers in one host copy, docs/STYLE.md §4), and :class:`RoundClock` fills the
event's timings, so that neither clutters the loop.

A round's drafts are a chain (x_i follows x_{i−1}) or a token tree (EAGLE-2, arXiv 2406.16858; ``parents`` in the
:class:`~spec_core.drafters.base.RoundDraft`). The event's per-token fields read either as a line: a chain's every
draft; a tree's accepted path, then the first child rejected at its end. A tree round also carries the whole tree
(:class:`~spec_core.core.types.TreeRound`) for the tree view.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from spec_core.core import rules
from spec_core.core.types import TOP_K_AT_REJECTION, NextKind, Rejection, RoundEvent, RoundInputs, TreeRound
from spec_core.drafters.base import RoundDraft
from spec_core.verifiers.base import Verdict


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU runs asynchronously: the host clock would not see it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class RoundClock:
    """One round's wall clock. The engine marks where drafting ends (:meth:`verifying`) and wraps the drafter's calls
    (:meth:`drafter`) and the target forward (:meth:`target`); :meth:`stamp` fills the event's timings:

    - ``draft_s``: step 1, drafting (the policy and the drafter's proposals);
    - ``verify_s``: steps 2–5 (the target forward, the rule, the rollback with the drafter's commit, the event);
    - ``target_s``: the target forward alone;
    - ``engine_s``: what was neither the drafter's own work (proposals, commit) nor the target forward.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.start = self.verify_start = time.perf_counter()
        self.drafter_s = self.target_s = 0.0

    def _span(self, seconds: float) -> float:
        sync(self.device)
        return time.perf_counter() - seconds

    @contextmanager
    def drafter(self) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.drafter_s += self._span(t)

    @contextmanager
    def target(self) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.target_s += self._span(t)

    def verifying(self) -> None:
        """Drafting is over: what follows counts as verification."""
        sync(self.device)
        self.verify_start = time.perf_counter()

    def stamp(self, event: RoundEvent) -> RoundEvent:
        sync(self.device)
        end = time.perf_counter()
        return dataclasses.replace(
            event,
            draft_s=self.verify_start - self.start,
            verify_s=end - self.verify_start,
            target_s=self.target_s,
            engine_s=end - self.start - self.drafter_s - self.target_s,
        )


class RoundRecorder:
    """Writes one generation's events. ``display=False`` (benchmarks) keeps what the method itself produced (draft
    and acceptance probabilities, p where the rule formed it, the verifier's trace) and skips the numbers only a
    viewer reads: p(x) the rule never needed, q of the target's choice, p of the next token, a tree's per-node text
    and numbers."""

    def __init__(self, method: str, pieces: Callable[[Sequence[int]], tuple[str, ...]], greedy: bool, display: bool):
        self.method, self.pieces, self.greedy, self.display = method, pieces, greedy, display

    def event(
        self,
        *,
        index: int,
        context_len: int,
        draft: RoundDraft,
        inputs: RoundInputs | None,
        verdict: Verdict | None,
        next_token: int,
        next_prob: torch.Tensor | None,
        emitted: tuple[int, ...],
        finished: bool,
        stop_reason: str,
        policy_trace: dict[str, Any],
    ) -> RoundEvent:
        """The round's event (timings left at 0 for :meth:`RoundClock.stamp`). ``next_prob`` ``[1]`` is the target's
        probability of ``next_token`` (None without display)."""
        gamma = len(draft)
        path = verdict.accepted_path if verdict is not None else ()
        line = draft.line(path)
        kind: NextKind = "target"
        if gamma:  # recovered when a draft after the kept ones was rejected, bonus when none followed them
            kind = "recovered" if draft.children(path[-1] if path else -1) else "bonus"
        rejected = line[len(path)] if kind == "recovered" and self.display else None  # the draft rejected
        numbers = None
        if gamma:
            assert inputs is not None and verdict is not None  # a drafted round was verified
            numbers = self._numbers(draft, inputs, verdict, line, next_prob, rejected)
        rejection = None
        values: list[float]
        gold: tuple[float, ...]
        next_value: float | None
        if numbers is None:
            values, gold, next_value = [], (), float(next_prob) if next_prob is not None else None
        else:
            values, gold, next_value, top = numbers
            rejection = self._rejection(len(path), top) if top else None
        p_all, accept_all = values[gamma:], values[:gamma]  # per draft: p(x) (when known), acceptance probability
        tree = None
        if draft.parents is not None and verdict is not None:
            shown: dict[str, Any] = {}
            if self.display:
                shown = {
                    "pieces": self.pieces(draft.tokens),
                    "draft_probs": tuple(draft.token_probs),
                    "target_probs": tuple(p_all),
                }
            tree = TreeRound(
                tuple(draft.tokens),
                tuple(draft.parents),
                tuple(draft.depths()),
                tuple(path),
                tuple((n, accept_all[n]) for n in verdict.tried),
                **shown,
            )
        tokens = [draft.tokens[i] for i in line]
        return RoundEvent(
            index=index,
            method=self.method,
            context_len=context_len,
            draft_tokens=tuple(tokens),
            draft_pieces=self.pieces(tokens),
            draft_probs=tuple(draft.token_probs[i] for i in line),
            target_probs=tuple(p_all[i] for i in line) if p_all else (),
            accept_probs=tuple(accept_all[i] for i in line),
            gold_draft_probs=gold,
            accepted=len(path),
            next_token=next_token,
            next_piece=self.pieces([next_token])[0],
            next_kind=kind,
            emitted=emitted,
            draft_s=0.0,
            verify_s=0.0,
            stop_reason=stop_reason,
            policy_trace=policy_trace,
            verifier_trace=verdict.trace if verdict is not None else {},
            finished=finished,
            next_prob=next_value,
            tree=tree,
            draft_sources=tuple(draft.sources[i] for i in line),
            draft_copy_offers=tuple(draft.copy_offers[i] for i in line)
            if any(t >= 0 for t, _ in draft.copy_offers)
            else (),
            draft_forwards=draft.forwards,
            rejection=rejection,
        )

    def _rejection(self, position: int, top: list[float]) -> Rejection:
        """The rejected draft's record from :func:`_top_at`'s numbers (ids, p, ids, q, then q(target's token))."""
        k = (len(top) - 1) // 4
        t_ids, t_p = [int(t) for t in top[:k]], top[k : 2 * k]
        kept = [i for i in range(k) if top[3 * k + i] > 0]  # a copied draft's q is a point mass: one token
        d_ids, d_p = [int(top[2 * k + i]) for i in kept], [top[3 * k + i] for i in kept]
        return Rejection(
            position,
            tuple(t_ids),
            self.pieces(t_ids),
            tuple(t_p),
            tuple(d_ids),
            self.pieces(d_ids),
            tuple(d_p),
            top[-1],
        )

    def _numbers(
        self,
        draft: RoundDraft,
        inputs: RoundInputs,
        verdict: Verdict,
        line: Sequence[int],
        next_prob: torch.Tensor | None,
        rejected: int | None = None,
    ) -> tuple[list[float], tuple[float, ...], float | None, list[float]]:
        """One host copy: per draft [acceptance probability (γ), p(x) (γ, when known)], then q(gold) of the line's
        drafts, p(next token) and, at the ``rejected`` draft, both models' top-k (display only)."""
        gamma = inputs.gamma
        rows = [verdict.accept_probs.float()]
        if not self.display:
            if verdict.target_probs is not None:  # sampling verification needs p anyway: it stays
                rows.append(verdict.target_probs.float())
            return torch.cat(rows).tolist(), (), None, []
        p_x = verdict.target_probs
        if p_x is None:  # the rule did not need p: its temperature-1 softmax, one normaliser pass
            p_x = inputs.target_prob_at(inputs.parent_rows, inputs.draft_tokens)
        chain = isinstance(line, range)  # a chain's line is every draft: the stacked rows serve as they are
        at = slice(0, gamma) if chain else torch.tensor(line, device=inputs.draft_tokens.device)
        gold = inputs.target_argmax[inputs.parent_rows][at]  # the target's own choice where each draft was read
        logits = inputs.draft_logits if chain else torch.stack([inputs.draft_logit_rows[i] for i in line])
        if self.greedy:  # q(gold) = q(x)·exp(l_gold − l_x): the drafts' probabilities are q's softmax here
            x = inputs.draft_tokens[at][:, None]
            ratio = (logits.gather(-1, gold[:, None]) - logits.gather(-1, x))[:, 0]
            probs = torch.tensor([draft.token_probs[i] for i in line], dtype=ratio.dtype, device=ratio.device)
            gold_q = ratio.exp() * probs
        else:
            gold_q = rules.softmax_at(logits, gold)
        top = _top_at(inputs, rejected, draft.parents) if rejected is not None else torch.zeros(0)
        assert next_prob is not None  # the engine gives it whenever it displays
        parts = [*rows, p_x, gold_q, next_prob, top]  # float64: token ids in ``top`` stay exact
        values = torch.cat([v.double() for v in parts]).tolist()
        n = 2 * gamma + len(gold_q) + 1  # where the top-k begins
        return values[: 2 * gamma], tuple(values[2 * gamma : n - 1]), values[n - 1], values[n:]


def _top_at(inputs: RoundInputs, rejected: int, parents: Sequence[int] | None) -> torch.Tensor:
    """``[4k + 1]`` both models at the rejected draft x_r, temperature-1 softmax: the target's top-k ids and p
    (its row that verified x_r), the draft's top-k ids and q (the row x_r was drawn from), then q(the target's
    top-1). Two top-k's and two normalisers of one row each: no forward, no loop over the vocabulary."""
    row = rejected if parents is None else parents[rejected] + 1  # row 0 is the pending token's
    t_logits, d_logits = inputs.target_logits[row].float(), inputs.draft_logit_rows[rejected].float()  # [V] each
    k = min(TOP_K_AT_REJECTION, t_logits.shape[-1])
    t_vals, t_ids = t_logits.topk(k)
    d_vals, d_ids = d_logits.topk(k)
    t_lse, d_lse = torch.logsumexp(t_logits, -1), torch.logsumexp(d_logits, -1)
    q_target = (d_logits[t_ids[0]] - d_lse).exp()
    return torch.cat(
        [
            t_ids.double(),
            (t_vals - t_lse).exp().double(),
            d_ids.double(),
            (d_vals - d_lse).exp().double(),
            q_target[None].double(),
        ]
    )
