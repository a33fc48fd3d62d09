"""What the app's menus offer and how it launches: plain data and functions, no gradio (``app.py`` wires them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spec_core import guards
from spec_core.methods import known_methods
from visuals.style import token_css

# the live tab's examples: prompt and three methods (the first row is what a new visitor sees)
EXAMPLES = [
    ["Explain in three sentences why the sky is blue.", "pacer", "fixed:4", "ar"],
    ["Write a Python function that checks whether a number is prime.", "heuristic", "fixed:2", "ar"],
    ["List five fruits, one per line.", "confidence:0.4", "fixed:4", "ar"],
    ["What is the capital of France? Answer in one word.", "fixed:4+diversed", "fixed:4+static:0.7", "fixed:4"],
]


def live_method_choices() -> list[str]:
    """Every engine method the live tab can run (peers, which run transformers' own generate, are bench-only)."""
    return [m for m in known_methods() if not m.startswith("hf-")]


def launch_kwargs(css_path: Path | None = None) -> dict[str, Any]:
    """Launch options shared by ``app.py``'s ``__main__`` and the tests (Gradio 6 takes CSS at launch)."""
    css_paths = [css_path] if css_path is not None and Path(css_path).exists() else None
    return {"css": token_css(), "css_paths": css_paths, "ssr_mode": False, "max_file_size": guards.MAX_UPLOAD_BYTES}
