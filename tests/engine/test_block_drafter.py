"""The parallel block drafter (DFlash, arXiv 2602.06036) on a tiny random-weight target: engine
losslessness, cache consistency with the training forward, and D-PACE training end to end (arXiv 2605.18810)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from spec_core.core.errors import SpecScopeError
from spec_core.core.rules import BLOCK_LOSSES
from spec_core.drafters.block.assets import load_block_model
from spec_core.drafters.block.network import BlockDraftModel
from spec_core.drafters.block.runtime import BlockDrafter, make_block_drafter
from spec_core.engine import loop as engine
from spec_core.model.models import ModelPair

VOCAB, LAYERS = 64, (1, 2, 3)


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread beats contending for the cores


class ByteTokenizer:
    """Just enough of a tokenizer for the engine: one id per byte (mod the vocabulary), no chat template."""

    chat_template = None
    eos_token_id = 2

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [1] + [3 + b % (VOCAB - 3) for b in text.encode()]}

    def batch_decode(self, rows: list[list[int]]) -> list[str]:
        return [self.decode(r) for r in rows]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(65 + i % 26) for i in ids)


def tiny_target(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=2,
        bos_token_id=1,
        pad_token_id=0,
    )
    return LlamaForCausalLM(cfg).float().eval()


def tiny_pair(seed: int = 0, init: str = "random") -> ModelPair:
    target = tiny_target(seed)
    pair = ModelPair("tiny", target, None, "standalone", ByteTokenizer(), torch.device("cpu"), torch.float32)
    torch.manual_seed(seed + 1)
    model = BlockDraftModel.for_target(target, LAYERS, num_layers=1, block_size=5, init=init)
    for loss in BLOCK_LOSSES:
        pair.extras[f"block:{loss}"] = model
    return pair


@pytest.mark.parametrize("init", ["random", "target"])
def test_block_drafting_is_lossless_greedy(init: str) -> None:
    """float32 greedy: every block:* method reproduces `ar` token for token."""
    pair = tiny_pair(init=init)
    for prompt in ["hello there", "x", "a longer prompt about speculative decoding"]:
        ref = engine.generate(pair, prompt, "ar", max_new_tokens=40, chat=False)
        for method in ("block:uniform", "block:decay", "block:dpace"):
            out = engine.generate(pair, prompt, method, max_new_tokens=40, chat=False)
            assert out.token_ids == ref.token_ids, (prompt, method)
            assert all(e.draft_len <= 4 for e in out.events)
            assert out.stats.target_forwards <= ref.stats.target_forwards


def test_block_drafting_sampled_runs_with_verifiers() -> None:
    from spec_core.verifiers import VERIFIERS

    pair = tiny_pair()
    verifiers = [v for v in ("lossless", "lenient:0.5", "static:0.5") if v.partition(":")[0] in VERIFIERS]
    for method in [f"block:dpace+{v}" for v in verifiers]:
        out = engine.generate(pair, "sampling", method, max_new_tokens=20, temperature=0.8, top_p=0.9, chat=False)
        assert len(out.token_ids) == 20 or out.token_ids[-1] == 2
        for e in out.events:
            assert len(e.draft_probs) == e.draft_len


def test_a_perfect_block_is_accepted_whole(monkeypatch) -> None:
    """A drafter that proposes the target's own continuation: every round accepts the whole block (τ = B)."""
    pair = tiny_pair()
    ref = engine.generate(pair, "abc", "ar", max_new_tokens=30, chat=False).token_ids
    n_prompt = len(ByteTokenizer()("abc")["input_ids"])

    class Oracle(BlockDrafter):
        def propose(self, n, sampling, generator):
            chunk = super().propose(n, sampling, generator)
            pos = len(self.ids) - n_prompt
            self.drafted = list(ref[pos : pos + len(chunk.tokens)])
            return dataclasses.replace(chunk, tokens=self.drafted, probs=None)

    monkeypatch.setattr(engine, "make_drafter", lambda p, spec, costs=None: Oracle(p.extras[spec.text]))
    out = engine.generate(pair, "abc", "block:dpace", max_new_tokens=30, chat=False)
    assert out.token_ids == ref
    assert out.stats.tau == 5.0  # 30 tokens in 6 rounds of 4 drafted + 1 bonus
    assert all((e.verify_width, e.draft_forwards) == (5, 1) for e in out.events)  # one forward drafts the block


def test_runtime_cache_matches_the_training_forward() -> None:
    """Incremental context K/V (reset + commits) give the same block logits as one full forward."""
    torch.manual_seed(0)
    pair = tiny_pair()
    model: BlockDraftModel = pair.extras["block:dpace"]
    ids = torch.randint(3, VOCAB, (20,))
    out = pair.target(ids[None], output_hidden_states=True)
    layer_hidden = torch.stack([out.hidden_states[i][0] for i in LAYERS], dim=1)  # [T, L, H]
    from spec_core.core.types import SamplingConfig
    from spec_core.model.cached_lm import LMOutput

    drafter = BlockDrafter(model)
    drafter.reset(ids[:8].tolist(), LMOutput(out.logits[0, :7], out.hidden_states[-1][0, :7], layer_hidden[:7]))
    drafter.propose(4, SamplingConfig(), None)
    drafter.commit(2, int(ids[10]), LMOutput(out.logits[0, 7:10], out.hidden_states[-1][0, 7:10], layer_hidden[7:10]))
    drafter.ids[-3:] = ids[8:11].tolist()  # pretend the drafts were the sequence's own tokens
    runtime = drafter.propose(4, SamplingConfig(), None)
    # training path: anchor at position 10, context = positions 0..9
    with torch.no_grad():
        feats = model.project_context(layer_hidden[None])  # [1, T, H]
        kv = model.context_kv(feats)
        visible = (torch.arange(20) < 10)[None, None]  # [1, 1, T]
        hidden = model.block_states(ids[10].view(1, 1), torch.tensor([[10]]), kv, visible)[0, 0, 1:]
        logits = model.logits(hidden)
    torch.testing.assert_close(torch.stack(runtime.logits), logits.float(), rtol=1e-4, atol=1e-5)


def test_make_block_drafter_errors(tmp_path) -> None:
    pair = tiny_pair()
    pair.extras.clear()
    with pytest.raises(SpecScopeError, match="embedded"):
        make_block_drafter(pair, "dpace")
    with pytest.raises(SpecScopeError):
        make_block_drafter(pair, "nope")
    with pytest.raises(SpecScopeError, match="train block"):
        load_block_model(pair.target, "dpace", tmp_path)


# ----------------------------------------------------------------------------------------------------------
# Training end to end on tiny synthetic shards


def write_tiny_shards(target: LlamaForCausalLM, directory, n_shards: int = 3, per_shard: int = 4) -> None:
    """Shards in the layout of spec_core.train.data (tokens, starts, answer_starts, hidden, layer_hidden)."""
    directory.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    for s in range(n_shards):
        seqs, answer_starts = [], []
        for _ in range(per_shard):
            prompt = torch.randint(3, VOCAB, (6,), generator=g).tolist()
            with torch.no_grad():  # the target's own greedy answer, as the data generator does
                full = target.generate(
                    torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=None, pad_token_id=0
                )[0].tolist()
            seqs.append(full)
            answer_starts.append(len(prompt))
        hidden, layer_hidden = [], []
        for seq in seqs:
            with torch.no_grad():
                out = target.model(torch.tensor([seq]), output_hidden_states=True)
            hidden.append(out.last_hidden_state[0])
            layer_hidden.append(torch.stack([out.hidden_states[i][0] for i in LAYERS], dim=1))
        lengths = torch.tensor([len(x) for x in seqs])
        tensors = {
            "tokens": torch.tensor([t for x in seqs for t in x], dtype=torch.int32),
            "starts": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
            "answer_starts": torch.tensor(answer_starts),
            "hidden": torch.cat(hidden).bfloat16(),
            "layer_hidden": torch.cat(layer_hidden).bfloat16(),
        }
        save_file(tensors, str(directory / f"shard_{s:05d}.safetensors"))


def test_training_runs_end_to_end(tmp_path, monkeypatch) -> None:
    from spec_core.train import block as train_block

    target = tiny_target()
    write_tiny_shards(target, tmp_path / "data")
    monkeypatch.setattr(train_block, "load_training_target", lambda dtype: target)
    out_dir, work = tmp_path / "assets", tmp_path / "work"
    common = [
        "--data",
        str(tmp_path / "data"),
        "--out-dir",
        str(out_dir),
        "--work-dir",
        str(work),
        "--steps",
        "6",
        "--batch-seqs",
        "2",
        "--anchors",
        "3",
        "--block-size",
        "5",
        "--eval-every",
        "3",
        "--target-layers",
        "1,2,3",
        "--heldout-shards",
        "1",
        "--no-progress",
    ]
    for loss in ("decay", "dpace"):
        assert train_block.main(["--loss", loss, *common]) == 0
        card = json.loads((out_dir / f"{loss}.json").read_text())
        assert card["steps"] == 6 and len(card["heldout"]["accept_by_position"]) == 4
        assert len(card["log"]) >= 2 and len(card["log"][-1]["weights_by_position"]) == 4
        model, _ = load_block_model(target, loss, out_dir)
        assert isinstance(model, BlockDraftModel)
    # resume: a finished run with more steps continues from its checkpoint
    assert train_block.main(["--loss", "dpace", *common[:-1], "--no-progress", "--steps", "8"]) == 0
    assert json.loads((out_dir / "dpace.json").read_text())["steps"] == 8


def test_training_data_from_several_folders(tmp_path) -> None:
    from spec_core.train.block import load_sequences

    target = tiny_target()
    write_tiny_shards(target, tmp_path / "a", n_shards=2, per_shard=2)
    write_tiny_shards(target, tmp_path / "b", n_shards=3, per_shard=2)
    train, held, shards = load_sequences(f"{tmp_path / 'a'},{tmp_path / 'b'}", heldout=1)
    assert shards == 5 and len(held) == 2 * 2 and len(train) == (1 + 2) * 2


def test_analysis_helpers() -> None:
    from types import SimpleNamespace

    from spec_core.analysis.block import acceptance_curve, block_weights

    events = [SimpleNamespace(draft_len=3, accepted=a) for a in (0, 1, 3, 2)] + [
        SimpleNamespace(draft_len=1, accepted=1)
    ]
    assert acceptance_curve(events, 3) == [0.75, 0.5, 0.25]  # rounds with a full block only
    w = block_weights([0.9, 0.5, 0.1])
    assert set(w) == {"uniform", "decay", "dpace", "dpace-cumulative", "dpace-continuation"}
    for shares in w.values():
        assert sum(shares) == pytest.approx(1.0)
    assert w["dpace"][0] > w["uniform"][0]


@pytest.mark.embedded
@pytest.mark.parametrize("loss", BLOCK_LOSSES)
def test_shipped_block_drafters_are_lossless_on_the_embedded_target(embedded_f32, loss) -> None:
    """Every shipped ``assets/block`` drafter loads (its card's sha256 checked), keeps float32 greedy decoding
    identical to ``ar`` and gets drafted tokens accepted: the untrained drafter would sit at τ = 1.00."""
    torch.set_num_threads(2)
    pair = dataclasses.replace(embedded_f32, extras={})  # its own drafter cache
    prompt = "Write a Python function that returns the square of a number."
    ar = engine.generate(pair, prompt, "ar", max_new_tokens=40)
    block = engine.generate(pair, prompt, f"block:{loss}", max_new_tokens=40)
    assert block.token_ids == ar.token_ids
    assert block.stats.accepted_tokens > 0, f"block:{loss}: no drafted token accepted"
