"""Drafts that need no training: prompt lookup, and prompt lookup with the pair's draft where nothing matches.

- ``lookup`` — prompt lookup decoding (Saxena 2023, "Prompt Lookup Decoding"; transformers'
  ``prompt_lookup_num_tokens``, vLLM's ``ngram`` proposer, llama.cpp's n-gram modes): match the last n tokens of
  the text (``max`` down to ``min``) against the prompt and everything verified so far, and propose what followed
  the match, up to ``k`` tokens. Spec-Bench (Xia et al. 2024, arXiv 2401.07851) finds it strongest where the
  answer copies its input: summarization and retrieval-augmented QA.
- ``hybrid`` — the lookup where it matches well enough, else the pair's own draft network, one source per round
  (as SAM-Decoding, Hu et al. 2024, arXiv 2411.10666, combines its suffix automaton with EAGLE).

A lookup draft is deterministic: q is a point mass on the copied token, so the lossless rule keeps the target's
distribution when sampling (it accepts x with probability p(x) and otherwise samples the residual p without x).

The index is kept incrementally (:class:`NgramIndex`): each verified token adds its n-grams once, so a round's
match is a few dictionary look-ups, never a scan of the context. Each drafted token carries the drafter's
*estimate* that it is kept, learned as the generation goes from the match's own evidence (the n-gram's length,
whether its continuation recurred, the position in the copied run): the ``cost`` policy turns these into a draft
length with this machine's pass costs (:mod:`spec_core.policies.cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Protocol, cast

import numpy as np
import torch

from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import SamplingConfig
from spec_core.drafters.base import DraftChunk, Drafter
from spec_core.drafters.ngram import NgramIndex
from spec_core.drafters.pair_draft import PairDraft
from spec_core.model.cached_lm import LMOutput

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

GREEDY = SamplingConfig()  # a branched round's network token: its greedy choice, deterministic given the text
COPY_SOURCE = "lookup"  # DraftChunk.source of a copied token (the hybrid's network drafts are "model")
MAX_NGRAM = 8
MAX_K = 32
EXPLORE = 8  # a network priced below a plain step still drafts one round in this many
PRIOR_FIRST, PRIOR_NEXT, PRIOR_WEIGHT = 0.4, 0.7, 4.0  # a fresh text's guess: the first copied token is kept 40%
#   of the time, each next one (once the one before was kept) 70%, worth 4 rounds of evidence; the generation's own
#   rounds take over within a few rounds (docs/ALGORITHMS.md §5)


@dataclass(frozen=True)
class LookupParams:
    """``lookup:min=1,max=3,k=8``: n-grams of ``min``..``max`` tokens are matched, up to ``k`` tokens copied."""

    min_n: int = 1
    max_n: int = 3
    k: int = 8

    @classmethod
    def parse(cls, arg: str | None, what: str) -> LookupParams:
        values = {"min": cls.min_n, "max": cls.max_n, "k": cls.k}
        for piece in (p.strip() for p in (arg or "").split(",")):
            if not piece:
                continue
            key, eq, value = piece.partition("=")
            if not eq or key.strip() not in values or not value.strip().isdigit():
                raise SpecScopeError(
                    f"{what}: settings are min=N, max=N, k=N (e.g. {what}:min=1,max=3,k=8); got {piece!r}"
                )
            values[key.strip()] = int(value)
        params = cls(values["min"], values["max"], values["k"])
        if not 1 <= params.min_n <= params.max_n <= MAX_NGRAM:
            raise SpecScopeError(
                f"{what}: needs 1 <= min <= max <= {MAX_NGRAM}, got min={params.min_n}, max={params.max_n}"
            )
        if not 1 <= params.k <= MAX_K:
            raise SpecScopeError(f"{what}: needs 1 <= k <= {MAX_K}, got k={params.k}")
        return params


def special_ids(tokenizer) -> frozenset[int]:
    """The tokenizer's special tokens (``all_special_ids`` and every added token marked special): the chat
    template's markers (``<|im_start|>``, ``<|im_end|>``), end of text, and the like. A copy never proposes one."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or ())
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i, token in added.items() if getattr(token, "special", False))
    return frozenset(ids)


class KeepEstimates:
    """P(a copied token is kept | the copied ones before it were), by (n, position in the run, recurred), learned
    from this generation's rounds and shrunk towards the coarser bucket (position alone), then the prior."""

    def __init__(self) -> None:
        self.counts: dict[tuple, list[float]] = {}  # bucket → [kept, tried]

    @staticmethod
    def _buckets(n: int, depth: int, recurred: bool) -> tuple[tuple, tuple]:
        d = min(depth, 4)
        return (n, d, recurred), (d,)

    def estimate(self, n: int, depth: int, recurred: bool) -> float:
        fine, coarse = self._buckets(n, depth, recurred)
        prior = PRIOR_FIRST if depth == 1 else PRIOR_NEXT
        kept, tried = self.counts.get(coarse, (0.0, 0.0))
        mean = (kept + PRIOR_WEIGHT * prior) / (tried + PRIOR_WEIGHT)
        kept, tried = self.counts.get(fine, (0.0, 0.0))
        return (kept + PRIOR_WEIGHT * mean) / (tried + PRIOR_WEIGHT)

    def update(self, n: int, drafted: int, accepted: int, recurred: bool) -> None:
        for depth in range(1, min(drafted, accepted + 1) + 1):  # tried: every copied token up to the first rejected
            for bucket in self._buckets(n, depth, recurred):
                row = self.counts.setdefault(bucket, [0.0, 0.0])
                row[0] += depth <= accepted
                row[1] += 1


class LookupDrafter:
    """Prompt lookup: copies what followed the longest recent match of the text's last n tokens."""

    target_layers: tuple[int, ...] = ()
    needs_target_hidden = False

    def __init__(
        self, params: LookupParams, vocab_size: int, device: torch.device, banned: frozenset[int] = frozenset()
    ):
        self.params, self.vocab, self.device, self.banned = params, vocab_size, device, banned
        self.index = NgramIndex(params.min_n, params.max_n, banned)
        self.estimates = KeepEstimates()
        self._round: tuple[int, int, bool] | None = None  # (n, next position to copy, recurred) of this round's match
        self.drafted: list[int] = []  # this round's copied tokens
        self._searched = False  # whether this round looked for its match yet

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        self.index = NgramIndex(self.params.min_n, self.params.max_n, self.banned)
        self.index.extend(prompt_ids)
        self.estimates = KeepEstimates()
        self._round, self.drafted, self._searched = None, [], False

    def has_match(self) -> bool:
        """Whether this round can copy anything (searches once a round)."""
        if not self._searched:
            self._searched, self._round = True, self.index.match()
        return self._round is not None

    @property
    def peek_at_start(self) -> list[int]:
        """What this round's copy proposes, up to ``k`` tokens (``[]``: no match), whatever was drafted of it."""
        if not self.has_match():
            return []
        assert self._round is not None  # has_match
        _, at, _ = self._round
        start = at - len(self.drafted)
        return self.index.copy(start, self.params.k)

    def learn(self, kept: Sequence[int]) -> None:
        """How much of this round's copy (all it could propose, drafted or not) the round's verified text ``kept``
        (kept drafts and the target's token) bears out: known up to ``kept``'s length, so a round another source
        drafted, or one the policy cut short, teaches the estimates too."""
        proposal = self.peek_at_start
        if not proposal or self._round is None:
            return
        match = next((i for i, (a, b) in enumerate(zip(proposal, kept)) if a != b), min(len(proposal), len(kept)))
        tried = match if match == len(kept) else min(len(proposal), match + 1)  # past the known text: censored
        self.estimates.update(self._round[0], tried, match, self._round[2])

    def run_estimates(self) -> list[float]:
        """This round's copy as it stands: the estimate for each token it could still copy (``[]``: no match)."""
        if not self.has_match():
            return []
        assert self._round is not None  # has_match
        n, at, recurred = self._round
        room = len(self.index.copy(at, self.params.k - len(self.drafted)))  # to k, the text's end, a banned token
        first = len(self.drafted) + 1
        return [self.estimates.estimate(n, first + i, recurred) for i in range(max(room, 0))]

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        estimates = self.run_estimates()[:n]  # one per token copied now (searches the round's match once)
        tokens: list[int] = []
        if self._round is not None:
            size, at, recurred = self._round
            tokens = self.index.ids[at : at + len(estimates)]
            self._round = (size, at + len(tokens), recurred)
        self.drafted += tokens
        return self.chunk(tokens, sampling, estimates)

    def chunk(self, tokens: list[int], sampling: SamplingConfig, estimates: list[float]) -> DraftChunk:
        """Copied tokens as a chunk: q a point mass on each (its logits row −1e9 but there), no draft forward."""
        rows = torch.full((len(tokens), self.vocab), -1e9, device=self.device)
        if tokens:
            rows[torch.arange(len(tokens)), torch.tensor(tokens, device=self.device)] = 0.0
        probs = None if sampling.greedy else (rows == 0.0).float()
        hidden = [torch.zeros(1, device=self.device)] * len(tokens)
        return DraftChunk(tokens, probs, [1.0] * len(tokens), hidden, list(rows), 0, None, COPY_SOURCE, estimates)

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        kept = [*self.drafted[:accepted], next_token]
        self.learn(kept)
        self.end_round(kept)

    def end_round(self, kept: Sequence[int]) -> None:
        """The round's verified tokens (kept drafts, whoever drafted them, and the target's token) join the index."""
        self.index.extend(kept)
        self._round, self.drafted, self._searched = None, [], False


class FollowingDrafter(Drafter, Protocol):
    """A chain drafter that can take tokens another source drafted into its cache and features."""

    def follow(self, tokens: Sequence[int]) -> None: ...


class HybridDrafter:
    """The lookup where a copied round promises more tokens per millisecond than the draft network's rounds have
    been giving (and than a plain step), else the network, unless its record is below a plain step's; one source
    per round. Both are priced by the one cost model: the copy at its
    tokens' estimates (:meth:`LookupDrafter.run_estimates`) and its best length, the network at its record in this
    generation (tokens a round over the round's price), from a prior of :data:`PRIOR_FIRST` kept first tokens.

    The network catches up only when it drafts: while other rounds go by (copied ones, plain steps, and every round
    before its first) it is left alone, and the hybrid keeps the verified tokens and the target's states of their
    positions (:meth:`_keep`). Its next round first takes them all in one call (:meth:`_catch_up`): its ``reset``
    over the text so far the first time, else one ``follow`` + ``commit`` over the whole stretch, which leaves its
    cache and features as following every round would have (``tests/engine/test_lookup.py`` checks its drafts
    against that). A stretch of copied rounds so costs what ``lookup`` alone costs.

    The network's start is priced too: its pass over the text so far (a tenth of a second, four plain steps, for a
    770-token passage here) is paid once, when it first drafts, and is worth it only if enough of its rounds follow.
    So it starts as a ski rental does (rent until the rent paid equals the price, then buy): each round the
    network's record (its prior, before the start) would have won, the milliseconds it would have saved add up, and
    it starts once they reach the start's price (:meth:`start_ms`); until then the round goes to the better of the
    copy and a plain step. Waiting so costs at most the start's price, and a text the copy serves well never pays
    for the network's pass over a long prompt. Nor does a text about to end: when the engine says how many tokens
    are left (:meth:`before_round`), the network starts only if its rounds over them would repay the start."""

    def __init__(
        self,
        lookup: LookupDrafter,
        model: FollowingDrafter,
        profile: CostProfile,
        share: float = 0.0,
        branch: bool = False,
    ):
        self.lookup, self.model, self.profile = lookup, model, profile
        self.branch = branch  # whether a round may verify both sources at once (a two-branch tree)
        self.share = share  # the network's multiply-adds per position over the target's (position_work): its pass
        #   over n tokens is priced as this share of the target's pass over n tokens beyond a plain step
        self.target_layers = model.target_layers
        self.needs_target_hidden = model.needs_target_hidden
        self.source: str | None = None  # this round's
        self.drafted: list[int] = []  # this round's drafts, from either source
        self.forwards = 0  # this round's draft forwards
        self.idle = 0  # rounds since the network last drafted
        self.model_record = self._prior()  # the network's rounds: [tokens, ms]
        self.first_record = [PRIOR_WEIGHT * PRIOR_FIRST, PRIOR_WEIGHT]  # its first drafted token: [kept, drafted]
        self.branch_len = 0  # a branched round's copy length (chosen with the round)
        self.net_token = -1  # a branched round's network token
        self.branch_rescue = 0.0  # its chance to be the kept one: the network's first-token rate × (1 − a_1), priced
        #   with the round (branch_value)
        self.behind: list[int] = []  # verified tokens the network has not taken in (from the prompt, until it starts)
        self.rows: list[LMOutput] = []  # the target's states of the verified positions among them, in order
        self.started = False
        self.forgone = 0.0  # ms the network would have saved (by its prior) in the rounds it waited to start
        self.remaining: int | None = None  # new tokens the generation may still add (None: not told)
        # prices asked every round, fixed for the generation: a plain step; a copied round of 1..k tokens
        self.plain_ms = float(profile.round_ms(1, 0))
        self.copy_ms = [float(ms) for ms in profile.round_ms(np.arange(2, lookup.params.k + 2), 0)]
        self.branch_ms = [float(ms) for ms in profile.round_ms(np.arange(3, lookup.params.k + 3), 1)]  # + 1 network

    def _prior(self) -> list[float]:
        """The network's record before any round: PRIOR_WEIGHT rounds of one draft kept with PRIOR_FIRST."""
        return [PRIOR_WEIGHT * (1 + PRIOR_FIRST), PRIOR_WEIGHT * float(self.profile.round_ms(2, 1))]

    def reset(self, prompt_ids: list[int], prefill: LMOutput | None) -> None:
        self.lookup.reset(prompt_ids, prefill)
        self.behind, self.rows, self.started = list(prompt_ids), [], False
        if prefill is not None:
            self._keep(prefill)
        self.source, self.drafted, self.forwards, self.idle, self.forgone = None, [], 0, 0, 0.0
        self.model_record, self.remaining = self._prior(), None
        self.first_record = [PRIOR_WEIGHT * PRIOR_FIRST, PRIOR_WEIGHT]

    def before_round(self, remaining: int) -> None:
        """The engine's word on how many new tokens the generation may still add (drafters/base.py)."""
        self.remaining = remaining

    def _keep(self, out: LMOutput) -> None:
        """The target's states of verified positions, for the network's catch-up (its logits are not needed)."""
        layer = out.layer_hidden.clone() if out.layer_hidden is not None else None
        hidden = out.hidden.clone() if out.hidden is not None else None
        self.rows.append(LMOutput(out.logits.new_empty(0, out.logits.shape[-1]), hidden, layer))

    def _catch_up(self) -> None:
        """The network takes in the text it has not seen, in one call: its first round, a ``reset`` over the text so
        far; later, one ``follow`` + ``commit`` of the stretch as one round (its verified tokens as kept drafts, the
        last as the target's token: ``commit`` reads the states of the stretch's positions, the pending one first)."""
        cat = lambda xs: torch.cat(xs) if xs and all(x is not None for x in xs) else None  # noqa: E731
        rows, behind = self.rows, self.behind
        states = None
        if rows:
            states = LMOutput(rows[0].logits, cat([r.hidden for r in rows]), cat([r.layer_hidden for r in rows]))
        if not self.started:
            self.model.reset(behind, states if len(behind) > 1 else None)
        elif behind:
            assert states is not None  # a round behind kept its states
            self.model.follow(behind[:-1])
            self.model.commit(len(behind) - 1, behind[-1], states)
        self.behind, self.rows, self.started = [], [], True

    def start_ms(self) -> float:
        """The network's start: its pass over the text so far (``len(behind)`` tokens), priced as :attr:`share` of
        the target's pass over as many tokens beyond a plain step (one cost model; on the accelerator model, where
        a wide pass costs about a step, the start is nearly free)."""
        return self.share * max(float(self.profile.round_ms(len(self.behind), 0)) - self.plain_ms, 0.0)

    def copy_value(self) -> float:
        """Tokens per millisecond of this round's copy at its best length (0 without a match)."""
        best, tokens, kept = 0.0, 1.0, 1.0  # a round of i copies adds 1 + Σ_{j≤i} Π_{l≤j} a_l tokens on average
        for estimate, ms in zip(self.lookup.run_estimates(), self.copy_ms):  # a few tokens: no array work
            kept *= estimate
            tokens += kept
            best = max(best, tokens / ms)
        return best

    def branch_value(self) -> tuple[float, int, float]:
        """A branched round at its best copy length: (tokens per millisecond, the length, its expected tokens), or
        (0, 0, 0) without a copy or with branching off. The copy's run and the network's one token hang side by
        side off the pending token, so the round keeps whichever the target bears out: besides the copy's expected
        tokens, the network's token adds its own record's first-token rate wherever the copy's first fails,
        ``r · (1 − a_1)`` (two different tokens at one position: at most one is kept). It costs a pass over the
        copy, the network's token and the pending one, and one draft forward."""
        if not self.branch:
            return 0.0, 0, 0.0
        estimates = self.lookup.run_estimates()
        if self.remaining is not None:  # the tree's depth (the copy's length) within what may still be written
            estimates = estimates[: max(self.remaining - 1, 0)]
        if not estimates:
            return 0.0, 0, 0.0
        rate = self.first_record[0] / self.first_record[1]
        network = self.branch_rescue = rate * (1.0 - estimates[0])  # kept with the round's length
        best, length, expected, tokens, kept = 0.0, 0, 0.0, 1.0, 1.0
        for i, (estimate, ms) in enumerate(zip(estimates, self.branch_ms), 1):  # a few tokens: no array work
            kept *= estimate
            tokens += kept
            if (tokens + network) / ms > best:
                best, length, expected = (tokens + network) / ms, i, tokens + network
        return best, length, expected

    def _choose(self) -> str:
        """This round's source: the copy, the network, both side by side (a branched round), or none (a plain
        step), whichever promises the most tokens per millisecond. Before its start the network waits until the
        rounds it would have won have forgone its start's price (the class's docstring). Once started, a network
        whose record is below a plain step's still drafts one round in :data:`EXPLORE`, so that its record can
        recover when the text changes."""
        network = self.model_record[0] / self.model_record[1]
        plain = 1.0 / self.plain_ms
        copy = self.copy_value()
        both, self.branch_len, both_tokens = self.branch_value()
        if copy >= max(network, plain, both):
            return "lookup"
        if not self.started:
            tokens, ms = (x / PRIOR_WEIGHT for x in self.model_record)  # the prior's round
            if both > network:  # the branched round is the network's best use here
                tokens, ms = both_tokens, both_tokens / both
            saving = max(tokens / max(copy, plain) - ms, 0.0)  # what this round forgoes without the network
            self.forgone += saving
            price = self.start_ms()
            if self.forgone < price or not self._repays(saving, tokens, price):
                return "lookup" if copy >= plain else "none"
            return "both" if both > network else "model"
        self.idle += 1
        if both > max(network, plain):
            self.idle = 0
            return "both"
        if network >= plain or self.idle >= EXPLORE:
            self.idle = 0
            return "model"
        return "none"

    def _repays(self, saving: float, tokens: float, price: float) -> bool:
        """Whether the network's rounds over the tokens left (``remaining / tokens`` rounds, each saving ``saving``
        ms by its prior) would repay its start's ``price``; True when the engine has not said what is left."""
        if self.remaining is None:
            return True
        return self.remaining / tokens * saving >= price

    def propose(self, n: int, sampling: SamplingConfig, generator: torch.Generator | None) -> DraftChunk:
        if self.source is None:
            self.source = self._choose()
        if self.source == "none":  # neither source is worth its pass here: a plain step
            return self.lookup.chunk([], sampling, [])
        if self.source == "both":
            return self._branched() if not self.drafted else self.lookup.chunk([], sampling, [])  # one a round
        if self.source == "lookup":
            chunk = self.lookup.propose(n, sampling, generator)
        else:
            if self.behind or not self.started:
                self._catch_up()
            chunk = self.model.propose(n, sampling, generator)
        self.drafted += chunk.tokens
        self.forwards += chunk.forwards
        return chunk

    def _branched(self) -> DraftChunk:
        """A branched round, whole: the copy's run (its length chosen with the round, :meth:`branch_value`) and
        the network's greedy token beside its first token, both children of the pending token; one chain where
        the two agree. Both are deterministic given the text, so the tree verifier's point-mass rule keeps the
        target's distribution when sampling (:mod:`spec_core.verifiers.tree`)."""
        if self.behind or not self.started:
            self._catch_up()
        net = self.model.propose(1, GREEDY, None)
        copy = self.lookup.propose(self.branch_len, GREEDY, None)
        self.net_token = net.tokens[0]
        hidden = net.hidden[0]
        blank = [hidden.new_zeros(hidden.shape)] * len(copy.tokens)  # a copied token has no draft state
        if copy.tokens[0] == self.net_token:  # they agree: the copy's run alone
            chunk = replace(copy, hidden=blank, forwards=net.forwards, probs=None)
        else:
            chunk = DraftChunk(
                tokens=[*copy.tokens, *net.tokens],
                probs=None,  # deterministic candidates
                token_probs=[*copy.token_probs, *net.token_probs],
                hidden=[*blank, hidden],
                logits=[*copy.logits, *net.logits],
                forwards=net.forwards,
                parents=[*range(-1, len(copy.tokens) - 1), -1],
                source=COPY_SOURCE,
                estimates=[*(copy.estimates or []), self.branch_rescue],  # its chance to be the kept one
                sources=[COPY_SOURCE] * len(copy.tokens) + [net.source],
            )
        self.drafted = list(chunk.tokens)
        self.forwards = chunk.forwards
        return chunk

    def commit(self, accepted: int, next_token: int, verified: LMOutput, path: Sequence[int] | None = None) -> None:
        on_path = range(accepted) if path is None else path
        kept = [*(self.drafted[i] for i in on_path), next_token]
        if self.source == "both":
            self._commit_branched(kept, verified)
            return
        if self.source == "lookup":
            self.lookup.commit(accepted, next_token, verified, path)
        else:
            if self.drafted:
                self.model_record[0] += accepted + 1
                self.model_record[1] += float(self.profile.round_ms(len(self.drafted) + 1, self.forwards))
                self.first_record[0] += accepted > 0
                self.first_record[1] += 1
            self.lookup.learn(kept)
            self.lookup.end_round(kept)  # the index learns the network's text too
        if self.source == "model" and self.drafted:  # the network drafted this round: it commits now
            self.model.commit(accepted, next_token, verified, path)
        else:  # it takes this round in when it next drafts
            self.behind += kept
            self._keep(verified)
        self.source, self.drafted, self.forwards = None, [], 0

    def _commit_branched(self, kept: list[int], verified: LMOutput) -> None:
        """After a branched round: the copy learns how far the text bore it out, and the network commits its token
        (kept when the text's first token is it) with the target's token after it, or, where the copy's run was
        kept, the text's first token as the target's; the rest of the text waits for its next round, with the
        target's states of its positions (rows ``m + 1..`` of ``verified``, as :meth:`_keep` keeps them)."""
        self.lookup.learn(kept)
        self.lookup.end_round(kept)
        m = int(len(kept) > 1 and kept[0] == self.net_token)  # the network's token was kept
        self.first_record[0] += m
        self.first_record[1] += 1
        self.model.commit(m, kept[m], _rows(verified, 0, m + 1))
        if len(kept) > m + 1:
            self.behind += kept[m + 1 :]
            self._keep(_rows(verified, m + 1, len(kept)))
        self.source, self.drafted, self.forwards, self.net_token = None, [], 0, -1


def _rows(out: LMOutput, start: int, stop: int) -> LMOutput:
    """Rows ``start..stop−1`` of a verified output (its logits too, where the round kept them)."""
    cut = lambda x: x[start:stop] if x is not None else None  # noqa: E731
    return LMOutput(out.logits[start:stop], cut(out.hidden), cut(out.layer_hidden))


def position_work(model: torch.nn.Module) -> int:
    """Multiply-adds per position of a pass over many positions: every linear layer's inputs × outputs but an
    output head's (such a pass needs logits at its last position only)."""
    return sum(
        int(m.in_features) * int(m.out_features)
        for name, m in model.named_modules()
        if hasattr(m, "in_features") and hasattr(m, "out_features") and "head" not in name.rsplit(".", 1)[-1]
    )


def _vocab(pair: ModelPair) -> int:
    return int(pair.target.get_output_embeddings().weight.shape[0])


class LookupDraft:
    """``lookup`` or ``lookup:min=1,max=3,k=8`` — prompt lookup (n-gram) drafting; no draft network."""

    prefix: ClassVar[str] = "lookup"
    named: ClassVar[bool] = True
    drafts_trees: ClassVar[bool] = False
    own_length: ClassVar[bool] = False  # a draft-length policy sets its length (``cost`` unless one is named)
    reads_draft_states: ClassVar[bool] = False  # no draft network: no hidden state for a learned head to read
    about: ClassVar[str] = "copies what followed the same words earlier in the prompt or the text (prompt lookup)"
    examples: ClassVar[tuple[str, ...]] = ("lookup",)
    source: ClassVar[str] = COPY_SOURCE  # DraftChunk.source of its drafts
    source_name: ClassVar[str] = "copied"  # that source in a legend
    copies: ClassVar[bool] = True  # its drafts are copied from the text: q is a point mass, no draft pass
    source_note: ClassVar[str] = "copied: it followed the same words earlier in the prompt or the text (prompt lookup)"
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "lookup · hybrid",
            "prompt lookup copies what followed the text's last words earlier in the prompt or the answer "
            "(no draft model; copied tokens have a sky overline); hybrid copies where the copy promises more "
            "than the draft model, else lets the model draft.",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        return (
            "Draft: prompt lookup (Saxena 2023) copies what followed the text's last words earlier in the prompt or "
            "the answer; no draft model runs, and a copied token's q is certain."
        )

    @classmethod
    def parse(cls, arg: str | None) -> LookupParams:
        return LookupParams.parse(arg, cls.prefix)

    @classmethod
    def build(cls, params: LookupParams, pair: ModelPair) -> Drafter:
        return LookupDrafter(params, _vocab(pair), pair.device, special_ids(pair.tokenizer))


@dataclass(frozen=True)
class HybridParams:
    """``hybrid:min=1,max=3,k=8,branch=1``: the lookup's settings, and whether a round may branch (both sources
    verified side by side; ``branch=0``, the default: one source a round, which measured as fast on held-out
    Spec-Bench by total time and faster on the chat prompts, docs/LOG.md "2026-12-07")."""

    lookup: LookupParams = LookupParams()
    branch: bool = False

    @classmethod
    def parse(cls, arg: str | None) -> HybridParams:
        rest, branch = [], False
        for piece in (p.strip() for p in (arg or "").split(",")):
            key, _, value = piece.partition("=")
            if key.strip() != "branch":
                rest.append(piece)
            elif value.strip() in ("0", "1"):
                branch = value.strip() == "1"
            else:
                raise SpecScopeError(f"hybrid: branch is 0 (one source a round) or 1 (both at once), got {piece!r}")
        return cls(LookupParams.parse(",".join(rest), "hybrid"), branch)


class HybridDraft(LookupDraft):
    """``hybrid`` or ``hybrid:min=1,max=3,k=8,branch=1`` — prompt lookup where it matches well, else the pair's
    draft; with ``branch=1`` also both side by side in one pass (the lookup's settings; a round's states may be a
    copy's, which has none). Branching needs the tree verifier and the hybrid's own lengths: with another verifier
    or a named length policy, a round has one source (:func:`~spec_core.engine.methods.parse_method` says so)."""

    prefix: ClassVar[str] = "hybrid"
    reads_costs: ClassVar[bool] = True  # its network's start is priced with the run's cost profile (data)
    about: ClassVar[str] = "prompt lookup where it matches, else the draft model (branch=1: or both in one pass)"
    examples: ClassVar[tuple[str, ...]] = ("hybrid", "hybrid:branch=1")

    @classmethod
    def rule(cls, temperature: float) -> str:
        return (
            "Draft: each round copies from the text (prompt lookup) where the copy promises more tokens than the "
            "draft model, else the draft model drafts (SAM-Decoding's idea, arXiv 2411.10666); with branch=1, where "
            "neither is sure, the copy and the model's own next token go side by side in one pass, and the target "
            "keeps whichever it agrees with."
        )

    @classmethod
    def parse(cls, arg: str | None) -> HybridParams:  # type: ignore[override]
        return HybridParams.parse(arg)

    @classmethod
    def build(cls, params: HybridParams, pair: ModelPair, costs: CostProfile | None = None) -> Drafter:  # type: ignore[override]
        model = PairDraft.build(None, pair)
        if not hasattr(model, "follow"):
            raise SpecScopeError(f"hybrid needs a chain draft that can follow copied tokens; {pair.name!r} has none")
        if costs is None:
            raise SpecScopeError("hybrid prices its network's start with the run's cost profile; none was given")
        following = cast(FollowingDrafter, model)  # it has follow (checked above)
        assert pair.draft is not None  # PairDraft.build checked it
        share = position_work(pair.draft) / max(position_work(pair.target), 1)
        lookup = LookupDrafter(params.lookup, _vocab(pair), pair.device, special_ids(pair.tokenizer))
        return HybridDrafter(lookup, following, costs, share, params.branch)
