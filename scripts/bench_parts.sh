#!/usr/bin/env bash
# The benchmark split over N one-thread processes (one per core), each on every N-th prompt of the project's set.
# Every part interleaves all methods prompt by prompt, so its speedups over `ar` are same-run ratios; a
# one-thread process keeps its core even when something else runs (a two-thread run stalls at every barrier).
# Usage: scripts/bench_parts.sh "ar,fixed:2,pacer" [PARTS=2] [REPEATS=1] [OUT=runs/bench_parts] [MAX_NEW=96]
set -euo pipefail
cd "$(dirname "$0")/.."
METHODS="$1"; PARTS="${2:-2}"; REPEATS="${3:-1}"; OUT="${4:-runs/bench_parts}"; MAX_NEW="${5:-96}"
PY="${PYTHON:-.venv/bin/python}"
mkdir -p "$OUT"
"$PY" - "$PARTS" "$OUT" <<'PY'
import sys
parts, out = int(sys.argv[1]), sys.argv[2]
lines = [line for line in open("prompts/specscope.jsonl") if line.strip()]
for k in range(parts):
    open(f"{out}/prompts_{k}.jsonl", "w").writelines(lines[k::parts])
PY
for k in $(seq 0 $((PARTS - 1))); do
  OMP_NUM_THREADS=1 "$PY" -m spec_core bench --prompts "$OUT/prompts_$k.jsonl" --methods "$METHODS" \
    --max-new-tokens "$MAX_NEW" --repeats "$REPEATS" --threads 1 --out "$OUT/part_$k.csv" > "$OUT/part_$k.log" 2>&1 &
done
wait
"$PY" - "$OUT" <<'PY'
import glob, sys
import pandas as pd
from spec_core.analysis.bench import summarize
out = sys.argv[1]
df = pd.concat([pd.read_csv(f) for f in sorted(glob.glob(f"{out}/part_*.csv"))], ignore_index=True)
df.to_csv(f"{out}/bench.csv", index=False)
pd.set_option("display.width", 200)
print(summarize(df).to_string())
PY
