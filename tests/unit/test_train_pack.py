"""Packing token-id shards into one compressed file and unpacking them back, token for token."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from spec_core.train.data import write_shard
from spec_core.train.pack import main, pack, unpack


def contents(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def test_a_pack_unpacks_to_the_same_shards(tmp_path):
    g = torch.Generator().manual_seed(0)
    src = tmp_path / "shards"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"source": "magpie,passages", "target_layers": [1, 8]}))
    answers = 0
    for i in (0, 1, 3):  # shard 2 missing: a run still under way
        seqs, starts = [], []
        for _ in range(int(torch.randint(1, 6, (1,), generator=g))):
            n = int(torch.randint(5, 40, (1,), generator=g))
            seqs.append(torch.randint(0, 49152, (n,), generator=g).tolist())
            starts.append(int(torch.randint(1, n, (1,), generator=g)))
            answers += n - starts[-1]
        meta = {"format": "tokens-1", "source": "magpie", "sampled": str(i % 2 == 1), "categories": "a,b"}
        hidden = torch.randn(sum(map(len, seqs)), 4) if i == 3 else None  # the first format: features dropped
        write_shard(src / f"shard_{i:05d}.safetensors", seqs, starts, hidden, metadata=meta)
    out = tmp_path / "assets" / "tokens-test.npz"
    summary = pack(src, out)
    assert summary["shards"] == 3 and summary["answer_tokens"] == answers and summary["bytes"] == out.stat().st_size
    back = unpack(out, tmp_path / "back")
    assert [p.name for p in back] == ["shard_00000.safetensors", "shard_00001.safetensors", "shard_00003.safetensors"]
    assert json.loads((tmp_path / "back" / "config.json").read_text()) == json.loads((src / "config.json").read_text())
    for p in back:
        (a, meta_a), (b, meta_b) = contents(src / p.name), contents(p)
        assert meta_a == meta_b
        assert set(b) == {"tokens", "starts", "answer_starts"}
        for k in b:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k])


def test_the_command_line_round_trip_and_ids_past_uint16_are_refused(tmp_path, capsys):
    src = tmp_path / "s"
    src.mkdir()
    write_shard(src / "shard_00000.safetensors", [[5, 6, 7, 2]], [2], metadata={"format": "tokens-1"})
    assert main(["pack", str(src), str(tmp_path / "p.npz")]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == 4
    assert main(["unpack", str(tmp_path / "p.npz"), str(tmp_path / "u")]) == 0
    assert contents(tmp_path / "u" / "shard_00000.safetensors")[0]["tokens"].tolist() == [5, 6, 7, 2]
    write_shard(src / "shard_00001.safetensors", [[5, 70000]], [1])
    with pytest.raises(ValueError, match="uint16"):
        pack(src, tmp_path / "q.npz")
    with pytest.raises(SystemExit, match="no shard"):
        pack(tmp_path / "empty", tmp_path / "r.npz")


def test_packs_split_by_first_shard_unpack_into_one_folder(tmp_path):
    src = tmp_path / "s"
    src.mkdir()
    for i in range(4):
        write_shard(src / f"shard_{i:05d}.safetensors", [[5, 6, 7 + i, 2]], [2], metadata={"format": "tokens-1"})
    assert pack(src, tmp_path / "old.npz")["shards"] == 4
    assert main(["pack", str(src), str(tmp_path / "new.npz"), "--first", "2"]) == 0
    assert pack(src, tmp_path / "new2.npz", first=2)["shards"] == 2
    unpack(tmp_path / "old.npz", tmp_path / "u")
    back = unpack(tmp_path / "new.npz", tmp_path / "u")
    assert [p.name for p in back] == ["shard_00002.safetensors", "shard_00003.safetensors"]
    assert contents(tmp_path / "u" / "shard_00003.safetensors")[0]["tokens"].tolist() == [5, 6, 10, 2]
    with pytest.raises(SystemExit, match="numbered 9 or more"):
        pack(src, tmp_path / "none.npz", first=9)
    assert main(["pack", str(src), str(tmp_path / "mid.npz"), "--first", "1", "--last", "2"]) == 0
    assert [p.name for p in unpack(tmp_path / "mid.npz", tmp_path / "m")] == [
        "shard_00001.safetensors",
        "shard_00002.safetensors",
    ]
    with pytest.raises(SystemExit, match="numbered 3 or more and 2 or fewer"):
        pack(src, tmp_path / "none.npz", first=3, last=2)


@pytest.mark.embedded
def test_the_committed_packs_hold_no_heldout_prompt():
    """Issue #43: nothing from Spec-Bench, the benchmark prompts or the evaluation tasks in the committed training
    data. Every user turn of every pack in ``assets/data/`` is decoded and checked with the filter the data job ran
    (``prompts.overlaps_heldout``), so a pack written by an older filter, or by hand, fails here."""
    import numpy as np

    from spec_core.core.assets import ASSETS_DIR
    from spec_core.model.models import _load_tokenizer, embedded_target_dir
    from spec_core.train.prompts import overlaps_heldout

    packs = sorted((ASSETS_DIR / "data").glob("tokens-*.npz"))
    assert packs, "no committed training data"
    tokenizer = _load_tokenizer(embedded_target_dir())
    seen = 0
    for path in packs:
        with np.load(path) as z:
            tokens, lengths, starts = z["tokens"].astype(np.int64), z["lengths"].tolist(), z["answer_starts"].tolist()
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for i, a in enumerate(starts):
            text = tokenizer.decode(tokens[offsets[i] : offsets[i] + a].tolist())
            user = text.split("<|im_start|>user\n")[-1].split("<|im_end|>")[0]
            assert user.strip() and not overlaps_heldout(user), f"{path.name} sequence {i}: {user[:120]!r}"
            seen += 1
    assert seen > 6000
