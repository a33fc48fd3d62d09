"""The training data in one compressed file a clone can carry: token-id shards packed, and unpacked back.

``python -m spec_core.train.pack pack SHARD_DIR assets/data/tokens-NAME.npz`` writes every shard of
``SHARD_DIR`` (:mod:`spec_core.train.data`) into one ``numpy.savez_compressed`` file:

- ``tokens`` ``[N]`` uint16 (the vocabulary has 49,152 ids, under 2**16), every shard's sequences in order;
- ``lengths`` ``[S]`` uint32 and ``answer_starts`` ``[S]`` uint32, per sequence;
- ``shard_sequences`` ``[K]`` uint32: how many sequences each shard holds; ``shard_index`` ``[K]`` uint32: its
  number (``shard_00042`` is 42), so the gaps of a run still under way come back as gaps;
- ``meta`` (a JSON string): each shard's metadata and the folder's ``config.json``.

``--first K`` packs only the shards numbered K or more, so each session's new shards can go in a file of their
own, and ``--last M`` only those numbered M or fewer (a run written by several workers, ``train data --worker``,
is packed up to its first gap); unpacking every pack into one folder gives the whole run back.

``python -m spec_core.train.pack unpack assets/data/tokens-NAME.npz OUT_DIR`` writes the shards back, token for
token, with the same metadata: the trainers then recompute the target's features online
(:mod:`spec_core.train.features`). A shard of the first format is packed without its features.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

from spec_core.train.data import shard_paths, write_shard

TOKEN_LIMIT = 2**16  # uint16 ids


def pack(shard_dir: Path, out: Path, first: int = 0, last: int | None = None) -> dict:
    """Pack the shards of ``shard_dir`` numbered ``first`` or more (and ``last`` or fewer) into ``out`` (a session's
    new shards go in a file of their own, the earlier packs stay as they are; ``last`` stops a pack of a run that
    several workers still write before its first gap); returns a summary (shards, sequences, tokens, bytes)."""
    number = lambda p: int(p.stem.split("_")[1])  # noqa: E731
    paths = [p for p in shard_paths(shard_dir) if number(p) >= first and (last is None or number(p) <= last)]
    if not paths:
        upto = f" and {last} or fewer" if last is not None else ""
        raise SystemExit(f"no shard_*.safetensors numbered {first} or more{upto} in {shard_dir}")
    tokens, lengths, answer_starts, per_shard, index, metas = [], [], [], [], [], []
    for path in paths:
        with safe_open(str(path), framework="pt") as f:
            t, starts, a = f.get_tensor("tokens"), f.get_tensor("starts"), f.get_tensor("answer_starts")
            metas.append(f.metadata() or {})
        if int(t.max()) >= TOKEN_LIMIT or int(t.min()) < 0:
            raise ValueError(f"{path}: token ids outside uint16")
        tokens.append(t.numpy().astype(np.uint16))
        lengths.append((starts[1:] - starts[:-1]).numpy().astype(np.uint32))
        answer_starts.append(a.numpy().astype(np.uint32))
        per_shard.append(len(a))
        index.append(int(path.stem.split("_")[1]))
    config = Path(shard_dir) / "config.json"
    meta = {"shards": metas, "config": json.loads(config.read_text()) if config.exists() else None}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez_compressed(
        tmp,
        tokens=np.concatenate(tokens),
        lengths=np.concatenate(lengths),
        answer_starts=np.concatenate(answer_starts),
        shard_sequences=np.array(per_shard, dtype=np.uint32),
        shard_index=np.array(index, dtype=np.uint32),
        meta=np.array(json.dumps(meta)),
    )
    tmp.rename(out)
    total = np.concatenate(lengths).astype(np.int64)
    answers = int((total - np.concatenate(answer_starts)).sum())
    return {
        "shards": len(paths),
        "sequences": len(total),
        "tokens": int(total.sum()),
        "answer_tokens": answers,
        "bytes": out.stat().st_size,
    }


def unpack(pack_path: Path, out_dir: Path) -> list[Path]:
    """Write the shards of ``pack_path`` into ``out_dir`` (token-id shards, the packed metadata); returns them."""
    with np.load(pack_path) as z:
        tokens = torch.from_numpy(z["tokens"].astype(np.int64))
        lengths = z["lengths"].astype(np.int64).tolist()
        answer_starts = z["answer_starts"].astype(np.int64).tolist()
        per_shard, index = z["shard_sequences"].tolist(), z["shard_index"].tolist()
        meta = json.loads(str(z["meta"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    if meta["config"] is not None:
        (out_dir / "config.json").write_text(json.dumps(meta["config"], indent=2))
    paths, seq, pos = [], 0, 0
    for k, n in enumerate(per_shard):
        seqs = []
        for length in lengths[seq : seq + n]:
            seqs.append(tokens[pos : pos + length].tolist())
            pos += length
        path = out_dir / f"shard_{index[k]:05d}.safetensors"
        write_shard(path, seqs, answer_starts[seq : seq + n], metadata=meta["shards"][k])
        paths.append(path)
        seq += n
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec_core.train.pack", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="shards -> one compressed file")
    p.add_argument("shard_dir", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--first", type=int, default=0, help="pack only the shards numbered this or more")
    p.add_argument("--last", type=int, default=None, help="and only those numbered this or fewer")
    u = sub.add_parser("unpack", help="one compressed file -> shards")
    u.add_argument("pack", type=Path)
    u.add_argument("out_dir", type=Path)
    a = ap.parse_args(argv)
    if a.command == "pack":
        summary = pack(a.shard_dir, a.out, a.first, a.last)
        print(json.dumps(summary))
    else:
        paths = unpack(a.pack, a.out_dir)
        print(f"{len(paths)} shards in {a.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
