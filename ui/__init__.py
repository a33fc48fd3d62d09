"""The Gradio wiring that ``app.py`` builds on, one module per job (docs/STYLE.md §6: wiring only, no torch).

- :mod:`ui.shared` — pieces every tab uses: the :class:`~ui.shared.Visitor` (the state that flows between tabs),
  figure slots, lane columns, errors shown in place;
- :mod:`ui.live` — the Live tab (methods side by side, streamed), with its step-through panel :mod:`ui.live_steps`;
- :mod:`ui.analyzer` — the Analyzer tab (prompt sets, its own sampling settings, replays, the DIVERSED panel);
- :mod:`ui.playground` — the Playground tab (its own text to record, the policy knobs).

Each tab function takes ``(visitor, pair_loader, pairs, ...)``, lays the tab out and wires it. ``app.py`` calls
them in ``build_demo`` and keeps the ``/generate`` API. Like ``app.py``, nothing here computes: requests are parsed
by :mod:`spec_core.serve.requests`, pictures and HTML come from :mod:`visuals`.
"""
