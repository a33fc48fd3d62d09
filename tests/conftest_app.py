"""Shared helpers for the app tests: a tiny random-weight pair on the CPU (loads in a few seconds).

The draft is the target with noise on its last layer: at temperature 1 (``MIXED`` sampling below) rounds show
a mix of accepted and rejected drafts (identical weights would accept everything, unrelated ones nothing).
Greedy decoding on random weights just repeats one token.
"""

from __future__ import annotations

import copy
import functools

import torch


@functools.lru_cache(maxsize=1)
def tiny_pair(noise: float = 0.05):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from spec_core.model.models import ModelPair, embedded_target_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_target_dir())
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    target = LlamaForCausalLM(config).eval()
    draft = copy.deepcopy(target)
    with torch.no_grad():
        for p in draft.model.layers[-1].parameters():
            p.add_(noise * torch.randn_like(p))
    pair = ModelPair("tiny", target, draft, "standalone", tokenizer, torch.device("cpu"), torch.float32)
    # PACER is in the live tab's default trio: give the tiny draft an untrained pre-verifier (seeded), as
    # `PacerLength.build` would cache a trained one (a random pair has nothing to train it on)
    from spec_core.heads.preverifier import PreVerifier, PreVerifierConfig
    from spec_core.policies.pacer import HEAD_KEY

    torch.manual_seed(0)
    pair.extras[HEAD_KEY] = (PreVerifier(PreVerifierConfig(hidden_size=config.hidden_size)).eval(), "tiny-untrained")
    return pair


MIXED = {"temperature": 1.0, "seed": 1}  # sampling that gives accepted, rejected, recovered and bonus tokens


def tiny_loader(name: str = "embedded", precision: str = "bfloat16"):
    """A pair loader for ``app.build_demo``: every name and precision gets the tiny (float32) pair."""
    return tiny_pair()
