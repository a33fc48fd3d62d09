"""PACER heads' training settings, chosen on a validation split of the *training* prompts (docs/PACER.md).

The held-out prompts of ``train pacer`` (index % 4 == 0) are dropped here and never seen; the prompts with index
% 4 == 2 act as the held-out set instead (training then uses the rest). Each argument is one setting, as
``key=value`` pairs of :class:`spec_core.train.pacer.TrainConfig` separated by ``;`` plus ``variant=NAME``:

    python scripts/pacer_validation.py "variant=paper" "variant=paper;steps=1200" "variant=paper;width=32" \
        "variant=hybrid"
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    from spec_core.model.models import load_pair
    from spec_core.train import pacer as P

    pair = load_pair("embedded", draft="feature")
    data = P.load_data(sorted(Path("runs/pacer/feature").glob("shard_*.safetensors")))
    data["token_embed"] = P.token_embeddings(pair, data["token"])
    keep = data["prompt"] % 4 != 0  # the real held-out prompts: set aside
    n = keep.shape[0]
    data = {k: (v[keep] if v.shape[0] == n else v) for k, v in data.items()}
    data["prompt"] = data["prompt"] - 2  # index % 4 == 2 becomes the split train_*_head holds out
    print(f"{len(data['label'])} tokens, {int((data['prompt'] % 4 == 0).sum())} in the validation split")
    for spec in argv:
        kw = dict(item.split("=") for item in spec.split(";") if item)
        variant = kw.pop("variant", "paper")
        cfg = P.TrainConfig(**{k: (int(v) if v.isdigit() else float(v)) for k, v in kw.items()})
        t0 = time.time()
        trainer = P.train_paper_head if variant in P.PAPER_VARIANTS else P.train_head
        _, m = trainer(data, cfg, variant, progress=False)
        print(
            f"{variant} {kw}: validation AUC {m['auc']}, ECE {m['ece']}, BCE {m['bce']}, first position AUC "
            f"{m['auc_position1']} (draft's Π q AUC {m['auc_draft_cumprob']}, q at position 1 "
            f"{m['auc_position1_draft_q']}) {m.get('by_block', '')} [{time.time() - t0:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
