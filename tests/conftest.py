"""Shared fixtures: tiny random-weight pairs (fast) and the real embedded pair (end to end)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from spec_core.model.models import ModelPair

# The layers (unit, engine, app, browser; a README in each) share helpers by module name: this folder's
# (conftest_app, malformed_uploads) and a few test modules' own (e.g. test_block_drafter.tiny_pair).
TESTS = Path(__file__).resolve().parent
for _folder in (TESTS, *(TESTS / layer for layer in ("unit", "engine", "app", "browser"))):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# one thread in each of `make test`'s workers (pytest-xdist, a worker a core), two in a single process
torch.set_num_threads(
    int(os.environ.get("SPECSCOPE_TEST_THREADS", "1" if os.environ.get("PYTEST_XDIST_WORKER") else "2"))
)
# "auto" measures this machine's costs once (tens of seconds) before it picks; the suite pins a precision so a
# test's run time does not depend on whether the table is cached (tests/engine/test_precision.py checks auto itself)
os.environ.setdefault("SPECSCOPE_PRECISION", "bfloat16")
# every run is priced with one shipped table, whatever this machine has measured or whichever CPU kind CI has, so
# a test's rounds never depend on the machine (tests/engine/test_precision.py checks the choice of table itself)
os.environ.setdefault("SPECSCOPE_COSTS", str(TESTS.parent / "assets" / "results" / "costs" / "xeon-amx-1thread.json"))
os.environ.setdefault("SPECSCOPE_MEASURE_COSTS", "0")  # the app's start-up never measures in a test


class TinyTokenizer:
    """A character tokenizer over a tiny vocabulary, enough for the engine (no chat template, no EOS)."""

    chat_template = None
    eos_token_id = None

    def __init__(self, vocab: int):
        self.vocab = vocab

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [ord(c) % self.vocab for c in text]}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(ord("a") + int(i) % 26) for i in ids)

    def batch_decode(self, seqs) -> list[str]:
        return [self.decode(s) for s in seqs]

    def get_vocab(self) -> dict:
        return {chr(ord("a") + i): i for i in range(self.vocab)}


def tiny_llama(vocab: int, seed: int, layers: int = 2, hidden: int = 32) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        initializer_range=0.5,  # large random weights: varied, non-repeating greedy outputs
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    return model


def make_tiny_pair(vocab: int = 16, draft: str = "standalone", target_seed: int = 0, draft_seed: int = 1) -> ModelPair:
    """A random target + draft sharing a tiny vocabulary. draft: standalone | copy (the target itself) | feature."""
    from spec_core.model.draft_networks import FeatureDraft

    target = tiny_llama(vocab, target_seed)
    if draft == "copy":
        d, design = target, "standalone"
    elif draft == "feature":
        torch.manual_seed(draft_seed)
        d, design = FeatureDraft(target, num_layers=1, init_from_target=False).eval(), "feature"
    else:
        d, design = tiny_llama(vocab, draft_seed, layers=1), "standalone"
    return ModelPair("tiny", target, d, design, TinyTokenizer(vocab), torch.device("cpu"), torch.float32)


@pytest.fixture
def tiny_pair() -> ModelPair:
    return make_tiny_pair()


@pytest.fixture(scope="session")
def embedded_f32() -> ModelPair:
    """The real embedded SmolLM2 pair in float32 (converted from the GGUF on first use)."""
    from spec_core.model.models import load_pair

    return load_pair("embedded", device="cpu", dtype="float32")


@pytest.fixture
def one_thread():
    """Tiny models: one thread is faster than contending for the shared cores (and deterministic)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
