"""The words the live tab uses, explained once: a short glossary, and one line per method family for lane headers.

A part's words are its registry class's (``glossary`` and ``about``, :mod:`spec_core.core.words`): a drafter,
policy or verifier added with one class and one registry line is in the glossary and its lane's header with no
edit here, and a verifier whose class says ``lossless = False`` is called lossy in both.
"""

from __future__ import annotations

import html

from spec_core.core import words
from spec_core.core.errors import SpecScopeError
from spec_core.drafters import DRAFTERS
from spec_core.engine.methods import families, spec_of
from spec_core.policies import POLICIES
from spec_core.verifiers import VERIFIERS
from visuals.lossy import BADGE

GENERAL: tuple[tuple[str, str], ...] = (  # the page's own words; each part's rows are its class's (glossary_entries)
    ("target", "the model whose output we want (here SmolLM2-135M-Instruct); it checks every draft."),
    ("draft", "a small, fast model that guesses the target's next tokens."),
)
ROUND_WORDS: tuple[tuple[str, str], ...] = (
    (
        "τ (tau)",
        "new tokens per target forward pass. ar: exactly 1; speculation pays when τ is high enough to "
        "cover the draft's cost.",
    ),
    ("α (alpha)", "accepted drafts / drafted tokens."),
    ("accepted", "a draft token the target agreed with, kept for free."),
    (
        "rejected · discarded",
        "the first draft the target disagreed with, and the drafts after it (never checked "
        "on their own): struck through, shown only with 'show rejected drafts'.",
    ),
    (
        "recovered",
        "the token at the first rejection: under a lossless rule the target's own (drawn from what the draft "
        "missed); a lossy verifier draws it from its own rule (e.g. ν's residual).",
    ),
    ("bonus", "one extra target token when every draft passed: the verification pass already computed it."),
)
PAGE_WORDS: tuple[tuple[str, str], ...] = (
    (
        "embedded",
        "the model pair shipped with SpecScope: SmolLM2-135M-Instruct as target, the project's own "
        "trained draft; it runs offline on a CPU.",
    ),
    (
        "bfloat16 · float32",
        "precision: bfloat16 moves half the bytes of float32 (int8 a quarter); on a CPU every target pass is "
        "batch-invariant, a token's logits the same in a k-token pass as in a 1-token step, so lossless lanes "
        "write ar's text at every precision; float32 is exact arithmetic and, for one token at a time, slower.",
    ),
    (
        "speedup, measured · predicted",
        "measured: this lane's tokens/s over ar's, each on its own clock; "
        "predicted: the cost model's speedup at this lane's τ with this run's "
        "median forward costs.",
    ),
)


def _lossy_row() -> tuple[str, str]:
    """ "lossy", naming the registered verifiers whose class says they are not lossless."""
    lossy = [prefix for prefix, cls in VERIFIERS.items() if not words.is_lossless(cls)]
    return (
        "lossy",
        f"a verifier that keeps drafts the target alone would not have written ({', '.join(lossy)}): "
        "more drafts kept, but the text is no longer the target's; such a lane wears a 'lossy' badge and "
        "says how far its text is from ar's.",
    )


def glossary_entries() -> tuple[tuple[str, str], ...]:
    """The glossary: the page's words, and each registered part's own rows (drafters, policies, verifiers: its
    class's ``glossary``, :mod:`spec_core.core.words`), read now, so a part registered later is in it."""
    parts: dict[str, str] = {}
    for registry in (DRAFTERS, POLICIES, VERIFIERS):
        for cls in registry.values():
            for term, text in words.glossary(cls):
                parts.setdefault(term, text)  # a family that inherits its parent's rows (hybrid) adds none
    return (*GENERAL, *parts.items(), *ROUND_WORDS, _lossy_row(), *PAGE_WORDS)


def glossary_html() -> str:
    """The glossary panel (its element id, ``glossary``, is what the lane headers link to)."""
    rows = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in glossary_entries())
    return f'<div class="spec-glossary" id="glossary"><h4>Glossary</h4><dl>{rows}</dl></div>'


def lane_header(method: str) -> str:
    """A lane's heading (markdown): the method (with a "lossy" badge when its text is not the target's), what
    its family does, and a link to the glossary."""
    try:
        spec = spec_of(method)
    except SpecScopeError:  # a lane showing why its name does not parse: the name alone, no family, no badge
        spec = None
    known = families()  # from the registries: a part added there is named here with no other edit
    what = "; ".join(known[h] for h in (spec.heads if spec else ()) if h in known)
    lead = f"{html.escape(what)} · " if what else ""
    badge = f" {BADGE}" if spec is not None and spec.is_lossy else ""
    return f"### {method}{badge}\n<small>{lead}[what do these words mean?](#glossary)</small>"
