"""Block drafters of several folders on the same held-out blocks: ``train block``'s own evaluation draws, built once.

``PYTHONPATH=. python scripts/compare_blocks.py data/s17 --shards 148 assets/block runs/block21/assets``

The held-out sequences are those ``train block --data DATA --shards N`` held out (its last four shards); the blocks
are :func:`spec_core.train.block.evaluate`'s draws (seed 12345, 64 a batch), computed once and scored by every
drafter, so two trainings are compared on the very same blocks (the greedy τ estimate 1 + Σ_k P(1..k all agree)).
A copying drafter is scored without its gate: this compares the drafters themselves.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

from spec_core.drafters.block.assets import load_block_model
from spec_core.train import block as tb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="the shard folder the drafters trained on")
    ap.add_argument("dirs", nargs="+", help="folders of block drafter assets")
    ap.add_argument("--shards", type=int, default=0, help="train block's --shards (0: all)")
    ap.add_argument("--blocks", type=int, default=384)
    ap.add_argument("--losses", default="uniform,decay,dpace")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    _, held, _ = tb.load_sequences(a.data, tb.BlockTrainConfig(loss="dpace").heldout_shards, a.shards)
    target = tb.load_training_target(torch.float32)
    features = tb.online_features(target, held, tb.TARGET_LAYERS)
    rng, batches = random.Random(12345), []
    while len(batches) * 64 < a.blocks:
        idx, anchors = tb.sample_blocks(held, 64, 1, rng)
        batches.append(tb.make_batch(held, idx, anchors, 8, features))
    out = {}
    for d in a.dirs:
        for name in a.losses.split(","):
            model = load_block_model(target, name, Path(d))[0].float().eval()
            prefix = torch.zeros(7)
            with torch.no_grad():
                for batch in batches:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        _, match = tb.block_forward(model, batch)
                    prefix += match.long().cumprod(-1).float().sum((0, 1))
            p = (prefix / (len(batches) * 64)).tolist()
            out[f"{d}/{name}"] = {"tau": round(1 + sum(p), 4), "accept_by_position": [round(x, 4) for x in p]}
            print(f"{d}/{name}: τ {out[f'{d}/{name}']['tau']:.4f}, P(acc ≥ 1, 2, 3) {p[:3]}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
