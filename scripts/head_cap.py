"""The trimmed head's cap on copying, per Spec-Bench category, before and after widening it with the text's words.

A feature draft with a trimmed head (its 8,192 most frequent tokens) can never draft a token outside it, so the
share of the target's answer tokens inside the head caps what any method can accept. The draft now widens its head
for each generation with the tokens of the prompt and of the verified text (``spec_core/drafters/feature.py``).
For held-out Spec-Bench questions this prints, per category: the cap before (answer tokens in the head) and after
(in the head, the prompt, or the answer so far), and ``fixed:2``'s acceptance and the drafts it kept from outside
the head with the head as trained and widened (greedy, so both write ``ar``'s text).

    PYTHONPATH=. .venv/bin/python scripts/head_cap.py --per-category 3 --offset 70 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import statistics

import pandas as pd


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-category", type=int, default=3)
    ap.add_argument("--offset", type=int, default=70, help="skip this many questions a category (held out)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--method", default="fixed:2")
    ap.add_argument("--dtype", default="auto")
    a = ap.parse_args(argv)
    if a.per_category < 1 or a.max_new_tokens < 1 or a.offset < 0:
        print("error: --per-category and --max-new-tokens must be at least 1, --offset at least 0")
        return 2

    from spec_core.core.types import SamplingConfig
    from spec_core.drafters import feature
    from spec_core.engine.loop import Generation
    from spec_core.model.models import load_pair
    from spec_core.serve import spec_bench

    pair = load_pair("embedded", dtype=a.dtype)
    head = set(pair.draft.vocab_subset.tolist())
    special = set(getattr(pair.tokenizer, "all_special_ids", None) or ())
    prompts = [p for p in spec_bench.select(a.per_category, a.offset) if not p.get("history")]
    built = feature.FeatureDrafter.__init__
    rows = []
    for p in prompts:
        ar = Generation(pair, p["prompt"], "ar", a.max_new_tokens, SamplingConfig(), display=False).run()
        seen = set(ar.prompt_ids) - special
        before = after = 0
        for t in ar.token_ids:
            before += t in head
            after += t in head or t in seen
            seen.add(t)
        row = {"category": p["category"], "id": p["id"], "tokens": len(ar.token_ids), "cap_before": before}
        row["cap_after"] = after
        for widen in (False, True):

            def init(self, draft, special_ids=(), widen_=True, _w=widen):
                built(self, draft, special_ids, _w)

            feature.FeatureDrafter.__init__ = init
            try:
                run = Generation(pair, p["prompt"], a.method, a.max_new_tokens, SamplingConfig(), display=False).run()
            finally:
                feature.FeatureDrafter.__init__ = built
            assert run.token_ids == ar.token_ids, "a lossless method wrote another text"
            tag = "widened" if widen else "trimmed"
            row[f"drafted_{tag}"] = run.stats.drafted_tokens
            row[f"accepted_{tag}"] = run.stats.accepted_tokens
            row[f"kept_outside_{tag}"] = sum(t not in head for e in run.events for t in e.draft_tokens[: e.accepted])
        rows.append(row)
        print(row, flush=True)
    df = pd.DataFrame(rows)
    g = df.groupby("category")
    table = pd.DataFrame(
        {
            "answers": g.size(),
            "cap before": g.cap_before.sum() / g.tokens.sum(),
            "cap after": g.cap_after.sum() / g.tokens.sum(),
            "acceptance trimmed": g.accepted_trimmed.sum() / g.drafted_trimmed.sum(),
            "acceptance widened": g.accepted_widened.sum() / g.drafted_widened.sum(),
            "kept outside the head (widened)": g.kept_outside_widened.sum(),
        }
    )
    total = df.sum(numeric_only=True)
    table.loc["all"] = [
        len(df),
        total.cap_before / total.tokens,
        total.cap_after / total.tokens,
        total.accepted_trimmed / total.drafted_trimmed,
        total.accepted_widened / total.drafted_widened,
        total.kept_outside_widened,
    ]
    print(
        f"\n{a.method}, {pair.precision}, {a.max_new_tokens} tokens, questions {a.offset}+ ({a.per_category} a category)"
    )
    print(table.round(3).to_string())
    print(f"median answer length {statistics.median(df.tokens):.0f} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
