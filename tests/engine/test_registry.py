"""A new part is one class plus one registry line: a drafter defined only here reaches the method list, the
glossary, the engine and the cost model with no other edit."""

from __future__ import annotations

from typing import ClassVar

import pytest
from conftest import make_tiny_pair

from spec_core import drafters
from spec_core.core.cost_model import CostProfile, round_shape
from spec_core.drafters.base import DraftChunk
from spec_core.engine import methods
from spec_core.engine.loop import generate
from visuals.glossary import lane_header


class EchoDrafter:
    """Proposes the last token again, ``n`` times, at two draft forwards a token."""

    target_layers: tuple[int, ...] = ()
    needs_target_hidden = False

    def __init__(self, vocab: int):
        self.vocab, self.ids = vocab, []

    def reset(self, prompt_ids, prefill):
        self.ids = list(prompt_ids)

    def propose(self, n, sampling, generator):
        import torch

        tokens = [self.ids[-1]] * n
        rows = [torch.zeros(self.vocab) for _ in tokens]
        return DraftChunk(tokens, None, [0.5] * n, [torch.zeros(1)] * n, rows, 2 * n)

    def commit(self, accepted, next_token, verified, path=None):
        self.ids.append(next_token)


class EchoDraft:
    prefix: ClassVar[str] = "echo"
    named: ClassVar[bool] = True
    drafts_trees: ClassVar[bool] = False
    own_length: ClassVar[bool] = False
    reads_draft_states: ClassVar[bool] = False
    about: ClassVar[str] = "repeats the last token, a toy"
    examples: ClassVar[tuple[str, ...]] = ("echo",)

    @classmethod
    def parse(cls, arg):
        return None

    @classmethod
    def build(cls, params, pair):
        return EchoDrafter(pair.target.config.vocab_size)


@pytest.fixture
def with_echo(monkeypatch):
    monkeypatch.setitem(drafters.DRAFTERS, "echo", EchoDraft)
    yield


def test_a_drafter_defined_in_a_test_reaches_every_list(with_echo):
    assert "echo" in methods.known_methods()
    assert methods.families()["echo"] == EchoDraft.about
    assert EchoDraft.about in lane_header("echo+fixed:3")
    spec = methods.parse_method("echo")
    assert spec.drafter.family == "echo" and spec.policy.family == "cost"  # its length: this machine's costs


def test_its_rounds_run_and_the_cost_model_prices_its_own_forwards(with_echo, one_thread):
    pair = make_tiny_pair()
    run = generate(pair, "abcabc", "echo+fixed:3", 12)
    assert run.token_ids == generate(pair, "abcabc", "ar", 12).token_ids
    drafting = [e for e in run.events if e.draft_len]
    assert drafting and all(e.draft_forwards == 2 * e.draft_len for e in drafting)
    profile = CostProfile(widths=(1, 4), target_ms=(10.0, 10.0), draft_ms=1.0)
    shapes = [round_shape(e) for e in drafting]
    assert all(s.draft_forwards == 2 * s.width - 2 for s in shapes)
    expected = sum(s.tokens for s in shapes) * 10.0 / sum(10.0 + s.draft_forwards for s in shapes)
    assert profile.speedup(shapes) == pytest.approx(expected)
