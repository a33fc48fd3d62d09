#!/usr/bin/env bash
# Simulate the Docker Space on this machine, without Docker: copy the build context (the tree minus
# .dockerignore), make a fresh venv holding only what the image installs (scripts/space_setup.sh), start the
# app the way the image's CMD does, and call /generate through gradio_client.
#   scripts/simulate_space.sh [WORKDIR]     (default runs/space-sim; a few minutes, most of it pip)
# Exit status 0 when /generate answered with generated text.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(realpath -m "${1:-$ROOT/runs/space-sim}")"
PORT="${SPACE_SIM_PORT:-7861}"
rm -rf "$WORK" && mkdir -p "$WORK/app"

echo "== 1. build context (the tree minus .dockerignore) -> $WORK/app"
excludes=()
while IFS= read -r pattern; do
  pattern="${pattern%%#*}"; pattern="${pattern// /}"
  [ -n "$pattern" ] && excludes+=("--exclude=${pattern#\*\*/}")
done < "$ROOT/.dockerignore"
tar -C "$ROOT" "${excludes[@]}" -cf - . | tar -C "$WORK/app" -xf -
du -sh "$WORK/app"

echo "== 2. a fresh venv with only what the Space installs"
python3 -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
export PYTHONNOUSERSITE=1 PYTHONPATH="$WORK/app" SPECSCOPE_CACHE="$WORK/cache" HOME="$WORK/home"
mkdir -p "$HOME"
unset VIRTUAL_ENV
start=$(date +%s)
"$WORK/app/scripts/space_setup.sh" "$PY"
echo "setup took $(( $(date +%s) - start )) s; packages: $("$PY" -m pip list --format=freeze | wc -l)"
if "$PY" -m pip list --format=freeze | grep -Ei '^(pytest|playwright|ruff)=='; then
  echo "FAIL: test tools leaked into the Space's environment"; exit 1
fi

echo "== 3. the image's CMD: python app.py (port $PORT)"
cd "$WORK/app"
GRADIO_SERVER_NAME=127.0.0.1 GRADIO_SERVER_PORT="$PORT" "$PY" app.py > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do
  if "$PY" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$PORT)))"; then break; fi
  kill -0 "$SERVER" 2>/dev/null || { echo "FAIL: the app exited"; tail -30 "$WORK/server.log"; exit 1; }
  sleep 1
done

echo "== 4. /generate through gradio_client"
"$PY" - "$PORT" <<'PYEOF'
import sys, time
from gradio_client import Client

client = Client(f"http://127.0.0.1:{sys.argv[1]}/", verbose=False)
for method, temperature in (("heuristic", 0.0), ("fixed:4", 0.8)):
    t0 = time.perf_counter()
    out = client.predict("What is the capital of France?", method, 24, temperature, 1, api_name="/generate")
    print(f"{method} T={temperature}: {time.perf_counter() - t0:.1f} s, new_tokens={out['new_tokens']}, "
          f"tau={out['tau']:.2f}, text={out['text'][:80]!r}")
    assert out["new_tokens"] > 0 and out["text"].strip(), out
print("OK: the simulated Space serves /generate on the embedded pair with its trained draft")
PYEOF
