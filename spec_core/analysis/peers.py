"""Peers: transformers' own decoding on the same pair, for honest baselines in the same run.

- ``hf-ar`` — ``model.generate`` (greedy or sampling).
- ``hf-assisted:K`` — assisted generation (transformers' speculative decoding) with a constant window K.
- ``hf-assisted-heuristic`` — the same with its ``heuristic`` schedule.
- ``hf-lookup:K`` — its prompt lookup decoding (Saxena, 2023; the copy idea of LLMA, Yang et al., arXiv
  2304.04487): up to K tokens a round copied from the text so far (prompt and output) after the first earlier
  occurrence of its last 2 tokens (else its last token); no draft model.

transformers can only run a standalone draft (an ordinary causal LM), so a pair whose default draft is
feature-conditioned runs the peers with the shipped standalone draft (or the truncated fallback).
Target forward passes are counted with a forward hook (the prefill yields the first token, so it counts).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from spec_core.core.errors import SpecScopeError
from spec_core.engine.methods import spec_of

if TYPE_CHECKING:
    from spec_core.model.models import ModelPair

LOOKUP_NGRAM = 2  # hf-lookup matches the last 2 tokens (transformers' default is 2 too; said here, not inherited)


@dataclass(frozen=True)
class PeerResult:
    token_ids: tuple[int, ...]
    wall_s: float
    target_forwards: int


def _assistant(pair: ModelPair):
    if pair.draft_design in ("standalone", "truncated"):
        return pair.draft
    from spec_core.model.draft_assets import available_drafts, load_draft  # transformers' modeling code (~2 s)
    from spec_core.model.draft_networks import build_truncated  # only a peer on the embedded pair needs it

    def load():
        if "standalone" in available_drafts():
            return load_draft(pair.parts_target, "standalone")[0].to(pair.device)
        return build_truncated(pair.parts_target).to(pair.device)

    return pair.learned("hf-assistant", "", load)


@torch.inference_mode()
def run_peer(
    pair: ModelPair,
    method: str,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
) -> PeerResult:
    """Run one peer method; returns the new token ids, wall seconds and target forward passes."""
    spec = spec_of(method)
    if spec.kind != "peer":
        raise SpecScopeError(
            f"{method!r} is not a peer; use hf-ar, hf-assisted:K, hf-assisted-heuristic or hf-lookup:K"
        )
    head = spec.heads[0]
    kwargs: dict = {"max_new_tokens": max_new_tokens, "min_new_tokens": 0}
    if temperature > 0:
        kwargs |= {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k or None}
    else:
        kwargs |= {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    if head == "hf-assisted" or head == "hf-assisted-heuristic":
        draft = _assistant(pair)
        draft.generation_config.assistant_confidence_threshold = 0.0  # windows as named, no early stop
        draft.generation_config.num_assistant_tokens = spec.window or 5
        draft.generation_config.num_assistant_tokens_schedule = (
            "heuristic" if head == "hf-assisted-heuristic" else "constant"
        )
        kwargs["assistant_model"] = draft
    elif head == "hf-lookup":
        kwargs |= {"prompt_lookup_num_tokens": spec.window, "max_matching_ngram_size": LOOKUP_NGRAM}
    elif head != "hf-ar":
        raise SpecScopeError(f"unknown peer {method!r}")
    calls = [0]
    hook = pair.target.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    try:
        torch.manual_seed(seed)
        ids = torch.tensor([prompt_ids], device=pair.device)
        eos = sorted(pair.eos_token_ids)
        t0 = time.perf_counter()
        try:
            # the target is a causal LM (GenerationMixin); PreTrainedModel's type has no generate, and mypy cannot
            # read GenerationMixin.generate's self type (transformers annotates it for ty)
            out = pair.target.generate(  # type: ignore[operator]
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                eos_token_id=eos or None,
                pad_token_id=eos[0] if eos else 0,
                **kwargs,
            )
        except ValueError as err:  # transformers validates its generation settings with ValueError
            raise SpecScopeError(f"transformers' generate refused {method!r}: {err}") from err
        if pair.device.type == "cuda":
            torch.cuda.synchronize(pair.device)
        wall = time.perf_counter() - t0
    finally:
        hook.remove()
    return PeerResult(tuple(out[0, ids.shape[1] :].tolist()), wall, calls[0])
