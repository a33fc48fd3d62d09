"""SpecScope engine: speculative decoding with pluggable draft-length policies, verifiers and drafters.

Public entry points (imported lazily so that ``import spec_core`` stays cheap):

- :func:`spec_core.model.models.load_pair` — the target + draft + tokenizer.
- :func:`spec_core.engine.loop.stream` / :func:`spec_core.engine.loop.generate` — the decoding loop.
"""

from __future__ import annotations

from spec_core.core.threads import quiet_waits

quiet_waits()  # before torch loads OpenMP: idle threads spin briefly, then sleep (spec_core/core/threads.py)

__all__ = ["load_pair", "stream", "generate"]


def __getattr__(name: str):
    if name == "load_pair":
        from spec_core.model.models import load_pair  # on first use: `import spec_core` stays light

        return load_pair
    if name in ("stream", "generate"):
        from spec_core.engine import loop as engine  # on first use: torch loads after the wait policy

        return getattr(engine, name)
    raise AttributeError(name)
