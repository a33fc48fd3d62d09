"""SpecScope: watch speculative decoding work — live side by side, token by token, round by round.

Wiring only (docs/STYLE.md §6): this file builds the page from its three tabs, each laid out and wired in its own
module (:mod:`ui.live`, :mod:`ui.analyzer`, :mod:`ui.playground`), and serves the ``/generate`` API. What flows
from one tab to another is one :class:`ui.shared.Visitor`, created here once. Requests are parsed at the edge
(:mod:`spec_core.serve.requests`), runs stream from :mod:`spec_core.serve.live`, and :mod:`visuals` makes the HTML and plotly
figures. No model loads at import: the pair is loaded on first use, warmed up and cached (:func:`get_pair`);
``build_demo(pair_loader=...)`` lets tests inject a tiny pair. On a ZeroGPU Space every handler that runs the model
asks for a GPU slot sized by its request (:mod:`spec_core.serve.gpu_slot`). Run: ``python app.py`` (honours
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from spec_core.core import guards
from spec_core.core.threads import apply_threads
from spec_core.serve import gpu_slot, live, requests
from spec_core.serve.prompts import prompt_sets
from ui.analyzer import analyzer_tab
from ui.live import DEFAULT_METHODS, live_slot_s, live_tab
from ui.playground import playground_tab
from ui.shared import Visitor, ui_errors
from visuals import menus
from visuals.intro import intro_html
from visuals.menus import EXAMPLES

__all__ = [  # what scripts and tests read from here
    "DEFAULT_METHODS",
    "EXAMPLES",
    "build_demo",
    "demo",
    "generate_slot_s",
    "get_pair",
    "launch_kwargs",
    "live_slot_s",
    "pair_choices",
]

ROOT = Path(__file__).resolve().parent
CSS_PATH = ROOT / "assets" / "app.css"

PairLoader = live.PairLoader  # (pair name, precision) → spec_core.model.models.ModelPair
get_pair = live.warm_pair  # the default loader: load once, warm up, cache
pair_choices = requests.offered_pairs

prompt_files = functools.partial(prompt_sets, ROOT)  # the project's prompt sets (paths relative to ROOT)


def generate_slot_s(prompt, method="heuristic", max_new_tokens=64, *rest, **kwargs) -> int:
    """``/generate``'s GPU slot on ZeroGPU: one lane of ``max_new_tokens`` tokens."""
    return gpu_slot.budget_s(kwargs.get("max_new_tokens", max_new_tokens))


def generate_api(pair_loader: PairLoader) -> None:
    """``/generate(prompt, method, max_new_tokens, temperature, seed)`` (a contract: docs/ARCHITECTURE.md)."""

    @ui_errors
    def generate(
        prompt: str, method: str = "heuristic", max_new_tokens: int = 64, temperature: float = 0.0, seed: int = 0
    ) -> Iterator[dict]:
        """Generate with one method, streaming stats dicts; the last one has new_tokens, tau, tokens_per_s, text."""
        request = requests.parse_generate_request(prompt, method, max_new_tokens, temperature, seed)
        yield from live.stats_stream(pair_loader("embedded", request.spec.precision or "auto"), request)

    def ended(last: dict | None, note: str) -> dict:  # ZeroGPU took the GPU back: the stats so far, and why
        return {
            **(last or {"new_tokens": 0, "tau": 0.0, "tokens_per_s": 0.0, "text": ""}),
            "finished": False,
            "error": note,
        }

    gr.api(gpu_slot.until_slot_end(gpu_slot.gpu_slot(generate, generate_slot_s), ended), api_name="generate")


def build_demo(pair_loader: PairLoader = get_pair) -> gr.Blocks:
    """The whole app. ``pair_loader(name, precision) -> ModelPair`` is the only way handlers reach a model."""
    pairs = pair_choices()
    with gr.Blocks(title="SpecScope — speculative decoding, visualised") as demo:
        visitor = Visitor.create()  # the page's cross-tab state, handed to every tab
        gr.HTML(intro_html(), elem_id="intro-block")
        with gr.Tab("Live", id="live"):
            live_tab(visitor, pair_loader, pairs)
        with gr.Tab("Analyzer", id="analyzer"):
            analyzer_tab(visitor, pair_loader, pairs, prompt_files, ROOT)
        with gr.Tab("Playground", id="playground"):
            playground_tab(visitor, pair_loader, pairs)
        generate_api(pair_loader)
    return demo


launch_kwargs = functools.partial(menus.launch_kwargs, CSS_PATH)  # shared by __main__ and the tests
demo = build_demo()
gpu_slot.place_on_gpu()  # ZeroGPU only: the embedded pair on cuda at import (elsewhere it loads on first use)

if __name__ == "__main__":
    limits = guards.serving_limits()  # 1 request at a time on a CPU, 4 on CUDA, 16 waiting; env overrides
    apply_threads(at_once=limits.concurrency)  # the cores this process may use, shared by the requests at once
    live.start_background()  # the default pair loaded and warmed; this machine's cost table measured if missing
    demo.queue(default_concurrency_limit=limits.concurrency, max_size=limits.queue_size).launch(**launch_kwargs())
