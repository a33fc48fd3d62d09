"""Token-id shards: batched, resumable generation on a tiny target, the online features the trainers compute
for them (equal to what the first format stored), and both trainers reading them."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import make_tiny_pair
from safetensors import safe_open

from spec_core.train import data as data_mod
from spec_core.train.data import DataConfig, generate_dataset, hidden_states, read_shards, split_sequences, write_shard
from spec_core.train.draft import DraftTrainConfig, collate, train
from spec_core.train.features import OnlineFeatures, target_features

VOCAB = 16


class ChatTokenizer:
    """A character tokenizer with a chat template (user header 1, end of turn 2 = EOS) for the tiny target."""

    eos_token_id = 2
    pad_token_id = None

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, return_dict=False):
        ids = []
        for m in messages:
            ids += [1] + [3 + ord(c) % (VOCAB - 3) for c in m["content"][:12]] + [2]
        return ids + ([1, 4] if add_generation_prompt else [])


def tiny_config(tmp_path, **kw) -> DataConfig:
    base = dict(
        out_dir=tmp_path / "tokens",
        num_prompts=12,
        shard_size=3,
        batch_size=2,
        max_new_tokens=10,
        source="templates,written",
    )
    return DataConfig(**(base | kw))


def test_generation_writes_token_id_shards_and_resumes_to_the_same_bytes(tmp_path):
    pair = make_tiny_pair(VOCAB)
    cfg = tiny_config(tmp_path)
    lines: list[str] = []
    paths = generate_dataset(pair.target, ChatTokenizer(), cfg, log=lines.append)
    assert len(paths) == 4 and len(lines) == 4
    with safe_open(str(paths[0]), framework="pt") as f:
        assert set(f.keys()) == {"tokens", "starts", "answer_starts"}
        meta = f.metadata()
    assert meta["format"] == "tokens-1" and meta["source"] == "templates" and meta["precision"] == "bfloat16"
    assert len(meta["categories"].split(",")) == 3
    sources = [read_meta(p)["source"] for p in paths]
    sampled = [read_meta(p)["sampled"] for p in paths]
    assert sources == ["templates", "written", "templates", "written"]
    assert sampled == ["False", "False", "True", "True"]  # half of each source's shards, not of all shards
    for tokens, a, hidden, layer_hidden in split_sequences(read_shards(paths)):
        assert hidden is None and layer_hidden is None and 0 < a < len(tokens) <= a + 10
    before = [contents(p) for p in paths]
    paths[2].unlink()
    lines.clear()
    generate_dataset(pair.target, ChatTokenizer(), cfg, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("shard 00002")  # only the missing shard is written again
    after = [contents(p) for p in paths]
    assert all(a[1] == b[1] and all(torch.equal(a[0][k], b[0][k]) for k in a[0]) for a, b in zip(after, before))


def test_two_workers_share_a_folder_and_write_what_one_process_writes(tmp_path):
    pair = make_tiny_pair(VOCAB)
    one = generate_dataset(pair.target, ChatTokenizer(), tiny_config(tmp_path / "one"), log=lambda _: None)
    shared = tiny_config(tmp_path / "two")
    lines: list[str] = []
    odd = generate_dataset(pair.target, ChatTokenizer(), shared, log=lines.append, worker=(1, 2))
    assert [p.name for p in odd] == ["shard_00001.safetensors", "shard_00003.safetensors"]
    assert [line[:11] for line in lines] == ["shard 00001", "shard 00003"]  # its own shards only
    both = generate_dataset(pair.target, ChatTokenizer(), shared, log=lines.append, worker=(0, 2))
    assert [p.name for p in both] == [p.name for p in one]
    for a, b in zip(one, both):
        (ta, ma), (tb, mb) = contents(a), contents(b)
        assert ma == mb and all(torch.equal(ta[k], tb[k]) for k in ta)


def test_a_used_up_source_says_so_once_and_the_others_go_on(tmp_path, monkeypatch):
    """A fixed source (``passages``, ``written``) holds so many prompts; when earlier shards hold them all, its next
    shard is empty: the job says so once, writes no file for it, skips its later shards and goes on with the rest."""
    import spec_core.train.data as data_module

    real = data_module._static_prompts
    monkeypatch.setattr(  # "written" holds 4 prompts: shard k = 0 takes 3, k = 1 the last one, k = 2 none
        data_module, "_static_prompts", lambda source, n, seed: real(source, n, seed)[: 4 if source == "written" else n]
    )
    pair = make_tiny_pair(VOCAB)
    lines: list[str] = []
    paths = generate_dataset(pair.target, ChatTokenizer(), tiny_config(tmp_path, num_prompts=24), log=lines.append)
    assert [p.name[6:11] for p in paths] == ["00000", "00001", "00002", "00003", "00004", "00006"]
    assert [line[:11] for line in lines] == ["shard " + f"{i:05d}" for i in range(7)]  # none for shard 7
    assert "written is empty: the source's 4 prompts are all in earlier shards" in lines[5]
    assert len(read_shards([paths[3]])[0]["answer_starts"]) == 1  # the last prompt, alone in its shard


@pytest.mark.parametrize("text", ["2/2", "1", "a/2", "-1/2", "0/0", "1/2/3"])
def test_a_worker_outside_its_range_is_refused(tmp_path, text, capsys):
    assert data_mod.parse_worker(text) is None
    with pytest.raises(SystemExit):
        data_mod.main(["--out-dir", str(tmp_path), f"--worker={text}"])
    assert "--worker takes K/N" in capsys.readouterr().err
    with pytest.raises(ValueError, match="K/N"):
        generate_dataset(None, ChatTokenizer(), tiny_config(tmp_path), worker=(2, 2))


def read_meta(path):
    with safe_open(str(path), framework="pt") as f:
        return f.metadata()


def contents(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def test_store_features_writes_the_first_format(tmp_path):
    pair = make_tiny_pair(VOCAB)
    cfg = tiny_config(tmp_path, num_prompts=3, store_features=True, source="templates", target_layers=(2, 1))
    (path,) = generate_dataset(pair.target, ChatTokenizer(), cfg, log=lambda _: None)
    (shard,) = read_shards([path])
    n = shard["tokens"].numel()
    assert shard["hidden"].shape == (n, 32) and shard["layer_hidden"].shape == (n, 2, 32)
    assert json.loads((cfg.out_dir / "config.json").read_text())["target_layers"] == [2, 1]
    seqs = [t.tolist() for t, *_ in split_sequences([shard])]
    last, per_layer = target_features(pair.target, seqs, (2, 1))
    torch.testing.assert_close(shard["layer_hidden"], torch.cat(per_layer).bfloat16())


def test_a_source_named_twice_gets_twice_the_shards_and_distinct_prompts(tmp_path):
    cfg = tiny_config(tmp_path, source="templates,written,templates", num_prompts=18)
    plans = [data_mod.shard_plan(cfg, i) for i in range(6)]
    assert [(s, k) for s, k, *_ in plans] == [("templates", 0), ("written", 0), ("templates", 1)] + [
        ("templates", 2),
        ("written", 1),
        ("templates", 3),
    ]
    prompts = [p for i in range(6) for p in data_mod.shard_prompts(cfg, i, None, None)]
    assert len(prompts) == 18 and len(set(prompts)) == 18


def test_an_unknown_source_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown prompt source"):
        generate_dataset(None, ChatTokenizer(), tiny_config(tmp_path, source="templates,web"))


def sequences(target, n=5):
    g = torch.Generator().manual_seed(3)
    seqs = []
    for _ in range(n):
        prompt = torch.randint(3, VOCAB, (int(torch.randint(4, 9, (1,), generator=g)),), generator=g)
        with torch.no_grad():
            seqs.append(target.generate(prompt[None], max_new_tokens=int(torch.randint(3, 12, (1,), generator=g)))[0])
    return seqs


def test_online_features_equal_an_unpadded_forward_of_each_sequence():
    target = make_tiny_pair(VOCAB).target
    seqs = sequences(target)
    assert len({len(s) for s in seqs}) > 1  # the batch is padded
    last, per_layer = target_features(target, seqs, (1, 2))
    for s, h, lh in zip(seqs, last, per_layer):
        with torch.no_grad():
            out = target.model(s[None], output_hidden_states=True)
        torch.testing.assert_close(h, out.last_hidden_state[0], rtol=1e-4, atol=1e-4)  # padded kernels' rounding
        torch.testing.assert_close(
            lh, torch.stack([out.hidden_states[1][0], out.hidden_states[2][0]], 1), rtol=1e-4, atol=1e-4
        )
    cut, _ = target_features(target, seqs, (), max_len=4)
    assert all(len(c) == 4 for c in cut)
    torch.testing.assert_close(cut[0], last[0][:4], rtol=1e-4, atol=1e-4)


def test_the_trainer_sees_the_same_features_from_a_token_id_shard_as_the_first_format_stored(tmp_path):
    """The same conversations written twice, with stored features and as token ids: the draft trainer's batches
    (collate) hold the same hidden states and layer states, to bf16 rounding."""
    target = make_tiny_pair(VOCAB).target
    seqs = [s.tolist() for s in sequences(target, 6)]
    starts = [4] * len(seqs)
    h, lh = hidden_states(target, seqs, layers=(1, 2))
    write_shard(tmp_path / "old.safetensors", seqs, starts, h, lh)
    write_shard(tmp_path / "new.safetensors", seqs, starts)
    old = list(split_sequences(read_shards([tmp_path / "old.safetensors"])))
    new = list(split_sequences(read_shards([tmp_path / "new.safetensors"])))
    features = OnlineFeatures(target, (1, 2), torch.float32, batch_size=4)  # not the batching that wrote `old`
    a = collate(old, torch.device("cpu"), 0.25, [1, 0])
    b = collate(new, torch.device("cpu"), 0.25, [1, 0], features)
    for x, y in zip(a, b):
        torch.testing.assert_close(y, x, rtol=1e-2, atol=1e-2)
    assert torch.equal(a[1], b[1]) or (a[1].float() - b[1].float()).abs().max() <= 2**-6 * a[1].abs().max()
    with pytest.raises(ValueError, match="OnlineFeatures"):
        collate(new, torch.device("cpu"))


def token_shards(target, directory, n_shards=3, per_shard=4):
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(n_shards):
        seqs = [s.tolist() for s in sequences(target, per_shard)]
        write_shard(directory / f"shard_{i:05d}.safetensors", seqs, [4] * len(seqs), metadata={"format": "tokens-1"})
    (directory / "config.json").write_text(json.dumps({"target_layers": [1, 2]}))


def test_the_draft_trainer_trains_on_token_id_shards(tmp_path):
    pair = make_tiny_pair(VOCAB)
    token_shards(pair.target, tmp_path / "data")
    cfg = DraftTrainConfig(
        data_dir=tmp_path / "data",
        steps=2,
        batch_size=2,
        eval_every=2,
        heldout_shards=1,
        head_size=0,
        feature_layers=(2, 1),
        threads=1,
        warmup=1,
        work_dir=tmp_path / "w",
        out_dir=tmp_path / "a",
    )
    card = json.loads(train(cfg, target=pair.target).with_suffix(".json").read_text())
    assert card["data"]["features"].startswith("online") and card["data"]["train_sequences"] == 8
    assert 0.0 <= card["heldout"]["heldout_agree0"] <= 1.0


def test_cached_features_are_each_sequences_own_and_prefilled_once(tmp_path, monkeypatch):
    """``--cache-features``: each training sequence is prefilled once, and every batch the trainer collates in a
    later epoch carries that sequence's own features (equal, to bf16 rounding, to a fresh prefill of it alone)."""
    from spec_core.train import draft as draft_module

    pair = make_tiny_pair(VOCAB)
    token_shards(pair.target, tmp_path / "data")
    prefilled: list[int] = []
    checked: list[float] = []
    call, collate = OnlineFeatures.__call__, draft_module.collate
    fresh = OnlineFeatures(pair.target, (), torch.bfloat16, batch_size=1)

    def counting(self, seqs):
        prefilled.append(len(seqs))
        return call(self, seqs)

    def checking(batch, *args, **kw):
        for tokens, _, hidden, _ in batch:
            if hidden is not None:  # served from the cache: compare with this sequence's own prefill
                own = call(fresh, [tokens])[0][0]
                checked.append(float((hidden.float() - own.float()).abs().max() / own.float().abs().max()))
        return collate(batch, *args, **kw)

    monkeypatch.setattr(OnlineFeatures, "__call__", counting)
    monkeypatch.setattr(draft_module, "collate", checking)
    for cache in (False, True):
        prefilled.clear()
        cfg = DraftTrainConfig(
            data_dir=tmp_path / "data",
            steps=12,  # three epochs of the 8 training sequences
            batch_size=2,
            eval_every=12,
            heldout_shards=1,
            head_size=0,
            threads=1,
            warmup=1,
            cache_features=cache,
            name=f"c{cache}",
            work_dir=tmp_path / f"w{cache}",
            out_dir=tmp_path / "a",
        )
        train(cfg, target=pair.target)
        assert sum(prefilled) == 4 + (8 if cache else 12 * 2)  # the 4 held-out sequences once, then training's
    assert len(checked) >= 12 * 2 and max(checked) < 0.02  # every cached batch, each its own sequence's states


def test_the_block_trainer_trains_on_token_id_shards(tmp_path, monkeypatch):
    from spec_core.train import block as train_block

    target = make_tiny_pair(VOCAB).target
    token_shards(target, tmp_path / "data", n_shards=3, per_shard=4)
    monkeypatch.setattr(train_block, "load_training_target", lambda dtype: target)
    argv = ["--loss", "dpace", "--data", str(tmp_path / "data"), "--out-dir", str(tmp_path / "a")]
    argv += ["--work-dir", str(tmp_path / "w"), "--steps", "2", "--batch-seqs", "2", "--anchors", "2"]
    argv += ["--block-size", "3", "--eval-every", "2", "--eval-blocks", "8", "--target-layers", "1,2"]
    argv += ["--heldout-shards", "1", "--no-progress", "--threads", "1"]
    assert train_block.main(argv) == 0
    card = json.loads((tmp_path / "a" / "dpace.json").read_text())
    assert card["data"]["features"].startswith("online") and card["steps"] == 2
    assert len(card["heldout"]["accept_by_position"]) == 2


@pytest.mark.embedded
def test_magpie_samples_questions_from_the_embedded_targets_user_header(embedded_f32):
    from spec_core.train.magpie import keep_question, magpie_questions, pre_query_ids

    target, tokenizer = embedded_f32.target, embedded_f32.tokenizer
    header = tokenizer.decode(pre_query_ids(tokenizer))
    assert header.endswith("<|im_start|>user\n") and "<|im_start|>system" in header
    questions = magpie_questions(target, tokenizer, 4, seed=7, max_question_tokens=48)
    assert questions == magpie_questions(target, tokenizer, 4, seed=7, max_question_tokens=48)  # seeded
    assert 1 <= len(questions) <= 4 and all(keep_question(q) for q in questions)
    assert not any("<|im" in q for q in questions)
