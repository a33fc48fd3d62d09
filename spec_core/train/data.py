"""Training data from the target itself: its answers to templated prompts, plus its hidden states.

Each shard (``shard_XXXXX.safetensors``) holds a batch of conversations, concatenated:

- ``tokens`` ``[N]`` int32: prompt (chat template applied) followed by the target's answer, per sequence;
- ``starts`` ``[S + 1]`` int64: where each sequence begins in ``tokens`` (and the end);
- ``answer_starts`` ``[S]`` int64: offset of the first answer token inside each sequence (acceptance and
  losses count answer tokens only, never prompt or template tokens);
- ``hidden`` ``[N, H]`` bf16: the target's last hidden state (post-norm, so ``lm_head(hidden)`` gives its
  logits: the teacher for distillation and the feature for EAGLE-style drafts);
- ``layer_hidden`` ``[N, L, H]`` bf16: hidden states of the layers in ``TARGET_LAYERS`` (block drafters).

Shards are written atomically and skipped when present, so generation resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from spec_core.prompting import chat_ids
from spec_core.train.prompts import SOURCES, training_prompts

TARGET_LAYERS = (1, 8, 14, 20, 27)  # ≈ linspace(1, L − 3, 5) for L = 30 (DFlash's choice of layers)


@dataclass(frozen=True)
class DataConfig:
    out_dir: Path
    num_prompts: int = 1600  # total prompts (shards of `shard_size`)
    shard_size: int = 32
    batch_size: int = 16  # sequences generated together
    max_new_tokens: int = 192
    sampled_fraction: float = 0.5  # share of shards answered by sampling (T = 0.7, top-p 0.9) instead of greedy
    seed: int = 1234
    source: str = "templates"  # "templates" or "written" (the prompt bank): see spec_core.train.prompts


@torch.inference_mode()
def answer_batch(model, tokenizer, prompts: list[str], max_new_tokens: int, sampled: bool, seed: int):
    """Generate answers for ``prompts`` in one left-padded batch; returns (prompt_ids, answer_ids) lists."""
    eos = tokenizer.eos_token_id
    prompt_ids = [chat_ids(tokenizer, p) for p in prompts]
    width = max(map(len, prompt_ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompt_ids])
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
    answers = []
    for row in out[:, width:].tolist():
        answers.append(row[: row.index(eos) + 1] if eos in row else row)
    return prompt_ids, answers


@torch.inference_mode()
def hidden_states(model, sequences: list[list[int]], layers=TARGET_LAYERS):
    """Target hidden states of every position (one right-padded forward): ([N, H], [N, L, H]) bf16."""
    width = max(map(len, sequences))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in sequences], device=model.device)
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], device=model.device)
    out = model.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    last = out.last_hidden_state  # [B, W, H] post-norm
    per_layer = torch.stack([out.hidden_states[i] for i in layers], dim=2)  # [B, W, L, H]
    keep = mask.bool()
    return last[keep].to(torch.bfloat16).cpu(), per_layer[keep].to(torch.bfloat16).cpu()


def generate_dataset(model, tokenizer, cfg: DataConfig) -> list[Path]:
    """Write the shards of ``cfg`` (skipping finished ones); returns every shard path."""
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    prompts = training_prompts(cfg.num_prompts, cfg.seed, cfg.source)
    n_shards = (len(prompts) + cfg.shard_size - 1) // cfg.shard_size
    paths = [cfg.out_dir / f"shard_{i:05d}.safetensors" for i in range(n_shards)]
    todo = [i for i, p in enumerate(paths) if not p.exists()]
    (cfg.out_dir / "config.json").write_text(
        json.dumps({k: str(v) for k, v in cfg.__dict__.items()} | {"target_layers": TARGET_LAYERS}, indent=2)
    )
    bar = tqdm(todo, desc="target answers (shards)", unit="shard")
    for i in bar:
        t0 = time.time()
        chunk = prompts[i * cfg.shard_size : (i + 1) * cfg.shard_size]
        sampled = int((i + 1) * cfg.sampled_fraction) > int(i * cfg.sampled_fraction)  # spread evenly
        seqs, answer_starts, categories = [], [], []
        for j in range(0, len(chunk), cfg.batch_size):
            part = chunk[j : j + cfg.batch_size]
            p_ids, a_ids = answer_batch(
                model, tokenizer, [t for _, t in part], cfg.max_new_tokens, sampled, cfg.seed + i * 1000 + j
            )
            seqs += [p + a for p, a in zip(p_ids, a_ids)]
            answer_starts += [len(p) for p in p_ids]
            categories += [c for c, _ in part]
        last, per_layer = [], []
        for j in range(0, len(seqs), cfg.batch_size):
            h, lh = hidden_states(model, seqs[j : j + cfg.batch_size])
            last.append(h)
            per_layer.append(lh)
        lengths = write_shard(
            paths[i],
            seqs,
            answer_starts,
            torch.cat(last),
            torch.cat(per_layer),
            {"sampled": str(sampled), "categories": ",".join(categories)},
        )
        new = int((lengths - torch.tensor(answer_starts)).sum())
        bar.set_postfix(answer_tokens=new, tok_per_s=f"{new / (time.time() - t0):.0f}")
    return paths


def write_shard(path: Path, seqs, answer_starts, hidden, layer_hidden, metadata: dict | None = None):
    """Write one shard atomically (see the module docstring for its tensors); returns the sequence lengths."""
    lengths = torch.tensor([len(s) for s in seqs])
    tensors = {
        "tokens": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
        "starts": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
        "answer_starts": torch.tensor(answer_starts, dtype=torch.long),
        "hidden": hidden.to(torch.bfloat16).contiguous(),
        "layer_hidden": layer_hidden.to(torch.bfloat16).contiguous(),
    }
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


def main(argv: list[str] | None = None) -> int:
    """``python -m spec_core train data``: generate (or resume) the training shards."""
    import argparse

    defaults = DataConfig(out_dir=Path("data/train"))
    ap = argparse.ArgumentParser(prog="python -m spec_core train data", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=defaults.out_dir)
    ap.add_argument("--num-prompts", type=int, default=defaults.num_prompts)
    ap.add_argument("--shard-size", type=int, default=defaults.shard_size)
    ap.add_argument("--batch-size", type=int, default=defaults.batch_size)
    ap.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    ap.add_argument("--sampled-fraction", type=float, default=defaults.sampled_fraction)
    ap.add_argument("--seed", type=int, default=defaults.seed)
    ap.add_argument(
        "--source",
        choices=SOURCES,
        default=defaults.source,
        help="templated prompts, or the written prompt bank (spec_core/train/prompt_bank)",
    )
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    from spec_core.models import load_target

    target, tokenizer = load_target(args.device, "bfloat16")
    cfg = DataConfig(**{k: v for k, v in vars(args).items() if k != "device"})
    paths = generate_dataset(target, tokenizer, cfg)
    print(f"{len(paths)} shards in {cfg.out_dir}")
    return 0
