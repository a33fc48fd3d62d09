"""The target's batched generation rate (answer tokens/s) per precision and batch width, to pick the data job's.

Usage: ``PYTHONPATH=. .venv/bin/python scripts/data_rate.py --precisions bfloat16,int8 --widths 8,16,32
--threads 1``. Each (precision, width) answers the same ``--prompts`` templated prompts (seed 99, not the data's
seed) greedily in batches of that width, ``--max-new-tokens`` each, after one small warm-up batch, and prints the
answer tokens per second of the whole run (the prompts' prefill included, as in the data job). Greedy; the
answers' lengths still differ a little between widths (a padded batch rounds differently in bfloat16), which is
why the rate is per answer token.
"""

from __future__ import annotations

import argparse
import time

import torch

from spec_core.train.data import PRECISIONS, answer_batch, load_generator
from spec_core.train.prompts import training_prompts


def measure(precision: str, widths: list[int], prompts: list[str], max_new_tokens: int) -> list[dict]:
    target, tokenizer = load_generator(precision)
    answer_batch(target, tokenizer, prompts[:2], 8, False, 0)  # warm-up
    rows = []
    for width in widths:
        t0, tokens = time.perf_counter(), 0
        for i in range(0, len(prompts), width):
            _, answers = answer_batch(target, tokenizer, prompts[i : i + width], max_new_tokens, False, 0)
            tokens += sum(map(len, answers))
        seconds = time.perf_counter() - t0
        rows.append({"precision": precision, "width": width, "answer_tokens": tokens, "s": seconds})
        print(f"{precision:>8} width {width:3d}: {tokens} answer tokens in {seconds:.1f} s = {tokens / seconds:.1f}/s")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precisions", default="bfloat16,int8")
    ap.add_argument("--widths", default="8,16,32")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    prompts = [p for _, p in training_prompts(a.prompts, seed=99)]
    for precision in a.precisions.split(","):
        if precision not in PRECISIONS:
            ap.error(f"unknown precision {precision!r} (one of {PRECISIONS})")
        measure(precision, [int(w) for w in a.widths.split(",")], prompts, a.max_new_tokens)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
