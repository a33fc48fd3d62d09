"""SpecScope's figures and HTML, built from engine events only (no gradio here; ``app.py`` wires them).

- :mod:`visuals.style` — the colour-blind-safe palette (Okabe & Ito) shared by tokens and plots;
- :mod:`visuals.tokens` — generated text coloured by each token's origin, with hover details;
- :mod:`visuals.plots` — per-round draft/accepted lengths, acceptance by position, accepted-length histogram;
- :mod:`visuals.lens` — the training lens: uniform, DFlash decay and D-PACE weights of a real drafted block;
- :mod:`visuals.stepthrough` — one round replayed step by step with the numbers of the rule in force;
- :mod:`visuals.labels` — always-on point labels placed where they do not overlap (the Pareto figure's);
- :mod:`visuals.views` — the plug-in registry: which figures (and which rule explanation) each method gets.
"""

from __future__ import annotations
