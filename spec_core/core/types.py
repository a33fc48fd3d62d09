"""Frozen records that flow out of the engine: sampling settings, one event per round, the final result.

Vocabulary (see ``docs/STYLE.md §1``): the *target* verifies what the *draft* proposes. A round drafts
``draft_len`` tokens (``draft_tokens``); the verifier keeps the first ``accepted`` of them and then adds one
token of the target's own: the *recovered* token (resampled at the first rejection) or, when every draft
passed, the *bonus* token. Plain decoding is a round with no draft whose one token is of kind ``"target"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import torch

from spec_core.core.errors import SpecScopeError

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

NextKind = Literal["recovered", "bonus", "target"]
MAX_TEMPERATURE = 100.0  # above it a softmax is flat to float precision: a typo, refused rather than run


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are chosen, for both models (docs/ALGORITHMS.md §0: the same warping applies to p and q)."""

    temperature: float = 0.0  # 0 = greedy (argmax); > 0 = softmax(logits / temperature)
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens whose mass reaches top_p (1 = off)
    top_k: int = 0  # keep the k most likely tokens (0 = off)
    seed: int = 0  # seeds the one torch.Generator that every random draw of a run uses

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self) -> SamplingConfig:
        """Raise :class:`SpecScopeError` with a readable message for settings that make no sense."""
        if not isinstance(self.temperature, (int, float)) or math.isnan(self.temperature):
            raise SpecScopeError(f"temperature must be a number, got {self.temperature!r}")
        if self.temperature < 0:
            raise SpecScopeError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.temperature > MAX_TEMPERATURE:
            raise SpecScopeError(f"temperature {self.temperature} is absurd; use a value in [0, {MAX_TEMPERATURE:g}]")
        if not 0.0 < self.top_p <= 1.0:
            raise SpecScopeError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise SpecScopeError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        return self


@dataclass(frozen=True)
class PartSpec:
    """One validated part of a method name, e.g. the ``fixed:4`` of ``fixed:4+lossless``."""

    text: str  # as written, e.g. "pacer:b=2,t=0.5"
    family: str  # the registry key, e.g. "pacer"
    params: Any = None  # what the family's ``parse`` returned (frozen: ints, floats, frozen dataclasses)

    @classmethod
    def parse(cls, text: str, registry: Mapping[str, type[Any]], what: str) -> PartSpec:
        """``"FAMILY[:ARG]"`` → a validated part, the family looked up in ``registry`` (``what`` names the kind of
        part in the error: "draft-length policy", "verifier"). Nothing is loaded."""
        head, _, arg = text.partition(":")
        if head not in registry:
            raise SpecScopeError(f"unknown {what} {head!r}; known: {sorted(registry)}")
        return cls(text, head, registry[head].parse(arg or None))

    @property
    def arg(self) -> str:
        """What follows ``FAMILY:`` in the text as written (``"0.7"`` of ``static:0.7``; ``""`` when nothing does)."""
        return self.text[len(self.family) + 1 :]

    def build(self, registry: Mapping[str, type[Any]], pair: ModelPair | None = None, costs: Any = None):
        """The family's fresh part for one generation, built with the loaded pair (where trained weights live).
        A family that prices its choices (``reads_costs``) gets the run's cost profile as data: it never looks
        one up, nor times anything (spec_core/core/cost_tables.py)."""
        family = registry[self.family]
        if getattr(family, "reads_costs", False):
            return family.build(self.params, pair, costs=costs)
        return family.build(self.params, pair)


@dataclass(frozen=True)
class RoundInputs:
    """What one round produced, handed to the verifier and (after verification) to the draft-length policy.

    Shapes: γ drafted tokens, V the vocabulary, H_d / H_t the draft's / target's hidden size. Tensors live on
    the pair's device. ``draft_probs`` is filled lazily: greedy verification never needs the full softmax.
    """

    draft_tokens: torch.Tensor  # [γ] long: x_1..x_γ
    draft_logit_rows: tuple[torch.Tensor, ...]  # γ × [V] float32: the draft's raw logits at each drafted position
    sampled_probs: torch.Tensor | None  # [γ, V] the warped q each token was drawn from (None at temperature 0)
    draft_hidden: torch.Tensor  # [γ, H_d]: the draft's last hidden state at each drafted position
    target_logits: torch.Tensor  # [γ + 1, V] float32: the target over [pending, x_1..x_γ]
    target_hidden: torch.Tensor | None = None  # [γ + 1, H_t] last hidden states, when the verifier asks
    draft_parents: torch.Tensor | None = None  # [γ] long, a draft that branches (a token tree): the draft each
    #   x_i follows (−1: the pending token), parents before children, siblings most valuable first; each x_i was
    #   a deterministic candidate (the draft's top-k), not a sample. None: a chain, x_i follows x_{i−1}

    @property
    def gamma(self) -> int:
        return int(self.draft_tokens.shape[0])

    @cached_property
    def parent_rows(self) -> torch.Tensor | slice:
        """The row of ``target_logits`` holding the distribution each x_i was verified against: row i for a
        chain (a slice), ``parents + 1`` for a branching draft (row 0 is the pending token's)."""
        if self.draft_parents is None:
            return slice(0, self.gamma)
        return self.draft_parents + 1

    @cached_property
    def draft_logits(self) -> torch.Tensor:
        """[γ, V] the draft's raw logits, stacked on first use (a greedy lossless round never reads them)."""
        return torch.stack(tuple(self.draft_logit_rows))

    @cached_property
    def draft_probs(self) -> torch.Tensor:
        """[γ, V] q: the warped distribution tokens were drawn from; at temperature 0 the draft's own softmax
        (temperature 1), so that an ensemble ν = w·p + (1 − w)·q can be formed in greedy mode too."""
        if self.sampled_probs is not None:
            return self.sampled_probs
        return torch.softmax(self.draft_logits.float(), dim=-1)

    @cached_property
    def target_argmax(self) -> torch.Tensor:
        """[γ + 1] the target's greedy choice at each verified position (first index on ties)."""
        return self.target_logits.argmax(dim=-1)

    @cached_property
    def target_logsumexp(self) -> torch.Tensor:
        """[γ + 1] log Σ_v exp(target logit): the temperature-1 softmax of any token is one gather away. Only
        display numbers read it: a greedy lossless round that shows nothing never pays for it."""
        return torch.logsumexp(self.target_logits, dim=-1)

    def target_prob_at(self, rows: torch.Tensor | slice, tokens: torch.Tensor) -> torch.Tensor:
        """softmax(target logits)[rows, tokens] at temperature 1, without forming the distribution."""
        logits = self.target_logits[rows]
        return (logits.gather(-1, tokens.view(-1, 1))[:, 0] - self.target_logsumexp[rows]).exp()


@dataclass(frozen=True)
class TreeRound:
    """A round whose draft branched (a token tree, EAGLE-2, arXiv 2406.16858): every node, the walk down it and,
    when the round is shown, each node's numbers. Nodes are in breadth-first order (a parent before its children).

    The event's own per-token fields read the tree as a chain: the accepted path, then the first child rejected
    at its end.
    """

    tokens: tuple[int, ...]  # [N] each node's token
    parents: tuple[int, ...]  # [N] each node's parent node, −1 for a child of the root (the pending token)
    depths: tuple[int, ...]  # [N] 1 for a child of the root
    path: tuple[int, ...]  # the accepted nodes, the root's child first
    tried: tuple[tuple[int, float], ...]  # (node, its acceptance probability) for every child tried, in order
    pieces: tuple[str, ...] = ()  # [N] each node's text (only when the round is shown)
    draft_probs: tuple[float, ...] = ()  # [N] q of the node's token given its parent, temperature 1 (shown only)
    target_probs: tuple[float, ...] = ()  # [N] p of the node's token at its parent (shown only)

    @property
    def size(self) -> int:
        """N, the nodes the target verified (with the pending token, N + 1 positions in one forward)."""
        return len(self.tokens)

    @property
    def depth(self) -> int:
        """D, the deepest level: one batched draft forward per level."""
        return max(self.depths, default=0)

    @classmethod
    def from_record(cls, record: Any) -> TreeRound | None:
        """Rebuild from a JSON line's object (``dataclasses.asdict`` of one); None for an empty or missing one."""
        if not record:
            return None
        values = {
            f: tuple(record.get(f) or ())
            for f in ("tokens", "parents", "depths", "path", "pieces", "draft_probs", "target_probs")
        }
        return cls(**values, tried=tuple((int(n), float(a)) for n, a in record.get("tried") or ()))


TOP_K_AT_REJECTION = 5  # tokens of each model's distribution kept at a round's rejected draft


@dataclass(frozen=True)
class Rejection:
    """Both models at a round's rejected draft: the target's and the draft's most likely tokens there.

    Read from the round's own logits (no extra forward), at temperature 1 like ``gold_draft_probs``: the
    target's row that verified the rejected draft and the draft's row it was drawn from. Kept only at the one
    rejected position of a round, so that an event stays small. The *target's token* is its top-1 (the
    recovered token at temperature 0).
    """

    position: int  # the rejected draft's index in draft_tokens (= the event's accepted)
    target_ids: tuple[int, ...]  # the target's top-k tokens, most likely first
    target_pieces: tuple[str, ...]
    target_probs: tuple[float, ...]  # p of each, temperature-1 softmax
    draft_ids: tuple[int, ...]  # the draft's top-k tokens (those with q > 0: a copied draft has one)
    draft_pieces: tuple[str, ...]
    draft_probs: tuple[float, ...]  # q of each, temperature-1 softmax
    draft_prob_of_target: float  # q(the target's token): gold_draft_probs[position], read from the draft's row

    @classmethod
    def from_record(cls, record: Any) -> Rejection | None:
        """Rebuild from a JSON line's object (``dataclasses.asdict`` of one); None for a missing one. Raises
        :class:`SpecScopeError` for one of the wrong shape."""
        if not record:
            return None
        if not isinstance(record, dict):
            raise SpecScopeError(f"rejection should be an object, got {record!r:.40}")
        try:
            lists = {f: tuple(record[f]) for f in _REJECTION_LISTS}
            rejection = cls(
                int(record["position"]), **lists, draft_prob_of_target=float(record["draft_prob_of_target"])
            )
        except (KeyError, TypeError, ValueError) as err:
            raise SpecScopeError(f"rejection is not a SpecScope rejection record ({err!r:.60})") from err
        ids = (*rejection.target_ids, *rejection.draft_ids)
        probs = (*rejection.target_probs, *rejection.draft_probs)
        pieces = (*rejection.target_pieces, *rejection.draft_pieces)
        widths = {len(lists[f]) for f in _REJECTION_LISTS[:3]}, {len(lists[f]) for f in _REJECTION_LISTS[3:]}
        if (
            not all(isinstance(t, int) for t in ids)
            or not all(isinstance(v, (int, float)) for v in probs)
            or not all(isinstance(v, str) for v in pieces)
            or len(widths[0]) != 1
            or len(widths[1]) != 1
            or not rejection.target_ids
        ):
            raise SpecScopeError("rejection: its token ids, pieces and probabilities do not line up")
        return rejection


_REJECTION_LISTS = ("target_ids", "target_pieces", "target_probs", "draft_ids", "draft_pieces", "draft_probs")


def written_drafts(event: Any) -> int:
    """The drafts of a round (a :class:`RoundEvent`, or a record with ``accepted`` and ``emitted``) that the
    verifier kept and the text took: min(accepted, emitted)."""
    return min(event.accepted, len(event.emitted))


@dataclass(frozen=True)
class RoundEvent:
    """One speculative round (or one plain decoding step), as the UI and the benchmark see it.

    Per-drafted-token tuples all have length ``draft_len``. Probabilities of drafted tokens are read from the
    distributions the rule used; at temperature 0 (where those are one-hot) they are the models' own softmax
    at temperature 1, so that a hover still shows how confident each model was.
    """

    index: int  # round number in this generation, from 0
    method: str  # the method string that produced it, e.g. "fixed:4" or "pacer+diversed"
    context_len: int  # tokens (prompt + generated) before this round
    draft_tokens: tuple[int, ...]  # x_1..x_γ
    draft_pieces: tuple[str, ...]  # their text, one piece per token
    draft_probs: tuple[float, ...]  # q_i(x_i)
    target_probs: tuple[float, ...]  # p_i(x_i)
    accept_probs: tuple[float, ...]  # probability with which the verifier accepted x_i (given the prefix)
    gold_draft_probs: tuple[float, ...]  # q_i(argmax p_i): the draft's probability of the target's own choice
    #   at each drafted position (D-PACE's q_j, arXiv 2605.18810), temperature-1 softmax
    accepted: int  # how many leading drafts were kept
    next_token: int  # recovered, bonus, or (plain decoding) the target's token
    next_piece: str
    next_kind: NextKind
    emitted: tuple[int, ...]  # tokens actually appended this round (accepted + next, cut at EOS / limit)
    draft_s: float  # wall seconds spent drafting (policy included)
    verify_s: float  # wall seconds of the target pass and the rule
    stop_reason: str = ""  # why the draft-length policy stopped ("max", "threshold", "confidence", ...)
    policy_trace: dict[str, Any] = field(default_factory=dict)  # policy internals (PACER scores, thresholds)
    verifier_trace: dict[str, Any] = field(default_factory=dict)  # verifier internals (DIVERSED w_t, ...)
    finished: bool = False  # the generation ended with this round (EOS or max_new_tokens)
    next_prob: float | None = None  # the target's probability of next_token (temperature-1 softmax if greedy)
    target_s: float = 0.0  # wall seconds of the target forward alone (inside verify_s)
    engine_s: float = 0.0  # wall seconds that were neither a draft step nor the target forward (policy, rule,
    #   rollback, bookkeeping, this event): the engine's own work. The drafter's commit (its own work on the
    #   verified tokens, e.g. the feature draft's fusion of the target's features) counts as drafting.
    tree: TreeRound | None = None  # a round whose draft branched: the whole tree (None for a chain)
    draft_sources: tuple[str, ...] = ()  # per entry of draft_tokens: "model" (a draft network) or "lookup" (copied
    #   from the prompt or the text so far); () in an event read from an older file: every draft is "model"
    draft_copy_offers: tuple[tuple[int, float], ...] = ()  # per entry of draft_tokens, a copying draft's pointer
    #   (spec_core/drafters/copying.py): (the token it offered, the gate's g), (−1, 0.0) where it offered none; ()
    #   for a draft without a pointer and in an event read from an older file
    draft_forwards: int = -1  # the draft's forward passes this round: one per token for a chain drafted token by
    #   token, one for a block drafter's block, D for a tree of depth D (one batched pass per level), 0 for plain
    #   decoding. −1 (an event built by hand or read from an older file): one per drafted token, or the tree's D
    costs: dict[str, Any] | None = None  # round 0 only: the cost profile the run's choices were priced with
    #   (CostProfile's fields; spec_core/core/cost_tables.py), so a replay uses the same one; None elsewhere
    rejection: Rejection | None = None  # both models' top-k at the rejected draft (a round whose next token is
    #   recovered, shown only); None elsewhere and in an event read from an older file

    def __post_init__(self) -> None:
        if self.draft_forwards < 0:
            forwards = self.tree.depth if self.tree is not None else self.draft_len
            object.__setattr__(self, "draft_forwards", forwards)

    @property
    def draft_len(self) -> int:
        return len(self.draft_tokens)

    @property
    def kept_drafts(self) -> int:
        """The drafts the verifier kept that entered the text: a round the end token (or the length limit) cut
        short kept the rest for nothing, so they count neither as accepted nor as drafted (:meth:`Stats.from_events`)."""
        return written_drafts(self)

    @property
    def verify_width(self) -> int:
        """Positions in the round's one target forward: γ + 1 for a chain ([pending, x_1..x_γ]), 1 for plain
        decoding, N + 1 for a tree of N nodes. (Round 0 feeds one position fewer: the prompt's prefill already
        ran the pending token.)"""
        return (self.tree.size if self.tree is not None else self.draft_len) + 1


@dataclass(frozen=True)
class Stats:
    """Totals of one generation, or of one lane so far: the one stats record of the engine, the app and the API.

    τ = new tokens / target forward passes; α = accepted / drafted. Speed is timed on the run's own clock,
    ``busy_s`` = Σ (draft_s + verify_s) of its rounds, so that work done between rounds (a page update, another
    lane's round) never counts against it. ``new_tokens, tau, tokens_per_s`` (plus ``text``) are the API's and
    the CSV files' field names: keep them.
    """

    method: str  # the method string of the run ("" when unknown)
    new_tokens: int
    busy_s: float  # Σ (draft_s + verify_s) of the rounds: the models' and the engine's own time
    wall_s: float  # wall clock of the whole run (setup, prefill, consumers included); busy_s when not measured
    tokens_per_s: float  # new_tokens / busy_s (0 before the first timed round)
    target_forwards: int  # rounds: one target forward each
    drafted_tokens: int
    accepted_tokens: int
    tau: float
    acceptance_rate: float  # α; 0 when nothing was drafted
    finished: bool  # the last round ended the generation (EOS or max_new_tokens)
    copied_tokens: int = 0  # accepted drafts that a lookup copied from the text (the rest a draft network drafted)

    @classmethod
    def from_events(
        cls,
        events: Sequence[RoundEvent],
        new_tokens: int | None = None,
        wall_s: float | None = None,
        method: str = "",
    ) -> Stats:
        """Totals of ``events``; ``new_tokens`` defaults to the tokens they emitted, ``wall_s`` to ``busy_s``.
        Drafts the verifier kept after the end token (or past the length limit) were never written: they count
        neither as drafted nor as accepted, so α is about the text the reader sees."""
        new = sum(len(e.emitted) for e in events) if new_tokens is None else new_tokens
        busy = sum(e.draft_s + e.verify_s for e in events)
        kept = [written_drafts(e) for e in events]  # none past the end token or the limit
        accepted = sum(kept)
        drafted = sum(e.draft_len - (e.accepted - k) for e, k in zip(events, kept))
        forwards = len(events)
        return cls(
            method=method or (events[0].method if events else ""),
            new_tokens=new,
            busy_s=busy,
            wall_s=busy if wall_s is None else wall_s,
            tokens_per_s=new / busy if busy > 0 else 0.0,
            target_forwards=forwards,
            drafted_tokens=drafted,
            accepted_tokens=accepted,
            tau=new / forwards if forwards else 0.0,
            acceptance_rate=accepted / drafted if drafted else 0.0,
            finished=bool(events) and events[-1].finished,
            copied_tokens=sum(tuple(getattr(e, "draft_sources", ()))[:k].count("lookup") for e, k in zip(events, kept)),
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class GenerationResult:
    """What :func:`spec_core.engine.loop.generate` returns."""

    text: str  # the decoded new tokens
    token_ids: tuple[int, ...]  # the new tokens
    prompt_ids: tuple[int, ...]  # the prompt as fed to the target (chat template applied)
    events: tuple[RoundEvent, ...]
    stats: Stats
