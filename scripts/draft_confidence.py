"""Where a feature draft loses: its greedy agreement with the target, bucketed by how sure the target is.

On held-out token-id shards (features online, as the trainer computes them), each answer position's target
distribution is ``softmax(lm_head(hidden))``; its largest probability says how sure the target is of its own next
token. A draft that only missed the target's coin flips would agree on nearly every position where the target is
≥ 0.9 sure; the printed table says how far each draft is from that. Counts only, no clock.

Instead of a folder, ``chat`` or ``spec-bench`` reads the prompts the engine is judged on (those of
``scripts/compare_drafts.py``: the 14 benchmark prompts, 64 tokens; held-out Spec-Bench first turns, questions 70+,
3 a category, 128 tokens), answered greedily by the bfloat16 target, one at a time. ``--widen`` widens each draft's
trimmed head at every position with the text's own tokens so far, as the drafter does while drafting
(:func:`spec_core.train.draft.text_extras`). ``default`` reads the Live tab's first task (96 tokens).

A second split says whether a draft copies: the positions where a 2-gram prompt lookup over the text so far would
propose the target's token (the token that followed the last earlier occurrence of the current two), and the rest.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/draft_confidence.py data/s17/shards --shards 52:56 \\
        assets/drafts:feature runs/s18/out:feature
    PYTHONPATH=. .venv/bin/python scripts/draft_confidence.py spec-bench assets/drafts:feature --widen
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from spec_core.core.jsonl import read_objects
from spec_core.model.draft_assets import load_draft
from spec_core.model.models import load_target
from spec_core.serve import spec_bench
from spec_core.train.data import TARGET_LAYERS, answer_batch, load_generator, read_shards, shard_paths, split_sequences
from spec_core.train.draft import collate, data_layer_positions, text_extras
from spec_core.train.features import OnlineFeatures
from visuals.menus import PRESETS

EDGES = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0 + 1e-9)
JUDGED = {"chat": 64, "spec-bench": 128, "default": 96}  # compare_drafts.py's sets, and the Live tab's first task


def lookup_hits(tokens: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """[B, T] bool: where a 2-gram prompt lookup over the text so far proposes the target's choice: the token that
    followed the latest earlier occurrence of tokens (j − 1, j) is ``choice[:, j]``, the target's next token."""
    hits = torch.zeros_like(choice, dtype=torch.bool)
    for b, row in enumerate(tokens.tolist()):
        follows: dict[tuple[int, int], int] = {}
        for j in range(1, len(row) - 1):
            if j >= 2:
                follows[(row[j - 2], row[j - 1])] = row[j]
            hits[b, j] = follows.get((row[j - 1], row[j]), -1) == int(choice[b, j])
    return hits


def judged_sequences(name: str) -> list[tuple[torch.Tensor, int, None, None]]:
    """(prompt + the target's greedy answer, answer start, no stored features) for each judged prompt."""
    if name == "chat":
        prompts = [o["prompt"] for _, o in read_objects(Path("prompts/specscope.jsonl"), "prompt file")]
    elif name == "default":
        prompts = [PRESETS[0].prompt]
    else:
        prompts = [p["prompt"] for p in spec_bench.select(3, 70) if not p.get("history")]
    model, tokenizer = load_generator("bfloat16")  # the target that writes the training data
    out = []
    for prompt in prompts:  # one at a time: no padding
        ids, answers = answer_batch(model, tokenizer, [prompt], JUDGED[name], sampled=False, seed=0)
        out.append((torch.tensor(ids[0] + answers[0]), len(ids[0]), None, None))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "data_dir", type=Path, help="a folder of token-id shards (spec_core.train.data), or chat or spec-bench"
    )
    ap.add_argument("drafts", nargs="+", help="DIR:NAME of each feature draft")
    ap.add_argument("--shards", default="-4:", help="which shards, as a Python slice of the sorted list")
    ap.add_argument("--widen", action="store_true", help="widen each draft's head with the text's tokens so far")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    judged = str(args.data_dir) in JUDGED
    chosen = []
    if not judged:
        try:
            start, _, stop = args.shards.partition(":")
            chosen = shard_paths(args.data_dir)[slice(int(start) if start else None, int(stop) if stop else None)]
        except ValueError:
            ap.error(f"--shards {args.shards!r}: give a slice such as 52:56 or -4:")
        if not chosen:
            ap.error(f"no shards {args.shards} in {args.data_dir}")
    target, tokenizer = load_target("cpu", torch.float32)
    target = target.float().eval().requires_grad_(False)
    drafts = {}
    for spec in args.drafts:
        directory, sep, name = spec.rpartition(":")
        if not sep or not (Path(directory) / f"{name}.json").is_file():
            ap.error(f"{spec!r}: give DIR:NAME with DIR/NAME.json and DIR/NAME.safetensors")
        draft, card = load_draft(target, name, Path(directory))
        if card.get("design") != "feature":
            ap.error(f"{spec}: a {card.get('design')} draft; this reads feature drafts")
        drafts[spec] = draft.float().eval()
    fused = tuple(next(iter(drafts.values())).feature_layers)
    layers = ([TARGET_LAYERS.index(i) for i in fused] or None) if judged else data_layer_positions(args.data_dir, fused)
    features = OnlineFeatures(target, list(TARGET_LAYERS) if layers else (), torch.bfloat16, 8)
    seqs = judged_sequences(str(args.data_dir)) if judged else list(split_sequences(read_shards(chosen, ())))
    never = torch.tensor(list(tokenizer.all_special_ids), dtype=torch.long)
    head = target.lm_head.weight.float()
    in_head = {  # each draft's trimmed head, as a mask over the vocabulary
        spec: torch.zeros(head.shape[0], dtype=torch.bool).index_fill_(0, d.vocab_subset, True)
        for spec, d in drafts.items()
    }
    counts = torch.zeros(len(EDGES) - 1)
    agree = {spec: torch.zeros(len(EDGES) - 1) for spec in drafts}
    copy_counts = torch.zeros(2)  # answer positions where a 2-gram lookup proposes the target's token: no, yes
    copy_agree = {spec: torch.zeros(2) for spec in drafts}
    with torch.no_grad():
        for i in range(0, len(seqs), 8):
            tokens, hidden, weight, layer_hidden = collate(seqs[i : i + 8], "cpu", 0.0, layers, features)
            answer = weight == 1.0
            pmax, choice = (hidden.float() @ head.T).softmax(-1).max(-1)
            bucket = torch.bucketize(pmax, torch.tensor(EDGES[1:-1]), right=True)
            counts += torch.bincount(bucket[answer], minlength=len(counts)).float()
            hits = lookup_hits(tokens, choice)
            copy_counts += torch.bincount(hits[answer].long(), minlength=2).float()
            for spec, draft in drafts.items():
                lh = layer_hidden[:, :-1].float() if layer_hidden is not None else None
                pred = F.pad(draft(draft.target_features(hidden[:, :-1].float(), lh), tokens[:, 1:]), (0, 0, 1, 0))
                logits = torch.full((*pred.shape[:2], head.shape[0]), float("-inf"))
                logits[..., draft.vocab_subset] = pred.float() @ head[draft.vocab_subset].T
                if args.widen:  # the text's own ids join the head where the drafter would hold them
                    ids, seen = text_extras(tokens, in_head[spec], never)
                    extra = (pred.float() @ head[ids].T).masked_fill(~seen, float("-inf"))
                    logits[..., ids] = extra
                ok = answer & (logits.argmax(-1) == choice)
                agree[spec] += torch.bincount(bucket[ok], minlength=len(counts)).float()
                copy_agree[spec] += torch.bincount(hits[ok].long(), minlength=2).float()
    total = float(counts.sum())
    where = str(args.data_dir) if judged else ", ".join(p.stem for p in chosen)
    widened = "; heads widened by the text's tokens" if args.widen else ""
    print(f"{len(seqs)} held-out sequences, {int(total)} answer positions ({where}){widened}")
    for b in range(len(counts)):
        cells = "  ".join(f"{spec} {float(agree[spec][b] / max(counts[b], 1)):.3f}" for spec in drafts)
        hi = min(EDGES[b + 1], 1.0)
        print(
            f"target's top p in [{EDGES[b]:.1f}, {hi:.1f}{']' if hi == 1.0 else ')'}: share {counts[b] / total:.3f}  {cells}"
        )
    print("overall  " + "  ".join(f"{spec} {float(agree[spec].sum()) / total:.3f}" for spec in drafts))
    for k, where in ((1, "a 2-gram lookup proposes the target's token"), (0, "it does not")):
        cells = "  ".join(f"{spec} {float(copy_agree[spec][k] / max(copy_counts[k], 1)):.3f}" for spec in drafts)
        print(f"where {where}: share {float(copy_counts[k]) / total:.3f}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
