"""The app's backend: requests parsed at the edge, the Live tab's and the API's streams of lanes, the GPU slot, the
Analyzer's records, prompt sets and sweeps, the Playground's recordings, a Live run's exports and why a draft was
rejected. ``app.py``, ``ui/`` and ``visuals/`` import from here, never from :mod:`spec_core.analysis`."""
