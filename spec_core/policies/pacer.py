"""``pacer`` — adaptive draft length with a trained blockwise pre-verifier (docs/ALGORITHMS.md §1).

PACER (*Blockwise Pre-verification for Speculative Decoding with Adaptive Length*, arXiv 2602.01274):

1. the draft drafts in blocks of ``b`` tokens;
2. after each block the pre-verifier M_B (:mod:`spec_core.heads.preverifier`) estimates each block token's
   acceptance â_i from the block's draft hidden states, drafted tokens and positions in the draft (the paper
   head; ``head=hybrid`` also reads the draft's log q);
3. if mean(â over the block) < t_k the draft stops and goes to the target ("threshold"); otherwise
   t_{k+1} = ρ · t_k (the test grows stricter as the draft grows) and the next block is drafted;
4. the draft also stops at ``max`` tokens and at the round's budget.

Method names: ``pacer`` and ``pacer:b=2,t=0.5,rho=1.1,max=16`` (any subset; without ``t`` — or with ``t=auto`` — the
threshold is tuned for this machine's costs when the method is built, :mod:`spec_core.policies.pacer_tuning`; ``head=hybrid`` picks SpecScope's
first head, which reads the draft's probabilities, ``head=nopos`` that head without position embedding). The defaults below were tuned by replaying the stop rule on rounds recorded on *training* prompts with the
measured forward costs (``python -m spec_core analyze policies``; docs/PACER.md), never on the benchmark.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.core.types import RoundInputs
from spec_core.heads.preverifier import find_head, load_head
from spec_core.policies.base import DraftSoFar
from spec_core.policies.pacer_rule import PacerParams, parse_params, replay_length
from spec_core.policies.pacer_tuning import machine_threshold

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

HEAD_KEY = "head:pacer"  # pair.extras key prefix of the loaded pre-verifiers


@dataclass
class _Block:
    start: int  # index of the block's first token in the draft
    predicted: list[float]  # â per token of the block
    mean: float
    threshold: float  # the threshold in force for this block
    decision: str  # "pass", "stop" (under threshold), "max" or "budget" (capped: no decision needed)

    def as_dict(self) -> dict:
        return {
            "start": self.start,
            "predicted": self.predicted,
            "mean": self.mean,
            "threshold": self.threshold,
            "decision": self.decision,
        }


class PacerLength:
    """Draft in blocks of ``b``; stop when the block's mean predicted acceptance is under a growing threshold.

    ``head`` is the paper head (``cfg.design == "paper"``: ``predict(hidden [m, H_d], token_embeds [m, H_d] | None,
    positions [m]) -> [m]``, ``embed`` maps token ids to the draft's input embeddings), or anything with
    ``predict(hidden [m, H_d], positions [m], prob_features [m, 2] | None) -> [m]`` and a ``cfg.use_token_prob``
    flag (the hybrid :class:`~spec_core.heads.preverifier.PreVerifier`, or a stub in tests).
    """

    prefix: ClassVar[str] = "pacer"
    reads_draft_states: ClassVar[bool] = True  # its pre-verifier reads the draft's hidden states
    about: ClassVar[str] = "adaptive length from a trained pre-verifier (PACER)"
    reads_costs: ClassVar[bool] = True  # t=auto is tuned under the run's cost profile (data handed to the run)
    examples: ClassVar[tuple[str, ...]] = ("pacer",)
    glossary: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "pacer",
            "PACER: the draft drafts a block at a time; a small trained pre-verifier predicts how likely each "
            "drafted token is to be kept, and drafting stops when the block's mean falls under a threshold "
            "that grows by ρ after every block that passes.",
        ),
    )

    @classmethod
    def rule(cls, temperature: float) -> str:
        """The step-through's "Rule in force" (PACER, arXiv 2602.01274)."""
        return (
            "Draft length: PACER (arXiv 2602.01274) drafts b tokens at a time; after each block a small trained "
            "pre-verifier guesses how likely each new token is to be accepted. If the block's average guess is "
            "under the threshold t, drafting stops and the target checks the draft; if not, the threshold is "
            "multiplied by ρ (a longer draft must be more convincing) and the next block is drafted, up to a "
            "maximum length. `pacer` judges one token at a time (b = 1): on this pair that measured faster than "
            "blocks of 2 or 4, since fewer than half of first drafts are kept and a block of 2 must draft a second "
            "token before it can judge the first."
        )

    def __init__(
        self, params: PacerParams, head, head_name: str = "", embed=None, threshold_note: str = "", precision: str = ""
    ):
        self.params, self.head, self.head_name, self.embed = params, head, head_name, embed
        self.precision = precision  # the pair's arithmetic: which cost table the head comparison prices with
        self.threshold_note = threshold_note or f"t = {params.threshold:g}, as given"
        self.name, self.stop_reason = params.describe(), ""
        cfg = getattr(head, "cfg", None)
        self.paper = getattr(cfg, "design", "") == "paper"  # reads hidden states, tokens and positions only
        self.reads_tokens = self.paper and bool(getattr(cfg, "use_token", False))
        if self.reads_tokens and embed is None:
            raise SpecScopeError("pacer: this pre-verifier reads the drafted tokens' embeddings; pass embed")
        self.reads_probs = not self.paper and bool(getattr(cfg, "use_token_prob", False))
        # the paper head's one-token path (BlockPreVerifier.predict_one): its shipped design, a real embedding
        self.single = (
            self.reads_tokens
            and hasattr(head, "predict_one")
            and getattr(cfg, "use_position", False)
            and not getattr(cfg, "use_draft_logit", False)
            and isinstance(getattr(embed, "weight", None), torch.Tensor)
        )
        self.blocks: list[_Block] = []
        self.threshold = params.threshold
        self.head_s = 0.0  # seconds spent in the pre-verifier this round
        self.scored = 0  # drafted tokens already scored this round

    @classmethod
    def parse(cls, arg: str | None) -> PacerParams:
        return parse_params(arg)

    @classmethod
    def build(cls, params: PacerParams, pair: ModelPair | None = None, costs: CostProfile | None = None) -> PacerLength:
        if pair is None:
            raise SpecScopeError("pacer needs the loaded pair: its pre-verifier is matched to the pair's draft")

        def load():
            name = find_head(pair.draft_card, params.head)
            return load_head(name)[0].to(pair.device), name

        head, name = pair.learned(HEAD_KEY, params.head, load)
        note = ""
        if params.auto_t:  # the threshold this machine's costs favour (policies/pacer_tuning.py)
            t, note = machine_threshold(pair, params, name, costs)
            params = dataclasses.replace(params, threshold=t)
        embed = pair.target.get_input_embeddings()
        return cls(params, head, name, embed=embed, threshold_note=note, precision=getattr(pair, "precision", ""))

    # -- the stop rule -------------------------------------------------------------------------------------

    def _score(self, so_far: DraftSoFar, start: int, end: int) -> list[float]:
        """â for drafted tokens start..end−1 (the block just drafted)."""
        t0 = time.perf_counter()
        if self.single and end - start == 1:  # a block of one token (b = 1): the head's short path, same numbers
            embed = self.embed.weight[so_far.tokens[start]]  # [H_d]: the drafted token's row, no lookup op
            predicted = [self.head.predict_one(so_far.hidden[start], embed, start + 1)]
            self.head_s += time.perf_counter() - t0
            return predicted
        hidden = torch.stack(so_far.hidden[start:end])  # [m, H_d]
        positions = torch.arange(start + 1, end + 1, device=hidden.device)  # [m] 1-based
        if self.paper:  # the block's states, drafted tokens and positions; never the draft's probabilities
            embeds = None
            if self.reads_tokens:
                ids = torch.tensor(so_far.tokens[start:end], device=hidden.device)  # [m]
                with torch.inference_mode():
                    embeds = self.embed(ids)  # [m, H_d]
            predicted = self.head.predict(hidden, embeds, positions).float().tolist()
            self.head_s += time.perf_counter() - t0
            return predicted
        feats = None
        if self.reads_probs:  # running sum over the whole draft so far, sliced to the block
            probs = torch.tensor(so_far.token_probs[:end], device=hidden.device)  # [end]
            feats = type(self.head).prob_features(probs)[start:end]  # [m, 2]
        predicted = self.head.predict(hidden, positions, feats).float().tolist()
        self.head_s += time.perf_counter() - t0
        return predicted

    def next_chunk(self, so_far: DraftSoFar) -> int:
        n, p = len(so_far.tokens), self.params
        if n == 0:  # a new round
            self.blocks, self.threshold, self.head_s, self.scored = [], p.threshold, 0.0, 0
        cap = min(p.max_len, so_far.budget)
        if n > self.scored:  # a block was just drafted: pre-verify it
            predicted = self._score(so_far, self.scored, n)
            mean = sum(predicted) / len(predicted)
            if n >= cap:
                decision = "max" if n >= p.max_len else "budget"
            else:
                decision = "stop" if mean < self.threshold else "pass"
            self.blocks.append(_Block(self.scored, predicted, mean, self.threshold, decision))
            self.scored = n
            if decision == "stop":
                self.stop_reason = "threshold"
                return 0
            self.threshold *= p.rho
        if n >= cap:
            self.stop_reason = "max" if n >= p.max_len else "budget"
            return 0
        return min(p.block, cap - n)

    def end_round(self, inputs: RoundInputs, accepted: int) -> None:
        pass

    def trace(self) -> dict:
        """Per block: predicted acceptances, their mean, the threshold in force, the decision; plus per drafted
        token ``predicted`` (flat) and the pre-verifier's time this round."""
        return {
            "blocks": [b.as_dict() for b in self.blocks],
            "predicted": [x for b in self.blocks for x in b.predicted],
            "block": self.params.block,
            "threshold0": self.params.threshold,
            "threshold_note": self.threshold_note,
            "rho": self.params.rho,
            "max": self.params.max_len,
            "head": self.head_name,
            "head_ms": self.head_s * 1000,
            "precision": self.precision,
        }


__all__ = ["PacerLength", "PacerParams", "parse_params", "replay_length"]
