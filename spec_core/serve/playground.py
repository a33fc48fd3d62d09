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
target will keep (``L = match[pos]``). Time comes from :class:`~spec_core.analysis.policies.CostProfile`: a round
costs ``L`` draft steps, one target forward over ``L + 1`` tokens, the engine's own work and (PACER) one
pre-verifier call per block; ``ar`` one one-token forward and the engine's work per token.

In float32 the replay gives the engine's rounds exactly (``tests/engine/test_playground.py``). In bfloat16 a k-token
pass rounds differently from a one-token step, so a real run can part from the recorded text at a near-tie
and the replay is an estimate from then on (docs/LOG.md says how close it came). Drafts past an EOS are not
recorded (the record stops at EOS), so a round that drafts through the EOS may count fewer kept drafts than the
engine, which verifies them against the target's tokens after EOS; the text, rounds and τ are unaffected.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from transformers import DynamicCache

from spec_core.core import rules
from spec_core.core.cost_model import CostProfile
from spec_core.core.errors import SpecScopeError
from spec_core.core.lane_speed import draft_ratio, lane_quotes
from spec_core.drafters.copying import Pointer, pointer_evidence
from spec_core.drafters.feature import FeatureDrafter
from spec_core.drafters.lookup import special_ids
from spec_core.drafters.tree import attention_mask
from spec_core.engine.loop import generate
from spec_core.engine.methods import parse_method
from spec_core.engine.replay import (  # noqa: F401  (the replay's names, re-exported for the analysis tools)
    DEFAULT_COSTS,
    DEFAULT_MAX_LEN,
    FIXED_WINDOWS,
    ORACLE,
    PolicyReplay,
    TextRecord,
    best_fixed,
    costs_from_events,
    load_record,
    match_lengths,
    pacer_grid,
    paper_key,
    policy_name,
    replay_all,
    replay_policy,
    save_record,
    standard_policies,
)
from spec_core.model.cached_lm import CachedLM
from spec_core.model.prompting import prompt_ids
from spec_core.policies.pacer import PacerLength, PacerParams
from spec_core.serve.records import records_from_file

if TYPE_CHECKING:
    from spec_core.model.draft_networks import FeatureDraft
    from spec_core.model.models import ModelPair

# -- recording ----------------------------------------------------------------------------------------------------


def _mask(prefix: torch.Tensor, cached: int, own: list[int], n: int, model, device) -> torch.Tensor:
    """``[1, 1, n, cached + n]``: row i sees the cached text positions ``< prefix[i]``, its own earlier drafts
    (cache columns ``c + i`` for ``c`` in ``own``) and itself."""

    rows = torch.arange(n)
    visible = torch.arange(cached + n)[None, :] < prefix[:, None]  # [n, cached + n]
    for start in own:
        visible[rows, start + rows] = True
    visible[rows, cached + rows] = True
    return attention_mask(visible, 0, model, device)


def _pick(logits: torch.Tensor, hidden: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy tokens ``[n]`` and the draft's temperature-1 probability of each, as the drafters' ``draw``."""
    logits = logits.float()
    tokens = logits.argmax(-1)
    return tokens, torch.softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]


class _CopyingPick:
    """:func:`_pick` for a feature draft with a copy gate (docs/ALGORITHMS.md §6), as its drafter proposes: over the
    trimmed head widened by the text's own words (those each row's prefix holds), with q moved onto the pointer's
    copy by the gate. Row i's text is its prefix ``seq[:starts[i]]`` and its drafts so far, which the pointer's
    index holds while that row is read (one index, moved from row to row: rows are consecutive prefixes)."""

    def __init__(self, draft: FeatureDraft, seq: list[int], starts: torch.Tensor, banned: frozenset[int]):
        self.draft, self.seq, self.starts = draft, seq, [int(x) for x in starts]
        self.pointer = Pointer(banned)
        self.pointer.reset(seq[: self.starts[0]])
        device = next(draft.parameters()).device
        self.in_head = torch.zeros(draft.vocab_size, dtype=torch.bool, device=device)
        self.in_head[draft.vocab_subset.to(device) if draft.vocab_subset.numel() else slice(None)] = True
        text = torch.tensor(seq, device=device)
        off = text[~self.in_head[text] & ~torch.isin(text, torch.tensor(sorted(banned), dtype=torch.long))]
        ids = torch.unique(off) if off.numel() else off
        first = torch.tensor([seq.index(int(t)) for t in ids], dtype=torch.long)  # where each first appears
        self.extra = (ids, draft.rows_of(ids)) if ids.numel() else None
        self.unseen = (first[None, :] >= torch.tensor(self.starts)[:, None]).to(device)  # [n, E] not in row i's prefix
        self.drafted: list[list[int]] = [[] for _ in self.starts]

    def __call__(self, logits: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate, pointer = self.draft.copy_gate, self.pointer
        assert gate is not None  # made for a gated draft only
        with torch.inference_mode():
            full = self.draft.logits(hidden, self.extra).float()  # [n, V]
            if self.extra is not None:
                full[:, self.extra[0]] = full[:, self.extra[0]].masked_fill(self.unseen, float("-inf"))
            tokens, chosen = [], []
            for i, start in enumerate(self.starts):
                pointer.extend(self.drafted[i])  # the pointer's text: row i's prefix and its drafts so far
                found = pointer.candidate()
                pointer.truncate(start)
                logp = torch.log_softmax(full[i], -1)  # as the drafter: one row at a time
                row = logp.exp()
                if found is not None:
                    evidence = pointer_evidence(logp, found, self.in_head).to(hidden.device)
                    row = rules.copy_mix(row, found[0], float(gate(hidden[i].float(), evidence)))
                token = int(row.argmax())
                tokens.append(token)
                chosen.append(float(row[token]))
                self.drafted[i].append(token)
                if i + 1 < len(self.starts):
                    pointer.extend(self.seq[start : self.starts[i + 1]])  # on to the next row's prefix
            pointer.truncate(self.starts[0])
        return torch.tensor(tokens, device=hidden.device), torch.tensor(chosen)


@torch.inference_mode()
def _draft_rows(pair: ModelPair, seq: list[int], p: int, n: int, m: int):
    """Drafts ``[n, m]``, their probabilities ``[n, m]`` and the draft's hidden states ``[n, m, H]`` from each of
    the ``n`` prefixes ``seq[:p + i]``: depth 1 from one forward over the text, then one forward per depth."""

    device, text = pair.device, torch.tensor(seq[:-1])
    start = torch.arange(n) + p  # prefix length of each row
    assert pair.draft is not None  # a pair with a draft (the record's drafts come from it)
    mask_model: torch.nn.Module  # the model whose attention implementation the tree masks are made for
    if pair.draft_design == "feature":
        draft = cast("FeatureDraft", pair.draft)  # the feature design
        lm = CachedLM(pair.target, layers=FeatureDrafter(draft).target_layers, hidden=True)
        out = lm.forward(text, all_logits=False)
        assert out.hidden is not None  # hidden=True
        layers = out.layer_hidden
        feats = draft.target_features(out.hidden, layers).to(next(draft.parameters()).dtype)  # [T-1, H]

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
        assert out.hidden is not None  # CachedLM keeps hidden states
        hidden, logits = out.hidden[start - 1], out.logits[start - 1]
        cached, mask_model = text.shape[0], pair.draft

        def step(tokens, prev_hidden, depth, mask):
            o = lm.forward(tokens, positions=start + depth - 2, mask=mask)
            return o.logits, o.hidden

    pick: Callable[..., tuple[torch.Tensor, torch.Tensor]] = _pick
    if pair.draft_design == "feature" and getattr(pair.draft, "copy_gate", None) is not None:
        pick = _CopyingPick(cast("FeatureDraft", pair.draft), seq, start, frozenset(special_ids(pair.tokenizer)))
    tok, prob = pick(logits, hidden)
    all_tok, all_prob, all_hidden = [tok], [prob], [hidden]
    visible_prefix = start - (1 if pair.draft_design == "feature" else 0)  # cached text each row may see
    for depth in range(2, m + 1):
        own = [cached + k * n for k in range(depth - 2)]
        mask = _mask(visible_prefix, cached + (depth - 2) * n, own, n, mask_model, device)
        logits, hidden = step(tok.to(device), hidden, depth, mask)
        tok, prob = pick(logits, hidden)
        all_tok.append(tok)
        all_prob.append(prob)
        all_hidden.append(hidden)
    return torch.stack(all_tok, 1).cpu(), torch.stack(all_prob, 1).cpu(), torch.stack(all_hidden, 1)


def _heads(pair: ModelPair, variants: Sequence[str]) -> dict[str, Any]:
    """The pre-verifiers PACER would use on this pair (built the engine's way, cached in ``pair.extras``)."""

    heads = {}
    for variant in variants:
        try:
            heads[variant] = PacerLength.build(PacerParams(head=variant), pair).head
        except (SpecScopeError, FileNotFoundError):
            pass  # no head for this draft: the record has no PACER scores (PACER replays then say so)
    return heads


@torch.inference_mode()
def record_text(
    pair: ModelPair,
    prompt: str,
    max_new_tokens: int = 96,
    max_len: int = DEFAULT_MAX_LEN,
    tokens: Sequence[int] | None = None,
    heads: Sequence[str] = ("",),
    costs: CostProfile | None = None,
    chat: bool = True,
    method: str = "ar",
) -> TextRecord:
    """One recorded pass over ``prompt``'s greedy answer (``tokens``, or the engine's ``method`` run now).

    Records drafts for every position, the draft's probabilities, the pre-verifier's â (each head variant in
    ``heads`` that matches the pair's draft) and what the greedy verifier keeps. ``meta["record_s"]`` is the
    recording's time (the answer's generation apart, in ``meta["text_s"]``).
    """

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

    meta = {
        "pair": pair.name,
        "dtype": getattr(pair, "precision", "") or str(pair.dtype).replace("torch.", ""),
        "draft": pair.draft_design,
        "record_s": t2 - t1,
        "text_s": t1 - t0,
        "pieces": list(pair.pieces(tokens)),
        "draft_ratio": draft_ratio(pair) or 0.05,
        "special_ids": sorted(special_ids(pair.tokenizer)),  # what a lookup copy never proposes (its replay too)
    }
    return TextRecord(
        prompt,
        tuple(ids),
        tokens,
        max_new_tokens,
        drafts_np,
        probs.float().numpy(),
        match_lengths(drafts_np, tokens),
        predicted,
        costs,
        meta,
    )


# -- replay -------------------------------------------------------------------------------------------------------


def greedy_lane(lanes, temperature: float) -> tuple[str, tuple[int, ...]]:
    """(method, tokens) of the run's greedy text: ``ar``'s if it ran, else the first lossless lane's."""

    if temperature != 0:
        raise SpecScopeError("the playground replays greedy decoding: generate at temperature 0 first")
    for method in sorted(lanes, key=lambda m: m != "ar"):
        spec = parse_method(method)
        if lanes[method] and (spec.kind == "ar" or (spec.verifier and spec.verifier.family == "lossless")):
            return method, tuple(t for e in lanes[method] for t in e.emitted)
    raise SpecScopeError("no greedy lossless text in this run (add an ar lane, or a lossless method)")


def record_lanes(
    pair: ModelPair, prompt: str, lanes, temperature: float, max_new_tokens: int, max_len: int = DEFAULT_MAX_LEN
) -> TextRecord:
    """Record a finished run's greedy text (the live tab's last frame), with the costs its rounds measured."""

    if not lanes:
        raise SpecScopeError("nothing to record yet: generate on the Live tab (temperature 0), then record")
    method, tokens = greedy_lane(lanes, temperature)
    first = lanes[method][0]
    if first.context_len and first.context_len != len(prompt_ids(pair, prompt)):
        raise SpecScopeError("the prompt box changed since that run: generate again, then record")
    costs = costs_from_events(lanes)
    record = record_text(pair, prompt, max(max_new_tokens, len(tokens)), max_len, tokens=tokens, costs=costs)
    return dataclasses.replace(
        record,
        meta={
            **record.meta,
            "source": f"the live run's {method} text",
            "costs": "measured in that run" if costs else "default",
            "live_quotes": live_quotes(lanes, prompt),
        },
    )


def live_quotes(lanes, prompt: str) -> dict[str, dict]:
    """The Live run's measured speedups (method → :class:`~spec_core.core.quotes.Quote` as a dict, for a record's meta and
    its JSON), which the Playground sets beside its replays of the same methods."""

    return {method: quote.to_dict() for method, quote in lane_quotes(lanes, text=prompt).items()}


def record_upload(path: str | Path, pair_for: Callable[[], ModelPair]) -> TextRecord:
    """A saved record (``.json``, no model call), or the first prompt of an events file (``.jsonl``, recorded
    with ``pair_for()``)."""
    if str(path).endswith(".json"):
        return load_record(path)

    rec = next(iter(records_from_file(path).values()), None)
    if rec is None:
        raise SpecScopeError("the events file holds no run")
    n = max(sum(len(e.emitted) for e in events) for events in rec.lanes.values())
    return record_lanes(pair_for(), rec.prompt, rec.lanes, rec.temperature, n)


def record_frame(pair_for: Callable[[str], ModelPair], frame, prompt: str, max_new_tokens) -> TextRecord:
    """Record the live tab's last run (a :class:`~spec_core.serve.live.LiveFrame`); ``pair_for(precision)`` gives the
    pair at the precision that run used."""
    if frame is None or not frame.done:
        raise SpecScopeError("nothing to record yet: generate on the Live tab (temperature 0) and let it finish")
    return record_lanes(pair_for(frame.precision), prompt, frame.lanes, frame.temperature, int(max_new_tokens))
