"""The Gradio wiring that ``app.py`` builds on, one module per job (docs/STYLE.md §6: wiring only, no torch).

- :mod:`ui.shared` — pieces every tab uses: figure slots, lane columns, errors shown in place;
- :mod:`ui.analyzer` — the Analyzer tab (prompt sets, its own sampling settings, replays, the DIVERSED panel);
- :mod:`ui.playground` — the Playground tab (its own text to record, the policy knobs).

``app.py`` keeps the Live tab, the ``/generate`` API and ``build_demo``. Like ``app.py``, nothing here computes:
requests are parsed by :mod:`spec_core.requests`, pictures and HTML come from :mod:`visuals`.
"""
