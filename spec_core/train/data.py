"""Training data from the target itself: its answers to prompts of many sources, as token ids.

Each shard (``shard_XXXXX.safetensors``) holds a batch of conversations, concatenated:

- ``tokens`` ``[N]`` int32: prompt (chat template applied) followed by the target's answer, per sequence;
- ``starts`` ``[S + 1]`` int64: where each sequence begins in ``tokens`` (and the end);
- ``answer_starts`` ``[S]`` int64: offset of the first answer token inside each sequence (acceptance and
  losses count answer tokens only, never prompt or template tokens);
- metadata (strings): ``format`` (``tokens-1``), ``source`` (the prompt source), ``sampled`` (``True`` when
  answered by sampling at T = 0.7, top-p 0.9, else greedy), ``seed``, ``precision`` (the target's, while
  generating), ``categories`` (each sequence's prompt kind, comma-separated).

Shards of the first format (before ``tokens-1``) also hold the target's features, 6.9 KB a token in bf16:

- ``hidden`` ``[N, H]`` bf16: the target's last hidden state (post-norm, so ``lm_head(hidden)`` gives its
  logits: the teacher for distillation and the feature for EAGLE-style drafts);
- ``layer_hidden`` ``[N, L, H]`` bf16: hidden states of the layers in ``TARGET_LAYERS`` (block drafters).

The trainers read both: for a token-id shard they recompute the features in a batched prefill of the target
(:mod:`spec_core.train.features`), as SpecForge and EAGLE-3 train, so the data grows by bytes a token.
``--store-features`` still writes the first format.

Prompt sources (``--source``, several comma-separated: shard i takes the (i mod n)-th): ``templates`` and
``written`` (:mod:`spec_core.train.prompts`), ``magpie`` (questions the target writes,
:mod:`spec_core.train.magpie`) and ``passages`` (copy-heavy tasks on real passages, :mod:`spec_core.train.passages`).

Shards are written atomically and skipped when present, so generation resumes where it stopped; each shard's
prompts and seed depend only on its index, so a resumed run writes what an unbroken one would.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from spec_core.core.cli_args import add_threads, apply_threads
from spec_core.model.int8 import int8_target
from spec_core.model.models import load_target
from spec_core.model.prompting import chat_ids
from spec_core.train.features import target_features
from spec_core.train.magpie import magpie_questions
from spec_core.train.passages import passage_prompts
from spec_core.train.prompts import SOURCES, training_prompts

TARGET_LAYERS = (1, 8, 14, 20, 27)  # ≈ linspace(1, L − 3, 5) for L = 30 (DFlash's choice of layers)
FORMAT = "tokens-1"
ALL_SOURCES = (*SOURCES, "magpie", "passages")
PRECISIONS = ("bfloat16", "float32", "int8")


@dataclass(frozen=True)
class DataConfig:
    out_dir: Path
    num_prompts: int = 1600  # total prompts (shards of `shard_size`)
    shard_size: int = 32
    batch_size: int = 16  # sequences generated together
    max_new_tokens: int = 192
    sampled_fraction: float = 0.5  # share of each source's shards answered by sampling (T = 0.7, top-p 0.9)
    seed: int = 1234
    source: str = "templates"  # one of ALL_SOURCES, or several comma-separated (shards take turns)
    precision: str = "bfloat16"  # the target's while generating: bfloat16, float32 or int8 (weight-only)
    store_features: bool = False  # also store hidden and layer_hidden (the first format, 6.9 KB a token)
    target_layers: tuple[int, ...] = TARGET_LAYERS  # the layers of layer_hidden, stored or computed in training

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.source.split(",") if s.strip())


@torch.inference_mode()
def answer_ids(model, prompt_ids: list[list[int]], eos: int, pad: int, max_new_tokens: int, sampled: bool, seed: int):
    """The target's answers to ``prompt_ids`` in one left-padded batch (each cut after its first ``eos``)."""
    width = max(map(len, prompt_ids))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids])  # [B, W]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids])
    torch.manual_seed(seed)
    kwargs = dict(do_sample=True, temperature=0.7, top_p=0.9, top_k=0) if sampled else dict(do_sample=False)
    out = model.generate(
        input_ids=input_ids.to(model.device),
        attention_mask=mask.to(model.device),
        max_new_tokens=max_new_tokens,
        pad_token_id=pad,
        eos_token_id=eos,
        **kwargs,
    )
    return [row[: row.index(eos) + 1] if eos in row else row for row in out[:, width:].tolist()]


def answer_batch(model, tokenizer, prompts: list[str], max_new_tokens: int, sampled: bool, seed: int):
    """Generate answers for ``prompts`` in one left-padded batch; returns (prompt_ids, answer_ids) lists."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    prompt_ids = [chat_ids(tokenizer, p) for p in prompts]
    return prompt_ids, answer_ids(model, prompt_ids, eos, pad, max_new_tokens, sampled, seed)


def hidden_states(model, sequences: list[list[int]], layers=TARGET_LAYERS):
    """Target hidden states of every position (one right-padded forward): ([N, H], [N, L, H]) bf16."""
    last, per_layer = target_features(model, sequences, layers)
    return torch.cat(last).to(torch.bfloat16), torch.cat(per_layer).to(torch.bfloat16)


@functools.lru_cache(maxsize=8)
def _static_prompts(source: str, n: int, seed: int) -> tuple[tuple[str, str], ...]:
    if source == "passages":
        return tuple(passage_prompts(n, seed))
    return tuple(training_prompts(n, seed, source))


def shard_plan(cfg: DataConfig, i: int) -> tuple[str, int, bool, int]:
    """(source, k, sampled, seed) of shard ``i``: the k-th shard of its source (a source named twice in
    ``--source`` gets twice the shards); ``sampled_fraction`` of each source's shards are sampled, spread evenly."""
    sources, slot = cfg.sources, i % len(cfg.sources)
    source = sources[slot]
    k = (i // len(sources)) * sources.count(source) + sources[:slot].count(source)
    sampled = int((k + 1) * cfg.sampled_fraction) > int(k * cfg.sampled_fraction)
    return source, k, sampled, cfg.seed + i * 1000


def source_prompts(cfg: DataConfig, source: str) -> tuple[tuple[str, str], ...]:
    """The (category, prompt) pairs a fixed source (not ``magpie``, which samples its own) holds for this run: as
    many as its shards may need, fewer when its list is shorter (``passages``, ``written``)."""
    rounds = -(-num_shards(cfg) // len(cfg.sources))
    return _static_prompts(source, rounds * cfg.sources.count(source) * cfg.shard_size, cfg.seed)


def num_shards(cfg: DataConfig) -> int:
    return (cfg.num_prompts + cfg.shard_size - 1) // cfg.shard_size


def shard_prompts(cfg: DataConfig, i: int, model, tokenizer) -> list[tuple[str, str]]:
    """The (category, prompt) pairs of shard ``i`` (magpie's are sampled from the target now, seeded by ``i``)."""
    source, k, _, seed = shard_plan(cfg, i)
    if source == "magpie":
        return [("magpie", q) for q in magpie_questions(model, tokenizer, cfg.shard_size, seed - 1)]
    return list(source_prompts(cfg, source)[k * cfg.shard_size : (k + 1) * cfg.shard_size])


def generate_shard(model, tokenizer, cfg: DataConfig, i: int, path: Path) -> tuple[int, int]:
    """Write shard ``i`` at ``path``; returns (sequences, answer tokens)."""
    source, _, sampled, seed = shard_plan(cfg, i)
    chunk = shard_prompts(cfg, i, model, tokenizer)
    if not chunk:
        return 0, 0
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    prompt_ids = [chat_ids(tokenizer, p) for _, p in chunk]
    order = sorted(range(len(chunk)), key=lambda j: len(prompt_ids[j]))  # batch similar lengths: less padding
    seqs, answer_starts, categories = [], [], []
    for b in range(0, len(order), cfg.batch_size):
        part = order[b : b + cfg.batch_size]
        answers = answer_ids(model, [prompt_ids[j] for j in part], eos, pad, cfg.max_new_tokens, sampled, seed + b)
        seqs += [prompt_ids[j] + a for j, a in zip(part, answers)]
        answer_starts += [len(prompt_ids[j]) for j in part]
        categories += [chunk[j][0] for j in part]
    hidden = layer_hidden = None
    if cfg.store_features:  # a batch at a time: every layer's states of a whole shard would not fit
        parts = [
            hidden_states(model, seqs[b : b + cfg.batch_size], cfg.target_layers)
            for b in range(0, len(seqs), cfg.batch_size)
        ]
        hidden, layer_hidden = torch.cat([h for h, _ in parts]), torch.cat([lh for _, lh in parts])
    metadata = {
        "format": FORMAT if not cfg.store_features else "features",
        "source": source,
        "sampled": str(sampled),
        "seed": str(seed),
        "precision": cfg.precision,
        "categories": ",".join(categories),
    }
    lengths = write_shard(path, seqs, answer_starts, hidden, layer_hidden, metadata)
    return len(seqs), int((lengths - torch.tensor(answer_starts)).sum())


def generate_dataset(model, tokenizer, cfg: DataConfig, log=print, worker: tuple[int, int] = (0, 1)) -> list[Path]:
    """Write the shards of ``cfg`` (skipping finished ones); returns every shard path written so far.

    ``worker`` (k, n): write only the shards whose index is k mod n, so that n processes on one folder (one a core)
    share the run without writing a shard twice. A shard depends only on its index, so the folder they fill holds
    the bytes one process would have written."""
    k, n = worker
    if not 0 <= k < n:
        raise ValueError(f"worker {k}/{n}: K/N needs 0 <= K < N")
    unknown = set(cfg.sources) - set(ALL_SOURCES)
    if unknown or not cfg.sources:
        raise ValueError(f"unknown prompt source(s) {sorted(unknown)} (from {ALL_SOURCES})")
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    paths = [cfg.out_dir / f"shard_{i:05d}.safetensors" for i in range(num_shards(cfg))]
    (cfg.out_dir / "config.json").write_text(
        json.dumps({k: str(v) for k, v in cfg.__dict__.items()} | {"target_layers": cfg.target_layers}, indent=2)
    )
    done_tokens, t_start = 0, time.time()
    used_up: set[str] = set()  # fixed sources whose every prompt has a shard: their later shards stay empty
    for i, path in enumerate(paths):
        source = shard_plan(cfg, i)[0]
        if path.exists() or i % n != k or source in used_up:
            continue
        t0 = time.time()
        n_seqs, new = generate_shard(model, tokenizer, cfg, i, path)
        dt = time.time() - t0
        if not n_seqs and source != "magpie":  # a fixed list of prompts, all taken by earlier shards
            used_up.add(source)
            log(
                f"shard {i:05d} {source:>9} is empty: the source's {len(source_prompts(cfg, source)):,} prompts are all "
                "in earlier shards; its later shards are skipped, the other sources go on"
            )
            continue
        done_tokens += new
        log(
            f"shard {i:05d} {source:>9} sampled={shard_plan(cfg, i)[2]!s:5} seqs={n_seqs:3d} "
            f"answer_tokens={new:5d} s={dt:6.1f} tok/s={new / max(dt, 1e-9):6.1f} "
            f"run_tok/s={done_tokens / (time.time() - t_start):6.1f}"
        )
    return [p for p in paths if p.exists()]


def write_shard(path: Path, seqs, answer_starts, hidden=None, layer_hidden=None, metadata: dict | None = None):
    """Write one shard atomically (see the module docstring for its tensors; ``hidden`` and ``layer_hidden``
    only in the first format); returns the sequence lengths."""
    lengths = torch.tensor([len(s) for s in seqs])
    tensors = {
        "tokens": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
        "starts": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
        "answer_starts": torch.tensor(answer_starts, dtype=torch.long),
    }
    if hidden is not None:
        tensors["hidden"] = hidden.to(torch.bfloat16).contiguous()
    if layer_hidden is not None:
        tensors["layer_hidden"] = layer_hidden.to(torch.bfloat16).contiguous()
    tmp = Path(path).with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata=metadata or {})
    tmp.rename(path)
    return lengths


def shard_paths(data_dir: Path, limit: int | None = None) -> list[Path]:
    """The finished shards of ``data_dir``, in order (the first ``limit`` of them)."""
    return sorted(Path(data_dir).glob("shard_*.safetensors"))[:limit]


def read_shards(paths: list[Path], skip: tuple[str, ...] = ()) -> list[dict[str, torch.Tensor]]:
    """Each shard of ``paths`` as its dict of tensors, leaving out ``skip``.

    The draft trainer skips ``layer_hidden`` (five times the size of ``hidden``), so thousands of
    conversations fit in memory.
    """
    out = []
    for p in paths:
        with safe_open(str(p), framework="pt") as f:
            out.append({k: f.get_tensor(k) for k in f.keys() if k not in skip})
    return out


def load_shards(data_dir: Path, limit: int | None = None, skip: tuple[str, ...] = ()) -> list[dict[str, torch.Tensor]]:
    """Every finished shard of ``data_dir`` (in order, the first ``limit``), leaving out ``skip``."""
    return read_shards(shard_paths(data_dir, limit), skip)


def split_sequences(shards: list[dict[str, torch.Tensor]]):
    """Yield (tokens [T], answer_start, hidden [T, H], layer_hidden [T, L, H]) per sequence."""
    for shard in shards:
        starts = shard["starts"].tolist()
        for k, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
            yield (
                shard["tokens"][a:b].long(),
                int(shard["answer_starts"][k]),
                shard["hidden"][a:b] if "hidden" in shard else None,
                shard["layer_hidden"][a:b] if "layer_hidden" in shard else None,
            )


def load_generator(precision: str, device: str = "cpu"):
    """The target (and tokenizer) that writes the data: bfloat16, float32 or weight-only int8
    (:func:`spec_core.model.int8.int8_target`, built from the bfloat16 target)."""

    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (one of {PRECISIONS})")
    target, tokenizer = load_target(device, "float32" if precision == "float32" else "bfloat16")
    if precision == "int8":
        target = int8_target(target)
    return target, tokenizer


def parse_worker(text: str) -> tuple[int, int] | None:
    """``"K/N"`` → (K, N) with 0 <= K < N; None for anything else."""
    k, slash, n = text.partition("/")
    if not slash or not k.strip().isdigit() or not n.strip().isdigit():
        return None
    worker = int(k), int(n)
    return worker if 0 <= worker[0] < worker[1] else None


def main(argv: list[str] | None = None) -> int:
    """``python -m spec_core train data``: generate (or resume) the training shards."""

    defaults = DataConfig(out_dir=Path("data/train"))
    ap = argparse.ArgumentParser(prog="python -m spec_core train data", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=defaults.out_dir)
    ap.add_argument("--num-prompts", type=int, default=defaults.num_prompts, help="total, over every source")
    ap.add_argument("--shard-size", type=int, default=defaults.shard_size)
    ap.add_argument("--batch-size", type=int, default=defaults.batch_size, help="sequences generated together")
    ap.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    ap.add_argument("--sampled-fraction", type=float, default=defaults.sampled_fraction)
    ap.add_argument("--seed", type=int, default=defaults.seed)
    ap.add_argument(
        "--source",
        default=defaults.source,
        help=f"prompt source, or several comma-separated that shards take in turn: {', '.join(ALL_SOURCES)}",
    )
    ap.add_argument("--precision", choices=PRECISIONS, default=defaults.precision, help="the target's, generating")
    ap.add_argument(
        "--store-features", action="store_true", help="also store the target's hidden states (first format)"
    )
    ap.add_argument(
        "--worker",
        default="0/1",
        help="K/N: write only the shards numbered K mod N, to share one folder among N processes (one a core)",
    )
    ap.add_argument("--device", default="cpu")
    add_threads(ap, None)
    args = ap.parse_args(argv)
    worker = parse_worker(args.worker)
    if worker is None:
        ap.error(f"--worker takes K/N with 0 <= K < N, e.g. 1/2; got {args.worker!r}")
    unknown = {s.strip() for s in args.source.split(",")} - set(ALL_SOURCES)
    if unknown:
        ap.error(f"unknown --source {sorted(unknown)} (from {', '.join(ALL_SOURCES)})")
    apply_threads(args.threads)
    target, tokenizer = load_generator(args.precision, args.device)
    cfg = DataConfig(**{k: v for k, v in vars(args).items() if k not in ("device", "threads", "worker")})
    paths = generate_dataset(target, tokenizer, cfg, log=lambda line: print(line, flush=True), worker=worker)
    print(f"{len(paths)} shards in {cfg.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
